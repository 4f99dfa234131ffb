package workflows

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/uuid"
)

// KeyNamespace is the UUIDv5 namespace of every Courier key. It never changes:
// changing it would change every key and defeat every destination's dedup.
var KeyNamespace = uuid.MustParse("bd868725-8c48-4f30-877f-3de82f48d062")

// Limits checked before any effect.
const (
	MaxFieldBytes   = 255
	MaxPayloadBytes = 256 << 10
)

// Operation names one business operation: the thing a caller wants done once.
type Operation struct {
	Tenant      string `json:"tenant,omitempty"`
	Destination string `json:"destination"`
	Operation   string `json:"operation"`
	BusinessID  string `json:"business_id"`
}

// Key is the operation's idempotency key: UUIDv5 under KeyNamespace over a
// length-prefixed encoding of the four fields, so no separator inside a field
// can make two operations collide. See docs/keys.md.
func Key(op Operation) string {
	return uuid.NewSHA1(KeyNamespace, op.canonical()).String()
}

// canonical is "courier-key-v1" then, per field in order, its UTF-8 byte
// length in decimal, ':', the bytes, and ';'.
func (op Operation) canonical() []byte {
	b := make([]byte, 0, 32+len(op.Tenant)+len(op.Destination)+len(op.Operation)+len(op.BusinessID))
	b = append(b, "courier-key-v1"...)
	for _, f := range [...]string{op.Tenant, op.Destination, op.Operation, op.BusinessID} {
		b = strconv.AppendInt(b, int64(len(f)), 10)
		b = append(b, ':')
		b = append(b, f...)
		b = append(b, ';')
	}
	return b
}

// Validate checks the operation's fields, naming the first bad one.
func (op Operation) Validate() error {
	fields := [...]struct {
		name, value string
		required    bool
	}{
		{"tenant", op.Tenant, false},
		{"destination", op.Destination, true},
		{"operation", op.Operation, true},
		{"business_id", op.BusinessID, true},
	}
	for _, f := range fields {
		switch {
		case f.required && f.value == "":
			return fmt.Errorf("%s: required, got an empty string", f.name)
		case len(f.value) > MaxFieldBytes:
			return fmt.Errorf("%s: %d bytes, the limit is %d", f.name, len(f.value), MaxFieldBytes)
		case !utf8.ValidString(f.value):
			return fmt.Errorf("%s: not valid UTF-8", f.name)
		}
	}
	return nil
}

// Fingerprint is the SHA-256 (hex) of the payload's canonical JSON. The
// payload must be a JSON object of at most MaxPayloadBytes.
func Fingerprint(payload []byte) (string, error) {
	c, err := CanonicalJSON(payload)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// CanonicalJSON re-encodes a JSON object canonically: object members sorted
// by the UTF-16 code units of their names (as RFC 8785), no insignificant
// white space, numbers exactly as written, strings re-escaped one fixed way.
// Duplicate member names are an error: they have no single meaning.
func CanonicalJSON(payload []byte) ([]byte, error) {
	if len(payload) > MaxPayloadBytes {
		return nil, fmt.Errorf("payload: %d bytes, the limit is %d", len(payload), MaxPayloadBytes)
	}
	p := bytes.TrimSpace(payload)
	if len(p) == 0 || p[0] != '{' {
		return nil, errors.New("payload: must be a JSON object, e.g. {\"subject\": \"...\"}")
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	var out bytes.Buffer
	out.Grow(len(p))
	if err := canonValue(dec, &out); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("payload: trailing data after the JSON object")
	}
	return out.Bytes(), nil
}

type member struct {
	name  string
	value []byte
}

func canonValue(dec *json.Decoder, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return canonObject(dec, out)
		case '[':
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := canonValue(dec, out); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("invalid JSON: %w", err)
			}
			out.WriteByte(']')
			return nil
		}
		return fmt.Errorf("invalid JSON: unexpected %q", t)
	case string:
		writeString(out, t)
	case json.Number:
		out.WriteString(string(t))
	case bool:
		out.WriteString(strconv.FormatBool(t))
	case nil:
		out.WriteString("null")
	}
	return nil
}

func canonObject(dec *json.Decoder, out *bytes.Buffer) error {
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		name := tok.(string)
		var v bytes.Buffer
		if err := canonValue(dec, &v); err != nil {
			return err
		}
		members = append(members, member{name, v.Bytes()})
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].name == m.name {
				return fmt.Errorf("duplicate member name %q", m.name)
			}
			out.WriteByte(',')
		}
		writeString(out, m.name)
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	return nil
}

func compareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// writeString escapes only what JSON requires: '"', '\\' and control
// characters (as \b \f \n \r \t or \u00xx); everything else is literal UTF-8.
func writeString(out *bytes.Buffer, s string) {
	const hexdigits = "0123456789abcdef"
	out.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			out.WriteString(`\"`)
		case '\\':
			out.WriteString(`\\`)
		case '\b':
			out.WriteString(`\b`)
		case '\f':
			out.WriteString(`\f`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\t':
			out.WriteString(`\t`)
		default:
			if r < 0x20 {
				out.WriteString(`\u00`)
				out.WriteByte(hexdigits[r>>4])
				out.WriteByte(hexdigits[r&0xf])
			} else {
				out.WriteRune(r)
			}
		}
	}
	out.WriteByte('"')
}
