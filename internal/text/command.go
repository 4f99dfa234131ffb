package text

import "strings"

// Command is a shell command written one flag per line, every line but the
// last ending in a backslash: the web UI cuts a code block's long lines
// rather than wrapping them, and a shell takes the lines, pasted whole, as
// one command.
func Command(name string, flags ...string) string {
	return strings.Join(append([]string{name}, flags...), " \\\n  ")
}

// Shell is s as one word a POSIX shell takes as it is: unchanged when it
// holds only characters no shell treats specially, else single-quoted. A
// name a caller chose (a destination's, a gate's) goes into a command an
// operator pastes only through it, so that the name cannot add a command.
func Shell(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !plainShell(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func plainShell(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.,:/@%+=", r)
}

// Printable is s with every control character (C0, DEL, C1: terminal
// escapes among them) taken out, for a terminal.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r >= 0x7f && r < 0xa0 {
			return -1
		}
		return r
	}, s)
}
