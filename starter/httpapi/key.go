package httpapi

import (
	"errors"
	"fmt"
	"strings"

	"github.com/abde64c9/courier/opkey"
)

// MaxKeyBytes is the longest Idempotency-Key value accepted, unquoted: the
// key is the operation's business id, a key field of at most this many bytes.
const MaxKeyBytes = opkey.MaxFieldBytes

// ParseIdempotencyKey reads an Idempotency-Key header's values as the
// draft's Structured Field string (RFC 8941: "...", with \" and \\ escaped,
// printable ASCII), or a bare token for clients that leave the quotes out,
// and returns the business id it names.
func ParseIdempotencyKey(values []string) (string, error) {
	const fix = `send Idempotency-Key: "<your business id>", e.g. Idempotency-Key: "order-1042"`
	switch len(values) {
	case 0:
		return "", errors.New("the Idempotency-Key header is missing: " + fix)
	case 1:
	default:
		return "", errors.New("the Idempotency-Key header is sent more than once: " + fix + ", once")
	}
	v := strings.Trim(values[0], " \t")
	var id string
	var err error
	if strings.HasPrefix(v, `"`) {
		id, err = sfString(v)
	} else {
		id, err = sfToken(v)
	}
	switch {
	case err != nil:
		return "", fmt.Errorf("the Idempotency-Key header is malformed: %w; %s", err, fix)
	case id == "":
		return "", errors.New("the Idempotency-Key header is empty: " + fix)
	case len(id) > MaxKeyBytes:
		return "", fmt.Errorf("the Idempotency-Key is %d bytes, over the limit of %d: use a shorter business id", len(id), MaxKeyBytes)
	}
	return id, nil
}

// sfString decodes an RFC 8941 sf-string that makes up the whole of v.
func sfString(v string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", errors.New(`a backslash in a quoted key may only escape " or \`)
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", errors.New("text after the closing quote (parameters are not accepted)")
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("byte 0x%02x at offset %d: a key is printable ASCII", c, i)
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("no closing quote")
}

// sfToken accepts an RFC 8941 sf-token: ALPHA or "*", then tchar, ":" or "/".
func sfToken(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if c := v[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '*') {
		return "", fmt.Errorf("a bare key must start with a letter or *; quote it (%q)", v)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !tchar(c) && c != ':' && c != '/' {
			return "", fmt.Errorf("byte %q at offset %d is not allowed in a bare key; quote the key", c, i)
		}
	}
	return v, nil
}

func tchar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
