package destinations

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/abde64c9/courier/reviewproof"
)

// Reviewers is who may decide a review, at the top of the file (the
// default) or in one destination (its own policy). Each entry is a plain
// name, which the workflow only compares with the name a decision gives,
// or a keyed reviewer, {"name", "key", "decisions"}, whose decisions must
// carry a proof signed with the key. A list holds one kind or the other.
type Reviewers []reviewproof.Reviewer

// Plain is a list of plain names.
func Plain(names ...string) Reviewers {
	r := make(Reviewers, len(names))
	for i, n := range names {
		r[i].Name = n
	}
	return r
}

// Names are the reviewers' names.
func (rs Reviewers) Names() []string {
	if rs == nil {
		return nil
	}
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name
	}
	return names
}

// Keyed: the list's reviewers sign their decisions.
func (rs Reviewers) Keyed() bool {
	return slices.ContainsFunc(rs, func(r reviewproof.Reviewer) bool { return r.Key != "" })
}

// UnmarshalJSON takes each entry as a name or an object.
func (rs *Reviewers) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(Reviewers, len(raw))
	for i, e := range raw {
		if len(e) > 0 && e[0] == '"' {
			if err := json.Unmarshal(e, &out[i].Name); err != nil {
				return err
			}
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(e))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out[i]); err != nil {
			return fmt.Errorf(`reviewers[%d]: a name, or {"name", "key", "decisions"}: %w`, i, err)
		}
		if out[i].Key == "" {
			return fmt.Errorf("reviewers[%d]: key: missing (a reviewer without a key is a plain name: give it as a string)", i)
		}
	}
	*rs = out
	return nil
}

// MarshalJSON writes plain names as strings.
func (rs Reviewers) MarshalJSON() ([]byte, error) {
	if rs.Keyed() {
		return json.Marshal([]reviewproof.Reviewer(rs))
	}
	return json.Marshal(rs.Names())
}

// validate checks a list: one kind of entry, each keyed one well formed,
// no name twice.
func (rs Reviewers) validate() error {
	if !rs.Keyed() {
		return nil // plain names decide as they always did
	}
	var errs []error
	for i, r := range rs {
		if r.Key == "" {
			errs = append(errs, fmt.Errorf("reviewers[%d]: %q is a plain name among keyed reviewers: give every reviewer of a list a key, or none", i, r.Name))
			continue
		}
		if err := r.Check(); err != nil {
			errs = append(errs, Prefixed(fmt.Sprintf("reviewers[%d].", i), err))
		}
		if slices.IndexFunc(rs, func(o reviewproof.Reviewer) bool { return o.Name == r.Name }) < i {
			errs = append(errs, fmt.Errorf("reviewers[%d]: name %q listed twice; a name is the key id of its proofs (to rotate a key, add it under a new name)", i, r.Name))
		}
	}
	return errors.Join(errs...)
}

// ReviewersOf is who may decide reviews at destination name: its own list
// when it has one, else the file's default. Policy is set when they sign
// their decisions.
func (c Config) ReviewersOf(name string) (names []string, policy *reviewproof.Policy) {
	rs, source := c.Reviewers, "the default reviewers"
	if d, ok := c.Destinations[name]; ok && d.Reviewers != nil {
		rs, source = d.Reviewers, name+"'s reviewers"
	}
	if rs.Keyed() {
		policy = &reviewproof.Policy{Source: source, Reviewers: slices.Clone(rs)}
	}
	return rs.Names(), policy
}

// Unproven are the destinations whose reviewers have no keys: a decision
// there carries no proof, and any name typed as a reviewer's decides.
func (c Config) Unproven() []string {
	var out []string
	for _, name := range c.Names() {
		if _, policy := c.ReviewersOf(name); policy == nil {
			out = append(out, name)
		}
	}
	return out
}
