// Package opkey is Courier's key spec: the idempotency key of a business
// operation and the fingerprint of its payload. docs/keys.md is its
// specification, and testdata/key_vectors.json the vectors every
// implementation, in any language, must reproduce. Everything here is
// frozen: a changed byte changes keys or fingerprints and defeats every
// destination's dedup. Any package, in or out of workflow code, may import
// it.
package opkey

import (
	"fmt"
	"strconv"
	"strings"
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
