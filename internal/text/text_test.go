package text

import "testing"

func TestExcerpt(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"héllo", 2, "h…"}, // é is two bytes: the cut backs up to its start
		{"héllo", 3, "hé…"},
		{"é", 0, "…"},
	} {
		if got := Excerpt(c.in, c.n); got != c.want {
			t.Errorf("Excerpt(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
	if got := Cut("héllo", 2); got != "h" {
		t.Errorf("Cut(%q, 2) = %q, want %q", "héllo", got, "h")
	}
}
