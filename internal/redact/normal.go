package redact

import (
	"unicode/utf16"
	"unicode/utf8"
)

// normal is s with its escapes decoded, once, left to right: %XX in either
// case (URL encodings, with or without '/' escaped), and a JSON string's
// escapes (\uXXXX, a surrogate pair as one, \/, \", \\, \n, ...). An
// escape that does not decode stays as it is. With at, it also records for
// each byte of the result where in s the escape (or byte) that wrote it
// begins, and len(s) after the last.
func normal(s string, at *[]int) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		start, before := i, len(out)
		switch {
		case s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			out = append(out, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 3
		case s[i] == '\\' && i+1 < len(s):
			if r, w := jsonEscape(s[i:]); w > 0 {
				out = utf8.AppendRune(out, r)
				i += w
				break
			}
			out = append(out, s[i])
			i++
		default:
			out = append(out, s[i])
			i++
		}
		if at != nil {
			for range len(out) - before {
				*at = append(*at, start)
			}
		}
	}
	if at != nil {
		*at = append(*at, len(s))
	}
	return out
}

// jsonEscape decodes the JSON escape s starts with: the character and the
// escape's length, or 0 if s starts with none (a lone surrogate is none).
func jsonEscape(s string) (rune, int) {
	switch s[1] {
	case '"', '\\', '/':
		return rune(s[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, ok := hex4(s[2:])
		if !ok {
			return 0, 0
		}
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if lo, ok := hex4(s[8:]); ok {
				if p := utf16.DecodeRune(r, lo); p != utf8.RuneError {
					return p, 12
				}
			}
		}
	}
	return 0, 0
}

func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for i := range 4 {
		if !isHex(s[i]) {
			return 0, false
		}
		r = r<<4 | rune(unhex(s[i]))
	}
	return r, true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
