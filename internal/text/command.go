package text

import "strings"

// Command is a shell command written one flag per line, every line but the
// last ending in a backslash: the web UI cuts a code block's long lines
// rather than wrapping them, and a shell takes the lines, pasted whole, as
// one command.
func Command(name string, flags ...string) string {
	return strings.Join(append([]string{name}, flags...), " \\\n  ")
}
