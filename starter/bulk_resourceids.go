package starter

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/abde64c9/courier/workflows"
)

// ResourceID is one line of a resource ids file: a delivery's key and the
// id of the effect the reviewer found for it.
type ResourceID struct {
	Line       int
	Key        string
	ResourceID string
}

// ReadResourceIDs reads "key,resource-id" lines (blank lines and lines
// starting with # are skipped). A malformed key, a key given twice or a bad
// resource id is refused with its line number.
func ReadResourceIDs(r io.Reader) ([]ResourceID, error) {
	var out []ResourceID
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, id, ok := strings.Cut(line, ",")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not key,resource-id", n, line)
		}
		key, err := ParseKey(k)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("line %d: key %s is on line %d already; give each delivery one resource id", n, key, first)
		}
		id = strings.TrimSpace(id)
		if err := checkResourceID(id); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		seen[key] = n
		out = append(out, ResourceID{Line: n, Key: key, ResourceID: id})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no key,resource-id lines")
	}
	return out, nil
}

func checkResourceID(id string) error {
	switch {
	case id == "":
		return errors.New("resource id: empty; give the id of the effect you found")
	case len(id) > workflows.MaxResourceIDLen:
		return fmt.Errorf("resource id: %d bytes is over the limit of %d", len(id), workflows.MaxResourceIDLen)
	case !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl):
		return fmt.Errorf("resource id %q: holds control characters or invalid UTF-8", id)
	}
	return nil
}

// CheckResourceIDs checks every line names a delivery p matched; a key
// that did not match says why (no such delivery, or in what state it is).
func (s *Client) CheckResourceIDs(ctx context.Context, p BulkPreview, lines []ResourceID) (map[string]string, error) {
	matched := map[string]bool{}
	for _, k := range p.Keys {
		matched[k] = true
	}
	ids := map[string]string{}
	for _, l := range lines {
		if matched[l.Key] {
			ids[l.Key] = l.ResourceID
			continue
		}
		st, err := s.Status(ctx, l.Key)
		switch {
		case errors.Is(err, ErrUnknownKey):
			return nil, fmt.Errorf("line %d: no delivery has key %s", l.Line, l.Key)
		case err != nil:
			return nil, fmt.Errorf("line %d: %w", l.Line, err)
		}
		return nil, fmt.Errorf("line %d: delivery %s (%s, state %s) is not among the %d deliveries the filter matched",
			l.Line, l.Key, workflows.Summary(st.Operation), st.State, p.Matched)
	}
	return ids, nil
}
