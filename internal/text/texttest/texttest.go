// Package texttest checks Markdown meant for the Temporal web UI's details
// panels. Tests only.
package texttest

import (
	"strings"
	"unicode/utf8"

	"github.com/abde64c9/courier/internal/text"
)

// FenceWidth is text.FenceWidth, for the tests' messages.
const FenceWidth = text.FenceWidth

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
