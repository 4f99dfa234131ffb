package text

import "strings"

// What the web UI and chat notifiers render as Markdown (details,
// summaries, notices) quotes values from a delivery's input and from
// partners' answers; none of it may become markup (a link that reads
// "Click to approve", an image, HTML).

// Code is s as a Markdown code span, on one line: shown and copied as
// typed. Its fence is longer than any run of backticks in s, so a value
// holding backticks cannot close it early.
func Code(s string) string {
	s = oneLine(s)
	if s == "" {
		return "(none)"
	}
	tick := "`"
	for strings.Contains(s, tick) {
		tick += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return tick + s + tick
}

// Fence is s as a fenced code block, its fence longer than any run of
// backticks in s.
func Fence(s string) string {
	f := "```"
	for strings.Contains(s, f) {
		f += "`"
	}
	return f + "\n" + s + "\n" + f
}

// markup is every character that can start inline Markdown (emphasis,
// code, links, images, autolinks and HTML, entities, strikethrough,
// tables) or escape one; each gets a backslash.
const markup = "\\`*_[]<>!&~|"

// Markdown is s as literal text within a line of Markdown prose: each
// character that could start markup is backslash-escaped, and line breaks
// become spaces, so s cannot start a block (a heading, a list, a quote).
func Markdown(s string) string {
	s = oneLine(s)
	if !strings.ContainsAny(s, markup) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r < 128 && strings.ContainsRune(markup, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}
