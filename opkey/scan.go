package opkey

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// The token scanning CanonicalJSON's parser builds on: white space,
// literals, numbers, escapes, and the syntax errors they report.

func skipSpace(in []byte, i int) int {
	for i < len(in) && (in[i] == ' ' || in[i] == '\t' || in[i] == '\n' || in[i] == '\r') {
		i++
	}
	return i
}

func syntaxError(in []byte, i int, context string) error {
	if i >= len(in) {
		return fmt.Errorf("invalid JSON at offset %d: unexpected end of input", i)
	}
	return fmt.Errorf("invalid JSON at offset %d: invalid character %s %s", i, quoteByte(in[i]), context)
}

// quoteByte names a byte as encoding/json's syntax errors do.
func quoteByte(b byte) string {
	switch {
	case b == '\'':
		return `'\''`
	case b == '"':
		return `'"'`
	case b < 0x20 || b >= utf8.RuneSelf:
		return fmt.Sprintf("0x%02x", b)
	}
	return "'" + string(rune(b)) + "'"
}

// scanLiteral checks the true, false or null at in[i:] and returns its end.
func scanLiteral(in []byte, i int) (int, error) {
	lit := "null"
	if in[i] == 't' {
		lit = "true"
	} else if in[i] == 'f' {
		lit = "false"
	}
	for k := range len(lit) {
		if i+k == len(in) || in[i+k] != lit[k] {
			return 0, syntaxError(in, i+k, "in literal "+lit)
		}
	}
	return i + len(lit), nil
}

// scanNumber checks the JSON number grammar at in[i:] and returns its end:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(in []byte, i int) (int, error) {
	context := "looking for beginning of value"
	if in[i] == '-' {
		i++
		context = "in numeric literal"
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && '1' <= in[i] && in[i] <= '9':
		i = skipDigits(in, i)
	default:
		return 0, syntaxError(in, i, context)
	}
	if i < len(in) && in[i] == '.' {
		j := skipDigits(in, i+1)
		if j == i+1 {
			return 0, syntaxError(in, j, "after decimal point in numeric literal")
		}
		i = j
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		j := skipDigits(in, i)
		if j == i {
			return 0, syntaxError(in, j, "in exponent of numeric literal")
		}
		i = j
	}
	return i, nil
}

func skipDigits(in []byte, i int) int {
	for i < len(in) && '0' <= in[i] && in[i] <= '9' {
		i++
	}
	return i
}

// unescape decodes the escape at in[i] ('\\') and returns the index after it.
func unescape(in []byte, i int) (rune, int, error) {
	if i+1 == len(in) {
		return 0, 0, syntaxError(in, i+1, "")
	}
	switch e := in[i+1]; e {
	case '"', '\\', '/':
		return rune(e), i + 2, nil
	case 'b':
		return '\b', i + 2, nil
	case 'f':
		return '\f', i + 2, nil
	case 'n':
		return '\n', i + 2, nil
	case 'r':
		return '\r', i + 2, nil
	case 't':
		return '\t', i + 2, nil
	case 'u':
		r, err := hex4(in, i+2)
		if err != nil {
			return 0, 0, err
		}
		if !utf16.IsSurrogate(r) {
			return r, i + 6, nil
		}
		// Only a high surrogate escape followed by a low one is a character.
		low := rune(-1)
		if r < 0xDC00 && i+7 < len(in) && in[i+6] == '\\' && in[i+7] == 'u' {
			if low, err = hex4(in, i+8); err != nil {
				return 0, 0, err
			}
		}
		if r = utf16.DecodeRune(r, low); r == utf8.RuneError {
			return 0, 0, fmt.Errorf("invalid string at offset %d: %s is a lone UTF-16 surrogate", i, in[i:i+6])
		}
		return r, i + 12, nil
	}
	return 0, 0, syntaxError(in, i+1, "in string escape code")
}

// hex4 reads the four hex digits at in[i:].
func hex4(in []byte, i int) (rune, error) {
	var r rune
	for k := i; k < i+4; k++ {
		if k >= len(in) {
			return 0, syntaxError(in, k, "")
		}
		d := unhex(in[k])
		if d > 0xf {
			return 0, syntaxError(in, k, "in \\u hexadecimal character escape")
		}
		r = r<<4 | rune(d)
	}
	return r, nil
}

// unhex returns the value of a hex digit, or 0xff if b is not one.
func unhex(b byte) byte {
	switch {
	case '0' <= b && b <= '9':
		return b - '0'
	case 'a' <= b && b <= 'f':
		return b - 'a' + 10
	case 'A' <= b && b <= 'F':
		return b - 'A' + 10
	}
	return 0xff
}
