package workflows

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:]), nil
}

// CanonicalJSON re-encodes a JSON object canonically: object members sorted
// by the UTF-16 code units of their names (as RFC 8785), no insignificant
// white space, numbers exactly as written, strings re-escaped one fixed way.
// It accepts exactly the objects encoding/json accepts, except that, as
// I-JSON (RFC 7493) requires, invalid UTF-8, lone surrogate escapes and
// duplicate member names are errors: each would give two different payloads
// one fingerprint, or one payload no single meaning. See docs/keys.md.
func CanonicalJSON(payload []byte) ([]byte, error) {
	if len(payload) > MaxPayloadBytes {
		return nil, fmt.Errorf("payload: %d bytes, the limit is %d", len(payload), MaxPayloadBytes)
	}
	// One allocation: out, then scratch room to reorder any object in out.
	buf := make([]byte, 2*len(payload))
	c := canonicalizer{
		in:      payload,
		out:     buf[:0:len(payload)],
		scratch: buf[len(payload):len(payload)],
		members: make([]member, 0, 32),
	}
	c.skipSpace()
	if c.i == len(c.in) || c.in[c.i] != '{' {
		return nil, errors.New(`payload: must be a JSON object, e.g. {"subject": "..."}`)
	}
	if err := c.object(); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	c.skipSpace()
	if c.i < len(c.in) {
		return nil, fmt.Errorf("payload: trailing data at offset %d after the JSON object", c.i)
	}
	return c.out, nil
}

// plain marks the bytes a string copies as they are: not '"' or '\\' and
// not a control character. Bytes from 0x80 are checked as UTF-8 afterwards.
var plain = func() (t [256]bool) {
	for b := 0x20; b < 256; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// maxDepth is encoding/json's nesting limit, so both accept the same documents.
const maxDepth = 10000

// canonicalizer validates and re-encodes in one pass over the input. Output
// is never longer than input (escapes only shrink, white space is dropped),
// so out is allocated once. Object members are written in input order and
// permuted in place when the object closes, only if they are out of order.
type canonicalizer struct {
	in      []byte
	i       int
	out     []byte
	depth   int
	members []member // a stack: one frame per open object
	scratch []byte
}

// member locates one object member in out: the quoted name at
// out[name:colon] and, after the ':', the value up to out[end]. int32 is
// enough for MaxPayloadBytes and keeps the stack of open members small.
// prefix is the start of the name as sortBytes, so most comparisons are
// one integer comparison.
type member struct {
	prefix           uint64
	name, colon, end int32
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func (c *canonicalizer) skipSpace() {
	i := c.i
	for i < len(c.in) && isSpace(c.in[i]) {
		i++
	}
	c.i = i
}

func (c *canonicalizer) syntaxError(context string) error {
	if c.i >= len(c.in) {
		return fmt.Errorf("invalid JSON at offset %d: unexpected end of input", c.i)
	}
	return fmt.Errorf("invalid JSON at offset %d: invalid character %s %s", c.i, quoteByte(c.in[c.i]), context)
}

// quoteByte names a byte as encoding/json's syntax errors do.
func quoteByte(b byte) string {
	switch {
	case b == '\'':
		return `'\''`
	case b == '"':
		return `'"'`
	case b < 0x20 || b >= 0x80:
		return fmt.Sprintf("0x%02x", b)
	}
	return "'" + string(rune(b)) + "'"
}

func (c *canonicalizer) value() error {
	if c.i == len(c.in) {
		return c.syntaxError("")
	}
	switch b := c.in[c.i]; {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		return c.string()
	case b == '-' || '0' <= b && b <= '9':
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	}
	return c.syntaxError("looking for beginning of value")
}

func (c *canonicalizer) enter() error {
	if c.depth++; c.depth > maxDepth {
		return fmt.Errorf("invalid JSON at offset %d: nested deeper than %d levels", c.i, maxDepth)
	}
	return nil
}

func (c *canonicalizer) object() error {
	if err := c.enter(); err != nil {
		return err
	}
	start, base := len(c.out), len(c.members)
	c.out = append(c.out, '{')
	c.i++
	c.skipSpace()
	if c.i < len(c.in) && c.in[c.i] == '}' {
		c.i++
		c.out = append(c.out, '}')
		c.depth--
		return nil
	}
	for {
		c.skipSpace()
		if c.i == len(c.in) || c.in[c.i] != '"' {
			return c.syntaxError("looking for beginning of object key string")
		}
		if len(c.members) > base {
			c.out = append(c.out, ',')
		}
		m := member{name: int32(len(c.out))}
		if err := c.string(); err != nil {
			return err
		}
		m.colon = int32(len(c.out))
		m.prefix = namePrefix(c.out[m.name+1 : m.colon-1])
		c.skipSpace()
		if c.i == len(c.in) || c.in[c.i] != ':' {
			return c.syntaxError("after object key")
		}
		c.i++
		c.out = append(c.out, ':')
		c.skipSpace()
		if err := c.value(); err != nil {
			return err
		}
		m.end = int32(len(c.out))
		c.members = append(c.members, m)
		c.skipSpace()
		if c.i < len(c.in) && c.in[c.i] == ',' {
			c.i++
			continue
		}
		if c.i < len(c.in) && c.in[c.i] == '}' {
			c.i++
			break
		}
		return c.syntaxError("after object key:value pair")
	}
	c.out = append(c.out, '}')
	err := c.sortMembers(start, c.members[base:])
	c.members = c.members[:base]
	c.depth--
	return err
}

// sortMembers puts the members of the object at out[start:] in canonical
// order and rejects duplicate names (equal names sort next to each other).
func (c *canonicalizer) sortMembers(start int, ms []member) error {
	sorted := true
	for k := 1; k < len(ms); k++ {
		switch d := c.compareNames(ms[k-1], ms[k]); {
		case d == 0:
			return c.duplicate(ms[k])
		case d > 0:
			sorted = false
		}
	}
	if sorted {
		return nil
	}
	slices.SortFunc(ms, c.compareNames)
	for k := 1; k < len(ms); k++ {
		if c.compareNames(ms[k-1], ms[k]) == 0 {
			return c.duplicate(ms[k])
		}
	}
	// Copy the members out, then back in order; the length is unchanged.
	body := int32(start + 1)
	c.scratch = append(c.scratch[:0], c.out[body:len(c.out)-1]...)
	w := body
	for k, m := range ms {
		if k > 0 {
			c.out[w] = ','
			w++
		}
		w += int32(copy(c.out[w:], c.scratch[m.name-body:m.end-body]))
	}
	return nil
}

func (c *canonicalizer) duplicate(m member) error {
	var name []byte
	for s, i := c.out[m.name+1:m.colon-1], 0; i < len(s); {
		var b byte
		b, i = unescapeByte(s, i)
		name = append(name, b)
	}
	return fmt.Errorf("duplicate member name %q", name)
}

// compareNames orders two members by the UTF-16 code units of their names.
func (c *canonicalizer) compareNames(x, y member) int {
	if x.prefix != y.prefix {
		return cmp.Compare(x.prefix, y.prefix)
	}
	a, b := c.out[x.name+1:x.colon-1], c.out[y.name+1:y.colon-1]
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var ca, cb byte
		ca, i = unescapeByte(a, i)
		cb, j = unescapeByte(b, j)
		if ca != cb {
			return int(sortByte(ca)) - int(sortByte(cb))
		}
	}
	return (len(a) - i) - (len(b) - j)
}

// sortByte maps the UTF-8 bytes of a name so that byte order is UTF-16 code
// unit order. UTF-8 byte order is code point order, which is UTF-16 order
// except that characters above U+FFFF (lead bytes 0xF0..0xF4, a surrogate
// pair 0xD800.. in UTF-16) sort before U+E000..U+FFFF (lead bytes 0xEE,
// 0xEF). Moving 0xEE and 0xEF to 0xFE and 0xFF, never used in UTF-8, fixes
// that; continuation bytes (0x80..0xBF) are only ever compared with each other.
func sortByte(b byte) byte {
	if b == 0xEE || b == 0xEF {
		return b + 0x10
	}
	return b
}

// namePrefix packs the first 8 sortBytes of a name, zero padded.
func namePrefix(s []byte) uint64 {
	var p uint64
	n := 0
	for i := 0; i < len(s) && n < 8; n++ {
		b := s[i]
		if b == '\\' {
			b, i = unescapeByte(s, i)
		} else {
			i++
		}
		p = p<<8 | uint64(sortByte(b))
	}
	return p << (8 * (8 - n))
}

// unescapeByte returns the byte at s[i] of a canonically escaped string,
// undoing the escape, and the index after it. Canonical escapes stand for
// single ASCII bytes, so the result is a stream of UTF-8 bytes.
func unescapeByte(s []byte, i int) (byte, int) {
	if s[i] != '\\' {
		return s[i], i + 1
	}
	switch s[i+1] {
	case 'u':
		return unhex(s[i+4])<<4 | unhex(s[i+5]), i + 6
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	}
	return s[i+1], i + 2 // '"' or '\\'
}

func (c *canonicalizer) array() error {
	if err := c.enter(); err != nil {
		return err
	}
	c.out = append(c.out, '[')
	c.i++
	c.skipSpace()
	if c.i < len(c.in) && c.in[c.i] == ']' {
		c.i++
		c.out = append(c.out, ']')
		c.depth--
		return nil
	}
	for {
		c.skipSpace()
		if err := c.value(); err != nil {
			return err
		}
		c.skipSpace()
		if c.i < len(c.in) && c.in[c.i] == ',' {
			c.i++
			c.out = append(c.out, ',')
			continue
		}
		if c.i < len(c.in) && c.in[c.i] == ']' {
			c.i++
			c.out = append(c.out, ']')
			c.depth--
			return nil
		}
		return c.syntaxError("after array element")
	}
}

func (c *canonicalizer) literal(lit string) error {
	for k := 0; k < len(lit); k++ {
		if c.i == len(c.in) || c.in[c.i] != lit[k] {
			return c.syntaxError("in literal " + lit)
		}
		c.i++
	}
	c.out = append(c.out, lit...)
	return nil
}

// number checks the JSON number grammar and copies the text as written:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *canonicalizer) number() error {
	start := c.i
	if c.in[c.i] == '-' {
		c.i++
	}
	switch {
	case c.i < len(c.in) && c.in[c.i] == '0':
		c.i++
	case c.i < len(c.in) && '1' <= c.in[c.i] && c.in[c.i] <= '9':
		c.digits()
	default:
		return c.syntaxError("in numeric literal")
	}
	if c.i < len(c.in) && c.in[c.i] == '.' {
		c.i++
		if c.digits() == 0 {
			return c.syntaxError("after decimal point in numeric literal")
		}
	}
	if c.i < len(c.in) && (c.in[c.i] == 'e' || c.in[c.i] == 'E') {
		c.i++
		if c.i < len(c.in) && (c.in[c.i] == '+' || c.in[c.i] == '-') {
			c.i++
		}
		if c.digits() == 0 {
			return c.syntaxError("in exponent of numeric literal")
		}
	}
	c.out = append(c.out, c.in[start:c.i]...)
	return nil
}

func (c *canonicalizer) digits() int {
	start := c.i
	for c.i < len(c.in) && '0' <= c.in[c.i] && c.in[c.i] <= '9' {
		c.i++
	}
	return c.i - start
}

// string decodes a string literal and writes it escaped the one canonical
// way: '"' and '\\' and the control characters escaped (\b \f \n \r \t, or
// \u00xx with lowercase hex), everything else as literal UTF-8.
func (c *canonicalizer) string() error {
	// Most strings need no change: copy them, quotes included, in one append.
	in, start, i := c.in, c.i, c.i+1
	for {
		var high byte
		for i < len(in) && plain[in[i]] {
			high |= in[i]
			i++
		}
		if high >= utf8.RuneSelf && !utf8.Valid(in[start:i]) {
			return invalidUTF8(in, start)
		}
		if i == len(in) {
			c.i = i
			return c.syntaxError("")
		}
		switch in[i] {
		case '"':
			c.out = append(c.out, in[start:i+1]...)
			c.i = i + 1
			return nil
		case '\\':
			c.out = append(c.out, in[start:i]...)
			c.i = i
			if err := c.escape(); err != nil {
				return err
			}
			start, i = c.i, c.i
		default:
			c.i = i
			return c.syntaxError("in string literal")
		}
	}
}

func invalidUTF8(in []byte, i int) error {
	for {
		r, size := utf8.DecodeRune(in[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Errorf("invalid UTF-8 at offset %d: payloads must be UTF-8", i)
		}
		i += size
	}
}

func (c *canonicalizer) escape() error {
	start := c.i
	c.i++ // the backslash
	if c.i == len(c.in) {
		return c.syntaxError("")
	}
	var r rune
	switch e := c.in[c.i]; e {
	case '"', '\\', '/':
		r = rune(e)
	case 'b':
		r = '\b'
	case 'f':
		r = '\f'
	case 'n':
		r = '\n'
	case 'r':
		r = '\r'
	case 't':
		r = '\t'
	case 'u':
		var err error
		if r, err = c.hex4(); err != nil {
			return err
		}
		if utf16.IsSurrogate(r) {
			// Only a high surrogate escape followed by a low one is a character.
			low := rune(-1)
			if r < 0xDC00 && c.i+1 < len(c.in) && c.in[c.i] == '\\' && c.in[c.i+1] == 'u' {
				c.i++
				if low, err = c.hex4(); err != nil {
					return err
				}
			}
			if r = utf16.DecodeRune(r, low); r == utf8.RuneError {
				return fmt.Errorf("invalid string at offset %d: %s is a lone UTF-16 surrogate", start, c.in[start:start+6])
			}
		}
		c.out = appendEscaped(c.out, r)
		return nil
	default:
		return c.syntaxError("in string escape code")
	}
	c.i++
	c.out = appendEscaped(c.out, r)
	return nil
}

// hex4 reads the four hex digits after "\u" (c.i is at the 'u').
func (c *canonicalizer) hex4() (rune, error) {
	var r rune
	for k := 0; k < 4; k++ {
		c.i++
		if c.i == len(c.in) {
			return 0, c.syntaxError("")
		}
		d := unhex(c.in[c.i])
		if d > 0xf {
			return 0, c.syntaxError("in \\u hexadecimal character escape")
		}
		r = r<<4 | rune(d)
	}
	c.i++
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

func appendEscaped(out []byte, r rune) []byte {
	const hexdigits = "0123456789abcdef"
	switch r {
	case '"':
		return append(out, '\\', '"')
	case '\\':
		return append(out, '\\', '\\')
	case '\b':
		return append(out, '\\', 'b')
	case '\f':
		return append(out, '\\', 'f')
	case '\n':
		return append(out, '\\', 'n')
	case '\r':
		return append(out, '\\', 'r')
	case '\t':
		return append(out, '\\', 't')
	}
	if r < 0x20 {
		return append(out, '\\', 'u', '0', '0', hexdigits[r>>4], hexdigits[r&0xf])
	}
	return utf8.AppendRune(out, r)
}
