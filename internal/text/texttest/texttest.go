// Package texttest checks Markdown meant for the Temporal web UI's details
// panels.
package texttest

import (
	"strings"
	"unicode/utf8"
)

// FenceWidth is the widest line of a fenced code block that shows whole in
// the web UI's details panel (about 560 px at its narrowest): the UI does
// not wrap code blocks.
const FenceWidth = 60

// WideFenced are the lines of md's fenced code blocks wider than
// FenceWidth characters.
func WideFenced(md string) []string {
	var wide []string
	fence := ""
	for line := range strings.Lines(md) {
		line = strings.TrimRight(line, "\n")
		switch {
		case fence == "" && strings.HasPrefix(line, "```"):
			fence = line[:len(line)-len(strings.TrimLeft(line, "`"))]
		case fence != "" && line == fence:
			fence = ""
		case fence != "" && utf8.RuneCountInString(line) > FenceWidth:
			wide = append(wide, line)
		}
	}
	return wide
}
