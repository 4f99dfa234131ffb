package destinations

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/abde64c9/courier/contract"
)

// LookupReading says how to read a lookup's answer: where the records are,
// which of them is the delivery's effect, and where that effect's id is.
// A lookup finds the effect only when its answer names it; an answer the
// reading cannot read is neither found nor not found.
type LookupReading struct {
	// Items points at the answer's list of records (a list or search
	// endpoint); empty: the answer itself is the one record (a GET by key).
	Items Pointer `json:"items,omitempty"`
	// Match, when set, takes as the effect only a record whose value at its
	// pointer is the delivery's key or business id.
	Match *LookupMatch `json:"match,omitempty"`
	// Count points at the answer's count of records: 0 is not found, and it
	// must agree with the list.
	Count Pointer `json:"count,omitempty"`
	// Receipt is where a found record keeps its id and status, relative to
	// the record; left out: the destination's receipt, else the default.
	Receipt *ReceiptSpec `json:"receipt,omitempty"`
	// NotFound are the statuses that mean no such effect; default 404.
	NotFound []StatusRange `json:"not_found,omitempty"`
}

// LookupMatch names the record's field that must equal one of the
// delivery's own values.
type LookupMatch struct {
	Pointer Pointer `json:"pointer"`
	// Equals is "{key}" or "{business_id}".
	Equals string `json:"equals"`
}

// Value is the delivery's value the match compares with.
func (m LookupMatch) Value(v URLValues) string {
	if m.Equals == "{business_id}" {
		return v.BusinessID
	}
	return v.Key
}

// NotFoundStatus reports whether status means the lookup found no effect.
func (l *LookupReading) NotFoundStatus(status int) bool {
	if l == nil || len(l.NotFound) == 0 {
		return status == http.StatusNotFound
	}
	return slices.ContainsFunc(l.NotFound, func(s StatusRange) bool { return s.Contains(status) })
}

// validate checks a lookup's reading.
func (l *LookupReading) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, err := l.Items.Tokens(); err != nil {
		bad("items: %v", err)
	}
	if _, err := l.Count.Tokens(); err != nil {
		bad("count: %v", err)
	}
	if m := l.Match; m != nil {
		if _, err := m.Pointer.Tokens(); err != nil || m.Pointer == "" {
			bad(`match.pointer: needs the record's field that holds the key, such as "/external_id"`)
		}
		if m.Equals != "{key}" && m.Equals != "{business_id}" {
			bad(`match.equals: %q; use "{key}" or "{business_id}"`, m.Equals)
		}
	}
	if err := l.Receipt.validate(); err != nil {
		errs = append(errs, Prefixed("receipt", err))
	}
	if l.Receipt != nil && l.Receipt.IDFromLocation {
		bad("receipt.id_from_location: a lookup's record names its id in the answer; use receipt.id")
	}
	for _, s := range l.NotFound {
		if s.Lo < 200 || s.Hi > 599 || s.Lo > s.Hi {
			bad("not_found: status %s: use a code from 200 to 599 or a range within it", s)
		} else if s.Lo < 300 {
			bad("not_found: status %s is a success: an answer that finds nothing says so in its body (lookup.items, lookup.count)", s)
		}
	}
	return errors.Join(errs...)
}

// Warnings are what a destinations file leaves ambiguous without being
// wrong: the worker logs them at start.
func (c Config) Warnings() []string {
	var out []string
	for _, name := range c.Names() {
		d := c.Destinations[name]
		if d.Contract.Dedup == contract.DedupLookup && d.Adapter == AdapterHTTP && d.Lookup == nil {
			out = append(out, fmt.Sprintf("destination %q: lookup_url without a lookup reading: a 2xx answer is found only when it "+
				"names a resource id (at receipt.id, else /id, /ticket_id or /resource_id), else the lookup fails and the delivery parks; "+
				"for a list or search endpoint declare lookup.items and lookup.match", name))
		}
	}
	return out
}
