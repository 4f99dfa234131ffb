package text

import (
	"testing"
	"time"
)

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

func TestCommand(t *testing.T) {
	if got, want := Command("courier destination resume crm", "--by <YOUR-NAME>", `--note "why"`),
		"courier destination resume crm \\\n  --by <YOUR-NAME> \\\n  --note \"why\""; got != want {
		t.Errorf("Command = %q, want %q", got, want)
	}
	if got := Command("courier list"); got != "courier list" {
		t.Errorf("Command without flags = %q", got)
	}
}

func TestUTC(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	if got := UTC(at); got != "2026-03-01 09:00:00 UTC" {
		t.Errorf("UTC = %q", got)
	}
}

func TestWrap(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"short line", "short line"},
		{"one two three four", "one two\nthree four"},
		{"abcdefghijklmnop", "abcdefghij\nklmnop"},
		{"x abcdefghijklmnop", "x\nabcdefghij\nklmnop"},
		{"first line\nsecond", "first line\nsecond"},
		{"éééééééééééé", "éééééééééé\néé"},
	} {
		if got := Wrap(c.in, 10); got != c.want {
			t.Errorf("Wrap(%q, 10) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestShell(t *testing.T) {
	for in, want := range map[string]string{
		"legacy":                "legacy",
		"stripe-eu.v2":          "stripe-eu.v2",
		"legacy; curl x | sh #": `'legacy; curl x | sh #'`,
		"it's":                  `'it'\''s'`,
		"":                      "''",
		"$(rm -rf ~)":           `'$(rm -rf ~)'`,
		"a\nb":                  "'a\nb'",
	} {
		if got := Shell(in); got != want {
			t.Errorf("Shell(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{"legacy\x1b[31m red": "legacy[31m red", "a\u009bb": "ab", "Zürich": "Zürich"} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}
