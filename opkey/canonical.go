package opkey

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

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
