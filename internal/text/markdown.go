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

// FenceWidth is the widest line of a fenced code block that shows whole in
// the web UI's details panel (about 560 px at its narrowest): the UI does
// not wrap code blocks.
const FenceWidth = 60

// Wrap breaks each line of s at spaces into lines of at most width
// characters, and a word longer than width into pieces of width: for text
// a code block quotes whole (an attempt's evidence), which the web UI
// would otherwise cut at the panel's edge.
func Wrap(s string, width int) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		var cur []rune
		flush := func() {
			out = append(out, strings.TrimRight(string(cur), " "))
			cur = cur[:0]
		}
		for i, word := range strings.Split(line, " ") {
			w := []rune(word)
			if i > 0 {
				if len(cur)+1+len(w) > width && len(cur) > 0 {
					flush()
				} else {
					cur = append(cur, ' ')
				}
			}
			for len(cur)+len(w) > width {
				n := width - len(cur)
				cur = append(cur, w[:n]...)
				w = w[n:]
				flush()
			}
			cur = append(cur, w...)
		}
		flush()
	}
	return strings.Join(out, "\n")
}

// DetailsEnd ends details the web UI shows in a frame: the UI sizes the
// frame to its body's height, which leaves out the first block's top
// margin, so the last lines would be cut. A last line holding only a
// no-break space (the UI shows an entity as typed) takes the cut.
const DetailsEnd = "\n\n\u00a0"
