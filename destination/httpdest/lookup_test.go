package httpdest

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destinations"
)

// TestLookupReading serves each answer over loopback and reads it as the
// destination declares: found only when the answer names the effect; an
// answer the reading cannot read is unreadable, never found nor not found.
func TestLookupReading(t *testing.T) {
	const key = "the-key"
	list := &destinations.LookupReading{
		Items: "/tickets", Count: "/count",
		Match:   &destinations.LookupMatch{Pointer: "/external_id", Equals: "{key}"},
		Receipt: &destinations.ReceiptSpec{ID: destinations.Pointers{"/id"}, Status: "/status"},
	}
	noMatch := &destinations.LookupReading{Items: "/tickets"}
	byBusinessID := &destinations.LookupReading{Items: "/tickets", Match: &destinations.LookupMatch{Pointer: "/ref", Equals: "{business_id}"}}
	tests := []struct {
		name    string
		reading *destinations.LookupReading
		rules   []destinations.Rule
		status  int
		body    string
		found   string // the id found; "" with unreadable false: not found
		// unreadable: the answer cannot be read (ErrUnreadable); failed: a
		// failed lookup, asked again.
		unreadable, failed bool
	}{
		{name: "empty list", reading: list, status: 200, body: `{"tickets": [], "count": 0}`},
		{name: "one matching record", reading: list, status: 200,
			body: `{"tickets": [{"id": "T-7", "external_id": "the-key", "status": "open"}], "count": 1}`, found: "T-7"},
		{name: "other records only", reading: list, status: 200,
			body: `{"tickets": [{"id": "T-1", "external_id": "other"}], "count": 1}`},
		{name: "a page without it", reading: list, status: 200,
			body: `{"tickets": [{"id": "T-1", "external_id": "other"}], "count": 40}`, unreadable: true},
		{name: "two matching records", reading: list, status: 200,
			body: `{"tickets": [{"id": "T-1", "external_id": "the-key"}, {"id": "T-2", "external_id": "the-key"}], "count": 2}`, unreadable: true},
		{name: "matching record without id", reading: list, status: 200,
			body: `{"tickets": [{"external_id": "the-key"}], "count": 1}`, unreadable: true},
		{name: "record without the match field", reading: list, status: 200,
			body: `{"tickets": [{"id": "T-1"}], "count": 1}`, unreadable: true},
		{name: "count contradicts list", reading: list, status: 200,
			body: `{"tickets": [{"id": "T-1", "external_id": "the-key"}], "count": 0}`, unreadable: true},
		{name: "count not a number", reading: list, status: 200, body: `{"tickets": [], "count": "none"}`, unreadable: true},
		{name: "no list", reading: list, status: 200, body: `{"results": [], "count": 0}`, unreadable: true},
		{name: "html", reading: list, status: 200, body: `<html>maintenance</html>`, unreadable: true},
		{name: "no match: one record", reading: noMatch, status: 200, body: `{"tickets": [{"id": "T-3"}]}`, found: "T-3"},
		{name: "no match: two records", reading: noMatch, status: 200, body: `{"tickets": [{"id": "T-3"}, {"id": "T-4"}]}`, unreadable: true},
		{name: "match by business id", reading: byBusinessID, status: 200,
			body: `{"tickets": [{"id": "T-5", "ref": "example-001"}, {"id": "T-6", "ref": "example-002"}]}`, found: "T-5"},
		// Without a reading, the answer is the record itself.
		{name: "plain: a record", status: 200, body: `{"id": "T-9", "status": "open"}`, found: "T-9"},
		{name: "plain: an empty list", status: 200, body: `{"tickets": [], "count": 0}`, unreadable: true},
		{name: "plain: 404", status: 404, body: `{"error": "not_found"}`},
		{name: "plain: 204", status: 204, unreadable: true},
		{name: "plain: 503", status: 503, body: `{"error": "down"}`, failed: true},
		{name: "plain: 429", status: 429, failed: true},
		{name: "plain: 302", status: 302, failed: true},
		{name: "plain: 410", status: 410, failed: true},
		{name: "410 declared not found", reading: &destinations.LookupReading{NotFound: []destinations.StatusRange{{Lo: 404, Hi: 404}, {Lo: 410, Hi: 410}}}, status: 410},
		{name: "a rule reads the 200 as down", status: 200, body: `{"error": {"code": "busy"}}`, failed: true,
			rules: []destinations.Rule{{Status: destinations.StatusRange{Lo: 200, Hi: 200}, Body: &destinations.Match{Pointer: "/error/code", Value: "busy"},
				Class: contract.ClassThrottled, NothingApplied: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs, got := recorder(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.status == 302 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			})
			d := httpDestination(hs.URL + "/tickets")
			d.Contract.Dedup = contract.DedupLookup
			d.LookupURL = hs.URL + "/tickets?external_id={key}"
			d.Lookup, d.Rules = tt.reading, tt.rules
			f, err := newAdapter(t, d).Lookup(context.Background(), request(key))
			require.Len(t, got(), 1, "one GET, never followed")
			require.Equal(t, "external_id=the-key", got()[0].rawQuery)
			switch {
			case tt.unreadable:
				require.ErrorIs(t, err, destination.ErrUnreadable)
				require.False(t, f.Found)
			case tt.failed:
				require.Error(t, err)
				require.False(t, errors.Is(err, destination.ErrUnreadable), "a failed lookup is asked again: %v", err)
			case tt.found != "":
				require.NoError(t, err)
				require.True(t, f.Found)
				require.Equal(t, tt.found, f.Receipt.ResourceID)
				require.Equal(t, tt.status, f.Receipt.StatusCode)
				require.NotEmpty(t, f.Receipt.Body, "the found record")
			default:
				require.NoError(t, err)
				require.False(t, f.Found)
				require.Nil(t, f.Receipt)
			}
		})
	}
}

// TestReceiptWhereTheRuleSays reads a replay that arrives as an error
// naming the original at the rule's own receipt pointer, and an id from
// the first of a list of pointers that holds one.
func TestReceiptWhereTheRuleSays(t *testing.T) {
	answer := `{"error": {"id": "err_1", "errors": [{"code": "duplicate", "links": {"conflicting_resource_id": "E-1"}}]}}`
	status := 409
	hs, _ := recorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(answer))
	})
	d := httpDestination(hs.URL)
	d.Receipt = &destinations.ReceiptSpec{ID: destinations.Pointers{"/data/id", "/id"}}
	d.Rules = []destinations.Rule{{Status: destinations.StatusRange{Lo: 409, Hi: 409}, Body: &destinations.Match{Pointer: "/error/errors/0/code", Value: "duplicate"},
		Class: contract.ClassReplayed, Receipt: &destinations.ReceiptSpec{ID: destinations.Pointers{"/error/errors/0/links/conflicting_resource_id"}}}}
	a := newAdapter(t, d)
	out := a.Deliver(context.Background(), request("k"))
	require.Equal(t, contract.ClassReplayed, out.Class)
	require.Equal(t, "E-1", out.Receipt.ResourceID)
	require.Equal(t, []destination.Read{{Field: "rules[0].receipt.id", Pointer: "/error/errors/0/links/conflicting_resource_id", Value: "E-1"}}, out.Reads)

	status, answer = 201, `{"id": "E-2"}`
	out = a.Deliver(context.Background(), request("k"))
	require.Equal(t, contract.ClassCreated, out.Class)
	require.Equal(t, "E-2", out.Receipt.ResourceID, "the second pointer, the first holding nothing")
	require.Equal(t, "(absent)", out.Reads[0].Value)

	// A rule without a receipt reads the destination's.
	d.Rules[0].Receipt = nil
	status, answer = 409, `{"error": {"errors": [{"code": "duplicate"}]}}`
	out = newAdapter(t, d).Deliver(context.Background(), request("k"))
	require.Equal(t, contract.ClassReplayed, out.Class)
	require.Empty(t, out.Receipt.ResourceID, "named nowhere: the activity makes this an unknown outcome")
}
