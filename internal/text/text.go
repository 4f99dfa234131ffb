// Package text cuts strings for messages and records. It is pure (no I/O,
// no clock, no randomness), so the deterministic workflow code may use it
// as well as the worker and the activities. Pure: the workflows import it as
// well as the commands.
package text

import (
	"time"
	"unicode/utf8"
)

// Cut is s cut to at most n bytes, back to the start of a rune, so that a
// cut never splits a character.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Excerpt cuts s to at most n bytes (and "…"), on a rune boundary.
func Excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Cut(s, n) + "…"
}

// UTC is a time as the web UI's details show it: UTC, to the second, and
// saying so, since the UI shows its own times in the viewer's zone.
func UTC(t time.Time) string { return t.UTC().Format(time.DateTime) + " UTC" }
