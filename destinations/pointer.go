package destinations

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Pointer is a JSON pointer (RFC 6901), e.g. "/payment/id".
type Pointer string

// Pointers is one JSON pointer ("/id") or a list tried in order
// (["/data/id", "/id"]).
type Pointers []Pointer

// MarshalJSON writes a single pointer as a string.
func (ps Pointers) MarshalJSON() ([]byte, error) {
	if len(ps) == 1 {
		return json.Marshal(ps[0])
	}
	return json.Marshal([]Pointer(ps))
}

// UnmarshalJSON reads "/id" or ["/data/id", "/id"].
func (ps *Pointers) UnmarshalJSON(b []byte) error {
	var one Pointer
	if json.Unmarshal(b, &one) == nil {
		*ps = Pointers{one}
		return nil
	}
	var many []Pointer
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf(`a pointer such as "/id" or a list of them, got %s`, b)
	}
	*ps = many
	return nil
}

func (ps Pointers) check() error {
	for _, p := range ps {
		if _, err := p.Tokens(); err != nil {
			return err
		}
		if p == "" {
			return errors.New(`an empty pointer names the whole answer; use a field such as "/id"`)
		}
	}
	return nil
}

// Tokens splits the pointer into its unescaped reference tokens.
func (p Pointer) Tokens() ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(string(p), "/") {
		return nil, fmt.Errorf("%q is not a JSON pointer: it must start with /, e.g. \"/payment/id\"", string(p))
	}
	parts := strings.Split(string(p)[1:], "/")
	for i, t := range parts {
		if strings.Contains(strings.NewReplacer("~0", "", "~1", "").Replace(t), "~") {
			return nil, fmt.Errorf("%q: ~ must be written ~0 and / as ~1 inside a token", string(p))
		}
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	return parts, nil
}

// Lookup finds the value at the pointer in a decoded JSON document.
func (p Pointer) Lookup(doc any) (any, bool) {
	toks, err := p.Tokens()
	if err != nil {
		return nil, false
	}
	for _, t := range toks {
		switch v := doc.(type) {
		case map[string]any:
			var ok bool
			if doc, ok = v[t]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(v) || (len(t) > 1 && t[0] == '0') {
				return nil, false
			}
			doc = v[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

// isPrefixOf reports whether p is p2 or one of its ancestors.
func (p Pointer) isPrefixOf(p2 Pointer) bool {
	return p == p2 || strings.HasPrefix(string(p2), string(p)+"/")
}
