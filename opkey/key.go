// Package opkey is Courier's key spec: the idempotency key of a business
// operation and the fingerprint of its payload. docs/keys.md is its
// specification, and testdata/key_vectors.json the vectors every
// implementation, in any language, must reproduce. Everything here is
// frozen: a changed byte changes keys or fingerprints and defeats every
// destination's dedup.
package opkey

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// canonical is the name the key hashes: "courier-key-v1" then, per field in
// order, its UTF-8 byte length in decimal, ':', the bytes, and ';'.
func (op Operation) canonical() []byte {
	b := []byte("courier-key-v1")
	for _, f := range [...]string{op.Tenant, op.Destination, op.Operation, op.BusinessID} {
		b = strconv.AppendInt(b, int64(len(f)), 10)
		b = append(b, ':')
		b = append(b, f...)
		b = append(b, ';')
	}
	return b
}

// Validate checks the operation's fields, naming the first bad one: each
// field's presence, length and encoding in field order, then, once all of
// them hold, each field's characters (a *CharacterError).
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
	// Last, so a CharacterError says the operation passed every older check:
	// the workflow relies on it to replay deliveries started before this one.
	for _, f := range fields {
		if i := strings.IndexFunc(f.value, refused); i >= 0 {
			r, _ := utf8.DecodeRuneInString(f.value[i:])
			return &CharacterError{Field: f.name, Char: r, Offset: i}
		}
	}
	return nil
}

// CharacterError is an identifier holding a character that is not plain
// text: a control character or a bidirectional formatting character. Such
// a character changes how the identifier reads wherever it is shown (a log
// line, a search attribute, a summary, a notice): a line break starts a
// forged line, a right-to-left override shows the text reversed.
type CharacterError struct {
	Field  string // tenant, destination, operation or business_id
	Char   rune
	Offset int // in bytes, from 0
}

func (e *CharacterError) Error() string {
	kind := "control character"
	if bidiFormatting(e.Char) {
		kind = "bidirectional formatting character"
	}
	return fmt.Sprintf("%s: %s U+%04X at offset %d: identifiers are plain text; remove it", e.Field, kind, e.Char, e.Offset)
}

// refused: C0 controls, DEL, C1 controls, and the bidirectional formatting
// characters.
func refused(r rune) bool {
	return r < 0x20 || (r >= 0x7F && r <= 0x9F) || bidiFormatting(r)
}

// bidiFormatting: the marks (ALM, LRM, RLM), the embeddings and overrides
// (LRE to RLO) and the isolates (LRI to PDI).
func bidiFormatting(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
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
// It accepts exactly the objects encoding/json accepts, except that, as
// I-JSON (RFC 7493) requires, invalid UTF-8, lone surrogate escapes and
// duplicate member names are errors: each would give two different payloads
// one fingerprint, or one payload no single meaning. See docs/keys.md.
func CanonicalJSON(payload []byte) ([]byte, error) {
	if len(payload) > MaxPayloadBytes {
		return nil, fmt.Errorf("payload: %d bytes, the limit is %d", len(payload), MaxPayloadBytes)
	}
	// The canonical form is never longer than the payload.
	p := parser{in: payload, i: skipSpace(payload, 0), out: make([]byte, 0, len(payload))}
	if p.i == len(payload) || payload[p.i] != '{' {
		return nil, errors.New(`payload: must be a JSON object, e.g. {"subject": "..."}`)
	}
	root, err := p.value()
	if err == nil {
		if p.i = skipSpace(payload, p.i); p.i < len(payload) {
			err = fmt.Errorf("trailing data at offset %d after the JSON object", p.i)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	if root == nil {
		return p.out, nil
	}
	return p.emit(make([]byte, 0, len(p.out)), root), nil
}

// maxDepth is encoding/json's nesting limit, so both accept the same documents.
const maxDepth = 10000

// parser reads the JSON value at in[i:] in one pass, so the first problem
// in document order is the one reported (a duplicate name when its object
// closes). It writes each value's canonical text to out in document order
// and keeps a tree of only the containers whose members are out of order:
// emit then moves each byte once, however deep the nesting, where reordering
// each object as it closed would move nested bytes once per level.
type parser struct {
	in    []byte
	i     int
	depth int
	out   []byte
}

// dirty is a container whose text out[start:end] is not canonical: an
// object whose members, or some descendant's, are out of order, or an array
// holding such an object.
type dirty struct {
	start, end int
	object     bool
	parts      []part // an object's members, sorted; an array's dirty elements
}

// part is an object member or array element at out[start:end], its value
// from out[value]; child is the value if it is dirty.
type part struct {
	name              []byte // a member's, decoded
	start, value, end int
	child             *dirty
}

// value reads one value, and returns it if it is dirty.
func (p *parser) value() (*dirty, error) {
	in := p.in
	p.i = skipSpace(in, p.i)
	if p.i == len(in) {
		return nil, syntaxError(in, p.i, "")
	}
	var end int
	var err error
	switch in[p.i] {
	case '{', '[':
		return p.container()
	case '"':
		s, err := p.string()
		if err != nil {
			return nil, err
		}
		p.out = appendString(p.out, s)
		return nil, nil
	case 't', 'f', 'n':
		end, err = scanLiteral(in, p.i)
	default:
		end, err = scanNumber(in, p.i)
	}
	if err != nil {
		return nil, err
	}
	p.out = append(p.out, in[p.i:end]...)
	p.i = end
	return nil, nil
}

// container reads the object or array at in[i], sorting an object's members
// and refusing duplicate names once it closes.
func (p *parser) container() (*dirty, error) {
	in := p.in
	if p.depth == maxDepth {
		return nil, fmt.Errorf("invalid JSON at offset %d: nested deeper than %d levels", p.i, maxDepth)
	}
	p.depth++
	defer func() { p.depth-- }()
	d := &dirty{start: len(p.out), object: in[p.i] == '{'}
	closing, context := byte(']'), "after array element"
	if d.object {
		closing, context = '}', "after object key:value pair"
	}
	p.out = append(p.out, in[p.i])
	if p.i = skipSpace(in, p.i+1); p.i < len(in) && in[p.i] == closing {
		p.out = append(p.out, closing)
		p.i++
		return nil, nil
	}
	for {
		var err error
		pt := part{start: len(p.out)}
		if d.object {
			if p.i = skipSpace(in, p.i); p.i == len(in) || in[p.i] != '"' {
				return nil, syntaxError(in, p.i, "looking for beginning of object key string")
			}
			if pt.name, err = p.string(); err != nil {
				return nil, err
			}
			if p.i = skipSpace(in, p.i); p.i == len(in) || in[p.i] != ':' {
				return nil, syntaxError(in, p.i, "after object key")
			}
			p.out = append(appendString(p.out, pt.name), ':')
			p.i++
		}
		pt.value = len(p.out)
		if pt.child, err = p.value(); err != nil {
			return nil, err
		}
		pt.end = len(p.out)
		if d.object || pt.child != nil {
			d.parts = append(d.parts, pt)
		}
		if p.i = skipSpace(in, p.i); p.i < len(in) && in[p.i] == ',' {
			p.out = append(p.out, ',')
			p.i++
			continue
		}
		if p.i == len(in) || in[p.i] != closing {
			return nil, syntaxError(in, p.i, context)
		}
		p.out = append(p.out, closing)
		p.i++
		break
	}
	d.end = len(p.out)
	clean := len(d.parts) == 0 // an array's parts are its dirty elements
	if d.object {
		byName := func(a, b part) int { return compareNames(a.name, b.name) }
		clean = slices.IsSortedFunc(d.parts, byName) && !slices.ContainsFunc(d.parts, func(m part) bool { return m.child != nil })
		slices.SortFunc(d.parts, byName)
		for k := 1; k < len(d.parts); k++ {
			if name := d.parts[k].name; bytes.Equal(d.parts[k-1].name, name) {
				return nil, fmt.Errorf("duplicate member name %q", name)
			}
		}
	}
	if clean {
		return nil, nil
	}
	return d, nil
}

// emit writes the dirty container d canonically to dst.
func (p *parser) emit(dst []byte, d *dirty) []byte {
	part := func(dst []byte, pt part) []byte {
		if pt.child == nil {
			return append(dst, p.out[pt.start:pt.end]...)
		}
		return p.emit(append(dst, p.out[pt.start:pt.value]...), pt.child)
	}
	if d.object {
		dst = append(dst, '{')
		for k, m := range d.parts {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = part(dst, m)
		}
		return append(dst, '}')
	}
	// An array: the text between its dirty elements as it is.
	at := d.start
	for _, e := range d.parts {
		dst = part(append(dst, p.out[at:e.start]...), e)
		at = e.end
	}
	return append(dst, p.out[at:d.end]...)
}

// string reads the string at in[i] ('"') and returns its decoded bytes:
// the input's own unless it has escapes.
func (p *parser) string() ([]byte, error) {
	in := p.in
	var s []byte // what precedes in[start], decoded, once an escape is met
	start := p.i + 1
	for i := start; ; {
		switch {
		case i == len(in):
			return nil, syntaxError(in, i, "")
		case in[i] == '"':
			p.i = i + 1
			if s == nil {
				return in[start:i], nil
			}
			return append(s, in[start:i]...), nil
		case in[i] == '\\':
			r, next, err := unescape(in, i)
			if err != nil {
				return nil, err
			}
			s = utf8.AppendRune(append(s, in[start:i]...), r)
			i, start = next, next
		case in[i] < 0x20:
			return nil, syntaxError(in, i, "in string literal")
		case in[i] < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, fmt.Errorf("invalid UTF-8 at offset %d: payloads must be UTF-8", i)
			}
			i += size
		}
	}
}

// appendString writes the decoded string s quoted and escaped the one
// canonical way: '"' and '\\' escaped, control characters as their short
// escape or \u00xx, everything else as itself.
func appendString(out, s []byte) []byte {
	const hexdigits = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, `\b`...)
		case '\f':
			out = append(out, `\f`...)
		case '\n':
			out = append(out, `\n`...)
		case '\r':
			out = append(out, `\r`...)
		case '\t':
			out = append(out, `\t`...)
		default:
			out = append(out, '\\', 'u', '0', '0', hexdigits[c>>4], hexdigits[c&0xf])
		}
		start = i + 1
	}
	return append(append(out, s[start:]...), '"')
}

// compareNames orders two decoded names by their UTF-16 code units.
func compareNames(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra != rb {
			return cmp.Compare(utf16Order(ra), utf16Order(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

// utf16Order maps a character to a number that sorts as its UTF-16 code
// units do: that is code point order, except that characters above U+FFFF
// (a surrogate pair, from 0xD800) come before U+E000 to U+FFFF.
func utf16Order(r rune) rune {
	if r >= 0xE000 && r <= 0xFFFF {
		return r + utf8.MaxRune + 1
	}
	return r
}

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
