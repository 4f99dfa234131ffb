package httpdest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destinations"
)

// Lookup asks the destination for the effect by key (and business id) and
// reads the answer as the destination's lookup reading declares. It is
// found only when the answer names the effect; an answer the reading
// cannot read is an error wrapping destination.ErrUnreadable, never found.
func (a *Adapter) Lookup(ctx context.Context, req destination.Request) (destination.Found, error) {
	f, err := a.lookup(ctx, req)
	return f, a.red.Error(err)
}

func (a *Adapter) lookup(ctx context.Context, req destination.Request) (destination.Found, error) {
	if a.d.LookupURL == "" {
		return destination.Found{}, fmt.Errorf("destination %s has no lookup_url", a.name)
	}
	values := urlValues(req)
	u, err := destinations.ExpandURL(a.d.LookupURL, values)
	if err != nil {
		return destination.Found{}, fmt.Errorf("lookup_url: %w", err)
	}

	ctx, cancel := context.WithTimeout(ctx, a.contractOf(req).Retry.AttemptTimeout.D())
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return destination.Found{}, fmt.Errorf("lookup request: %w", err)
	}
	hr.Header.Set("Accept", "application/json")
	a.authorize(hr)
	resp, err := a.client.Do(hr)
	if err != nil {
		return destination.Found{}, fmt.Errorf("lookup: %s", cause(err))
	}
	defer resp.Body.Close()
	body, err := a.read(resp)
	if err != nil {
		return destination.Found{}, fmt.Errorf("lookup: reading the response: %s", cause(err))
	}
	if len(body) > maxBody {
		return destination.Found{}, fmt.Errorf("lookup: HTTP %d with a response body over %d bytes: %w", resp.StatusCode, maxBody, destination.ErrUnreadable)
	}
	return readLookup(resp.StatusCode, resp.Header, body, a.d, values)
}

// readLookup reads a lookup's answer: the declared not-found statuses are
// not found; the destination's rules come next, and any class but created
// or replayed is a failed lookup (a 429 or 5xx is not an answer); then a
// 2xx is read as the lookup reading declares.
func readLookup(status int, h http.Header, body []byte, d destinations.Destination, v destinations.URLValues) (destination.Found, error) {
	if d.Lookup.NotFoundStatus(status) {
		return destination.Found{}, nil
	}
	class, rule := classify(status, h, body, nil, d.Rules)
	switch {
	case rule >= 0 && class != contract.ClassCreated && class != contract.ClassReplayed:
		return destination.Found{}, fmt.Errorf("lookup: HTTP %d%s (read as %s by rules[%d])", status, excerpt(body), class, rule)
	case status < 200 || status > 299:
		return destination.Found{}, fmt.Errorf("lookup: unexpected HTTP %d%s", status, excerpt(body))
	}
	lr := lookupReader{d: d, want: v}
	f, err := lr.read(body)
	f.Reads, f.Listed = lr.reads, lr.listed
	if err != nil {
		return f, fmt.Errorf("lookup: HTTP %d %v; the answer%s: %w", status, err, excerpt(body), destination.ErrUnreadable)
	}
	if f.Receipt != nil {
		f.Receipt.StatusCode = status
	}
	return f, nil
}

// lookupReader reads one lookup answer, noting what it read where.
type lookupReader struct {
	d     destinations.Destination
	want  destinations.URLValues
	reads []destination.Read
	// listed is how many records a list answer held.
	listed int
}

func (lr *lookupReader) note(field string, p destinations.Pointer, value string) {
	lr.reads = append(lr.reads, destination.Read{Field: field, Pointer: string(p), Value: value})
}

func (lr *lookupReader) read(body []byte) (destination.Found, error) {
	l := lr.d.Lookup
	if l == nil {
		l = &destinations.LookupReading{}
	}
	doc, ok := decodeBody(body)
	if !ok {
		return destination.Found{}, fmt.Errorf("is not JSON")
	}
	count := -1
	if l.Count != "" {
		v, found := l.Count.Lookup(doc)
		n, err := strconv.Atoi(scalarText(v))
		if _, isNumber := v.(json.Number); !found || !isNumber || err != nil || n < 0 {
			lr.note("lookup.count", l.Count, orAbsent(scalarText(v)))
			return destination.Found{}, fmt.Errorf("has no count of records at lookup.count %s", l.Count)
		}
		lr.note("lookup.count", l.Count, strconv.Itoa(n))
		count = n
	}

	record := doc
	if l.Items != "" {
		v, _ := l.Items.Lookup(doc)
		list, isList := v.([]any)
		if !isList {
			lr.note("lookup.items", l.Items, "(no list)")
			return destination.Found{}, fmt.Errorf("has no list of records at lookup.items %s", l.Items)
		}
		lr.note("lookup.items", l.Items, fmt.Sprintf("%d records", len(list)))
		lr.listed = len(list)
		if count >= 0 && (count == 0) != (len(list) == 0) {
			return destination.Found{}, fmt.Errorf("contradicts itself: a count of %d at lookup.count %s and %d records at lookup.items %s",
				count, l.Count, len(list), l.Items)
		}
		var matching []any
		for i, rec := range list {
			ok, err := lr.matches(rec, fmt.Sprintf("lookup.items[%d]", i))
			if err != nil {
				return destination.Found{}, err
			}
			if ok {
				matching = append(matching, rec)
			}
		}
		switch {
		case len(matching) == 0 && count > len(list):
			// The delivery's record may be on a page not shown.
			return destination.Found{}, fmt.Errorf("lists %d of %d records and none is this delivery's: the lookup must filter by the key", len(list), count)
		case len(matching) == 0:
			return destination.Found{}, nil
		case len(matching) == 1:
			record = matching[0]
		default:
			return destination.Found{}, fmt.Errorf("holds %d records for this delivery: the destination holds more than one effect, "+
				"or the lookup does not filter by the key (declare lookup.match)", len(matching))
		}
	} else {
		if count == 0 {
			return destination.Found{}, nil
		}
		ok, err := lr.matches(doc, "lookup")
		if err != nil {
			return destination.Found{}, err
		}
		if !ok {
			return destination.Found{}, fmt.Errorf("names another effect than this delivery's (lookup.match)")
		}
	}
	if _, isObject := record.(map[string]any); !isObject {
		return destination.Found{}, fmt.Errorf("has a record that is not a JSON object")
	}

	spec := l.Receipt
	if spec == nil && l.Items == "" {
		spec = lr.d.Receipt // a GET by key answers with the resource itself
	}
	id, st, reads := readReceipt(record, spec, "lookup.receipt")
	lr.reads = append(lr.reads, reads...)
	if id == "" {
		return destination.Found{}, fmt.Errorf("names no resource id for the effect")
	}
	r := &destination.Receipt{ResourceID: id, Status: st}
	if b, err := json.Marshal(record); err == nil && len(b) <= maxReceiptBody {
		r.Body = b
	}
	return destination.Found{Found: true, Receipt: r}, nil
}

// matches reports whether a record is the delivery's, by lookup.match;
// without a match every record is.
func (lr *lookupReader) matches(rec any, where string) (bool, error) {
	if lr.d.Lookup == nil || lr.d.Lookup.Match == nil {
		return true, nil
	}
	m := lr.d.Lookup.Match
	v, found := m.Pointer.Lookup(rec)
	got := scalarText(v)
	lr.note(where+".match", m.Pointer, orAbsent(got))
	if !found || got == "" {
		return false, fmt.Errorf("has a record with no value at lookup.match.pointer %s to compare with the delivery's %s", m.Pointer, m.Equals)
	}
	return got == m.Value(lr.want), nil
}
