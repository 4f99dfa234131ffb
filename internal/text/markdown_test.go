package text

import "testing"

func TestMarkdown(t *testing.T) {
	for in, want := range map[string]string{
		"create-ticket": "create-ticket",
		"[Click to approve](http://example.invalid)": `\[Click to approve\](http://example.invalid)`,
		"![x](http://example.invalid/i.png)":         `\!\[x\](http://example.invalid/i.png)`,
		"<img src=x onerror=alert(1)>":               `\<img src=x onerror=alert(1)\>`,
		"**bold** _it_ ~~gone~~ `code` a|b &#91; \\": "\\*\\*bold\\*\\* \\_it\\_ \\~\\~gone\\~\\~ \\`code\\` a\\|b \\&#91; \\\\",
		"line\n# heading":                            "line # heading",
	} {
		if got := Markdown(in); got != want {
			t.Errorf("Markdown(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCode(t *testing.T) {
	for in, want := range map[string]string{
		"order-7":       "`order-7`",
		"":              "(none)",
		"a`b":           "``a`b``",
		"``x``":         "``` ``x`` ```",
		"`":             "`` ` ``",
		"two\nlines":    "`two lines`",
		"[l](http://x)": "`[l](http://x)`",
	} {
		if got := Code(in); got != want {
			t.Errorf("Code(%q) = %q, want %q", in, got, want)
		}
	}
}
