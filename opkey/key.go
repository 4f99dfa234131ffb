// Package opkey is Courier's key spec: the idempotency key of a business
// operation and the fingerprint of its payload. docs/keys.md is its
// specification, and testdata/key_vectors.json the vectors every
// implementation, in any language, must reproduce. Everything here is
// frozen: a changed byte changes keys or fingerprints and defeats every
// destination's dedup.
package opkey

import (
	"cmp"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
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
	// uuid.NewSHA1 without its garbage (it is on every delivery's path):
	// RFC 9562 UUIDv5 is the first 16 bytes of SHA-1(namespace || name)
	// with the version and variant bits set.
	var buf [256]byte
	sum := sha1.Sum(op.appendCanonical(append(buf[:0], KeyNamespace[:]...)))
	u := uuid.UUID(sum[:16])
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // variant 10
	return u.String()
}

// canonical is the name the key hashes: "courier-key-v1" then, per field in
// order, its UTF-8 byte length in decimal, ':', the bytes, and ';'.
func (op Operation) canonical() []byte { return op.appendCanonical(nil) }

func (op Operation) appendCanonical(b []byte) []byte {
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
	// Typical payloads are canonicalised on the stack: no garbage.
	var stack [4 << 10]byte
	c, err := canonicalJSON(payload, stack[:])
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
	return canonicalJSON(payload, nil)
}

// canonicalJSON is CanonicalJSON working in buf if it has room for twice
// the payload (the output and the scratch room to reorder an object).
func canonicalJSON(payload, buf []byte) ([]byte, error) {
	if len(payload) > MaxPayloadBytes {
		return nil, fmt.Errorf("payload: %d bytes, the limit is %d", len(payload), MaxPayloadBytes)
	}
	i := skipSpace(payload, 0)
	if i == len(payload) || payload[i] != '{' {
		return nil, errors.New(`payload: must be a JSON object, e.g. {"subject": "..."}`)
	}
	if len(buf) < 2*len(payload) {
		buf = make([]byte, 2*len(payload))
	}
	out, err := canonicalize(payload, i, buf)
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	return out, nil
}

// maxDepth is encoding/json's nesting limit, so both accept the same documents.
const maxDepth = 10000

// member locates one object member in out: the quoted name at
// out[name:colon] and, after the ':', the value up to out[end]; child is the
// value's node, or -1 if it is not a (non-empty) object or array. int32 is
// enough for MaxPayloadBytes and keeps the stacks small. prefix is the start
// of the name as sortBytes, so most comparisons are one integer comparison.
type member struct {
	prefix                  uint64
	name, colon, end, child int32
}

// node is a non-empty object or array, at out[start:end]. Nodes are kept
// in document order, so node k's descendants are k+1 to k+size. An
// object's members, sorted, are sorted[lo:hi]. dirty is set when out does
// not already hold the node canonically: its members, or some descendant's,
// are out of order.
type node struct {
	start, end, size, lo, hi int32
	object, dirty            bool
}

// canonicalize validates and re-encodes the object at in[i:] in one pass:
// a loop over the tokens with explicit stacks rather than recursion, so the
// indexes stay in registers. Values are written to out in input order; the
// members of each object are sorted when it closes. If any were out of
// order, a last pass copies the document to the scratch half of buf in
// canonical order: every byte is moved once, however deep the nesting.
//
// The output is never longer than the input (white space is dropped,
// escapes only shrink), so n <= i throughout: buf holds the output and,
// after it, the scratch room, and writes need no append.
func canonicalize(in []byte, i int, buf []byte) ([]byte, error) {
	out, scratch := buf[:len(in)], buf[len(in):2*len(in)]
	n := 0
	open := make([]int32, 0, 16)     // the open nodes, innermost last
	nodes := make([]node, 0, 16)     // every node, in document order
	members := make([]member, 0, 16) // the members of the open objects
	sorted := make([]member, 0, 64)  // the members of the closed objects
	inObject := false                // the innermost open node is an object
	wantName := false                // the next token is a member name
	for {
		i = skipSpace(in, i)
		if i == len(in) {
			return nil, syntaxError(in, i, "")
		}
		b := in[i]
		if wantName && b != '"' {
			return nil, syntaxError(in, i, "looking for beginning of object key string")
		}
		switch b {
		case '{', '[':
			if len(open) == maxDepth {
				return nil, fmt.Errorf("invalid JSON at offset %d: nested deeper than %d levels", i, maxDepth)
			}
			out[n] = b
			n++
			i = skipSpace(in, i+1)
			if i < len(in) && in[i] == b+2 { // '}' or ']': empty, canonical as is
				out[n] = b + 2
				n++
				i++
				break
			}
			k := int32(len(nodes))
			if inObject {
				members[len(members)-1].child = k
			}
			// lo is the node's first member on the members stack until it closes.
			nodes = append(nodes, node{start: int32(n - 1), lo: int32(len(members)), object: b == '{'})
			open = append(open, k)
			inObject, wantName = b == '{', b == '{'
			continue
		case '"':
			start, startIn := n, i
			out[n] = '"'
			n, i = n+1, i+1
			escaped := false
			for {
				// Copy 8 bytes at a time until one needs attention (n <= i,
				// so out has room), then the tail of the input bytewise.
				seg := i
				var high uint64 // OR of the bytes: 0x80 bits set if any is not ASCII
				for i+8 <= len(in) {
					w := binary.LittleEndian.Uint64(in[i:])
					binary.LittleEndian.PutUint64(out[n:], w)
					if m := special(w); m != 0 {
						k := bits.TrailingZeros64(m) / 8
						high |= w & (1<<(8*k) - 1)
						i, n = i+k, n+k
						break
					}
					high |= w
					i, n = i+8, n+8
				}
				if i+8 > len(in) {
					for i < len(in) && in[i] >= 0x20 && in[i] != '"' && in[i] != '\\' {
						high |= uint64(in[i])
						out[n] = in[i]
						i, n = i+1, n+1
					}
				}
				if high&highs != 0 && !utf8.Valid(in[seg:i]) {
					return nil, invalidUTF8(in, seg)
				}
				if i == len(in) {
					return nil, syntaxError(in, i, "")
				}
				if in[i] == '"' {
					out[n] = '"'
					n, i = n+1, i+1
					break
				}
				if in[i] != '\\' {
					return nil, syntaxError(in, i, "in string literal")
				}
				r, next, err := unescape(in, i)
				if err != nil {
					return nil, err
				}
				n = putEscaped(out, n, r)
				i, escaped = next, true
			}
			if !wantName {
				break
			}
			// A member name: record it; its value follows the ':'.
			m := member{name: int32(start), colon: int32(n), child: -1}
			if m.prefix = asciiPrefix(in, startIn, n-start-2); m.prefix&highs != 0 || escaped {
				m.prefix = namePrefix(out, m)
			}
			members = append(members, m)
			i = skipSpace(in, i)
			if i == len(in) || in[i] != ':' {
				return nil, syntaxError(in, i, "after object key")
			}
			out[n] = ':'
			n, i = n+1, i+1
			wantName = false
			continue
		case 't', 'f', 'n':
			lit := "null"
			if b == 't' {
				lit = "true"
			} else if b == 'f' {
				lit = "false"
			}
			for k := 0; k < len(lit); k, i = k+1, i+1 {
				if i == len(in) || in[i] != lit[k] {
					return nil, syntaxError(in, i, "in literal "+lit)
				}
			}
			n += copy(out[n:], lit)
		default:
			end, err := scanNumber(in, i)
			if err != nil {
				return nil, err
			}
			n += copy(out[n:], in[i:end])
			i = end
		}

		// After a value: a ',' or the end of its node, and so on up.
		for {
			if len(open) == 0 {
				if i = skipSpace(in, i); i < len(in) {
					return nil, fmt.Errorf("trailing data at offset %d after the JSON object", i)
				}
				if len(nodes) == 0 || !nodes[0].dirty {
					return out[:n:n], nil
				}
				w := emit(scratch, out, nodes, sorted, 0, 0)
				return scratch[:w:w], nil
			}
			i = skipSpace(in, i)
			if inObject {
				members[len(members)-1].end = int32(n)
			}
			if i < len(in) && in[i] == ',' {
				out[n] = ','
				n, i = n+1, i+1
				wantName = inObject
				break
			}
			end, context := byte(']'), "after array element"
			if inObject {
				end, context = '}', "after object key:value pair"
			}
			if i == len(in) || in[i] != end {
				return nil, syntaxError(in, i, context)
			}
			out[n] = end
			n, i = n+1, i+1
			k := open[len(open)-1]
			open = open[:len(open)-1]
			nd := &nodes[k]
			nd.end, nd.size = int32(n), int32(len(nodes))-k-1
			if inObject {
				ms := members[nd.lo:]
				moved, err := sortMembers(out, ms)
				if err != nil {
					return nil, err
				}
				nd.dirty = nd.dirty || moved
				members = members[:nd.lo]
				nd.lo, nd.hi = int32(len(sorted)), int32(len(sorted)+len(ms))
				sorted = append(sorted, ms...)
			}
			if len(open) > 0 {
				parent := &nodes[open[len(open)-1]]
				parent.dirty = parent.dirty || nd.dirty
				inObject = parent.object
			}
		}
	}
}

// emit copies node k from out to dst[w:] in canonical order, and returns
// the index after it in dst.
func emit(dst, out []byte, nodes []node, sorted []member, k, w int) int {
	nd := nodes[k]
	if !nd.dirty {
		return w + copy(dst[w:], out[nd.start:nd.end])
	}
	if nd.object {
		dst[w] = '{'
		w++
		for j, m := range sorted[nd.lo:nd.hi] {
			if j > 0 {
				dst[w] = ','
				w++
			}
			if m.child < 0 {
				w += copy(dst[w:], out[m.name:m.end]) // name, ':' and value
				continue
			}
			w += copy(dst[w:], out[m.name:m.colon+1])
			w = emit(dst, out, nodes, sorted, int(m.child), w)
		}
		dst[w] = '}'
		return w + 1
	}
	// An array: its elements as they are, its child nodes emitted.
	p := nd.start
	for c := k + 1; c <= k+int(nd.size); c += int(nodes[c].size) + 1 {
		w += copy(dst[w:], out[p:nodes[c].start])
		w = emit(dst, out, nodes, sorted, c, w)
		p = nodes[c].end
	}
	return w + copy(dst[w:], out[p:nd.end])
}

func skipSpace(in []byte, i int) int {
	for i < len(in) && in[i] <= ' ' && space[in[i]] { // most calls stop at once
		i++
	}
	return i
}

// space marks JSON's four white space bytes, and only those.
var space = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

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

// sortMembers sorts an object's members into canonical order, reports
// whether that moved any, and rejects duplicate names.
func sortMembers(out []byte, ms []member) (moved bool, err error) {
	if len(ms) <= 32 {
		// Insertion sort: payloads are small objects, often nearly sorted.
		// Inserting a name next to an equal one is how duplicates show.
		for k := 1; k < len(ms); k++ {
			m, j := ms[k], k
			for ; j > 0; j-- {
				if p := ms[j-1].prefix; p < m.prefix {
					break
				} else if p == m.prefix {
					d := compareNames(out, ms[j-1], m)
					if d == 0 {
						return false, duplicate(out, m)
					}
					if d < 0 {
						break
					}
				}
				ms[j] = ms[j-1]
			}
			if j != k {
				ms[j], moved = m, true
			}
		}
		return moved, nil
	}
	byName := func(x, y member) int { return compareNames(out, x, y) }
	if moved = !slices.IsSortedFunc(ms, byName); moved {
		slices.SortFunc(ms, byName)
	}
	for k := 1; k < len(ms); k++ {
		if byName(ms[k-1], ms[k]) == 0 {
			return false, duplicate(out, ms[k])
		}
	}
	return moved, nil
}

func duplicate(out []byte, m member) error {
	var name []byte
	for s, i := out[m.name+1:m.colon-1], 0; i < len(s); {
		var b byte
		b, i = unescapeByte(s, i)
		name = append(name, b)
	}
	return fmt.Errorf("duplicate member name %q", name)
}

// asciiPrefix is namePrefix for the common case, a name of ASCII without
// escapes, read from the input (the same bytes, and not just written) where
// the name's quote is at in[quote] and the name has length bytes. For other
// names it has 0x80 bits set or is wrong, and namePrefix is needed.
func asciiPrefix(in []byte, quote, length int) uint64 {
	if quote+9 > len(in) {
		return highs
	}
	p := binary.BigEndian.Uint64(in[quote+1:]) // past a short name: masked
	if length < 8 {
		p &= ^uint64(0) << (64 - 8*length)
	}
	return p
}

// namePrefix is the first 8 bytes of the member's name as sortBytes, zero
// padded. Equal prefixes fall back to compareNames.
func namePrefix(out []byte, m member) uint64 {
	name := out[m.name+1 : m.colon-1]
	var p uint64
	n := 0
	for i := 0; i < len(name) && n < 8; n++ {
		var b byte
		b, i = unescapeByte(name, i)
		p = p<<8 | uint64(sortByte(b))
	}
	return p << (8 * (8 - n))
}

// compareNames orders two members by the UTF-16 code units of their names.
func compareNames(out []byte, x, y member) int {
	if x.prefix != y.prefix {
		return cmp.Compare(x.prefix, y.prefix)
	}
	a, b := out[x.name+1:x.colon-1], out[y.name+1:y.colon-1]
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var ca, cb byte
		ca, i = unescapeByte(a, i)
		cb, j = unescapeByte(b, j)
		if ca != cb {
			return int(sortByte(ca)) - int(sortByte(cb))
		}
	}
	return cmp.Compare(len(a)-i, len(b)-j)
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

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special marks (0x80 in the byte) the bytes of w, 8 bytes loaded little
// endian, that are control characters, '"' or '\\': the SWAR "has less
// than" and "has zero" tests. Bytes from 0x80 are never marked (they are
// checked as UTF-8). A byte after a marked one may be marked falsely, never
// the first one, so the lowest mark is exact.
func special(w uint64) uint64 {
	q, s := w^(ones*'"'), w^(ones*'\\')
	return ((w-ones*0x20)&^w | (q-ones)&^q | (s-ones)&^s) & highs
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

// putEscaped writes r at out[n:] in its canonical form.
func putEscaped(out []byte, n int, r rune) int {
	const hexdigits = "0123456789abcdef"
	switch r {
	case '"', '\\':
		return n + copy(out[n:], []byte{'\\', byte(r)})
	case '\b':
		return n + copy(out[n:], `\b`)
	case '\f':
		return n + copy(out[n:], `\f`)
	case '\n':
		return n + copy(out[n:], `\n`)
	case '\r':
		return n + copy(out[n:], `\r`)
	case '\t':
		return n + copy(out[n:], `\t`)
	}
	if r < 0x20 {
		return n + copy(out[n:], []byte{'\\', 'u', '0', '0', hexdigits[r>>4], hexdigits[r&0xf]})
	}
	return n + utf8.EncodeRune(out[n:], r)
}
