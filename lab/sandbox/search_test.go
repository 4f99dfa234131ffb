package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// raw is an answer as sent, for bodies that may not be JSON.
type raw struct {
	status int
	header http.Header
	body   string
}

func (f *fixture) send(t *testing.T, method, path string, header map[string]string, body string) raw {
	t.Helper()
	req, err := http.NewRequest(method, f.http.URL+path, bytes.NewBufferString(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := f.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return raw{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func searchTicketBody(externalID, subject string) string {
	return fmt.Sprintf(`{"external_id":%q,"request_id":"r-1","subject":%q}`, externalID, subject)
}

// TestSearchLookup: every POST creates a ticket and keeps its external_id;
// a search by it lists exactly the tickets that carry it, an empty list
// when none, and a search without the parameter lists them all.
func TestSearchLookup(t *testing.T) {
	f := newFixtureWith(t, DevModes())
	create := func(externalID string) raw {
		t.Helper()
		return f.send(t, "POST", "/search/api/tickets", nil, searchTicketBody(externalID, "s"))
	}
	search := func(query string) raw {
		t.Helper()
		r := f.send(t, "GET", "/search/api/tickets"+query, nil, "")
		require.Equal(t, http.StatusOK, r.status, r.body)
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
		return r
	}

	first := create("k1")
	require.Equal(t, http.StatusCreated, first.status)
	require.JSONEq(t, `{"ticket":{"id":"ticket-1","external_id":"k1","status":"open"}}`, first.body)
	require.Equal(t, http.StatusCreated, create("k2").status)

	require.JSONEq(t, `{"tickets":[{"id":"ticket-1","external_id":"k1","status":"open"}],"count":1}`, search("?external_id=k1").body)
	require.JSONEq(t, `{"tickets":[],"count":0}`, search("?external_id=never-used").body, "none found is an empty list, not 404")
	require.JSONEq(t, `{"tickets":[],"count":0}`, search("?external_id=").body)
	all := `{"tickets":[{"id":"ticket-1","external_id":"k1","status":"open"},{"id":"ticket-2","external_id":"k2","status":"open"}],"count":2}`
	require.JSONEq(t, all, search("").body)
	require.JSONEq(t, all, search("?externalId=k1").body, "an unknown parameter is ignored: other tickets are listed")

	// No dedup: the same external_id again is another ticket, and both are found.
	again := create("k1")
	require.Equal(t, http.StatusCreated, again.status)
	require.JSONEq(t, `{"ticket":{"id":"ticket-3","external_id":"k1","status":"open"}}`, again.body)
	require.JSONEq(t, `{"tickets":[{"id":"ticket-1","external_id":"k1","status":"open"},{"id":"ticket-3","external_id":"k1","status":"open"}],"count":2}`,
		search("?external_id=k1").body)

	recs := f.records(t, "search")
	require.Len(t, recs, 3)
	require.Equal(t, "k1", recs[0].Key)
	require.JSONEq(t, `{"request_id":"r-1","subject":"s"}`, string(recs[0].Payload), "stored without external_id")
	require.Equal(t, []Result{ResultWrittenThenReceipt, ResultWrittenThenReceipt, ResultWrittenThenReceipt}, results(f.srv.Requests("search")))

	// Each lookup only at its own destinations' route.
	require.Equal(t, http.StatusMethodNotAllowed, f.send(t, "GET", "/search/tickets?key=k1", nil, "").status)
	require.Equal(t, http.StatusMethodNotAllowed, f.send(t, "GET", "/crm/api/tickets?external_id=k1", nil, "").status)
	require.Equal(t, http.StatusMethodNotAllowed, f.send(t, "GET", "/helpdesk/api/tickets", nil, "").status)
	require.Equal(t, http.StatusNotFound, f.send(t, "GET", "/nowhere/api/tickets", nil, "").status)
}

func TestSearchValidation(t *testing.T) {
	f := newFixtureWith(t, DialectModes())
	for body, field := range map[string]string{
		`{"request_id":"r-1","subject":"s"}`:                   "external_id",
		`{"external_id":"","subject":"s"}`:                     "external_id",
		`{"external_id":7,"subject":"s"}`:                      "external_id",
		`{"external_id":"k1","request_id":"r-1"}`:              "subject",
		`{"external_id":"k1","subject":""}`:                    "subject",
		`not json`:                                             "subject",
		`[]`:                                                   "subject",
		`{"external_id":"k1","subject":"s"} {"subject":"s"}`:   "subject",
		`{"external_id":"k1","subject":"s","extra":[1,2,3]} x`: "subject",
	} {
		r := f.send(t, "POST", "/search/api/tickets", nil, body)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, body)
		require.JSONEq(t, fmt.Sprintf(`{"error":"validation","field":%q}`, field), r.body, body)
	}
	require.Empty(t, f.records(t, "search"))
}

func TestSearchListIsCapped(t *testing.T) {
	f := newFixtureWith(t, DialectModes())
	for i := range maxSearch + 1 {
		require.Equal(t, http.StatusCreated, f.send(t, "POST", "/search/api/tickets", nil, searchTicketBody(fmt.Sprint("k", i), "s")).status)
	}
	var list struct {
		Tickets []map[string]string `json:"tickets"`
		Count   int                 `json:"count"`
	}
	require.NoError(t, json.Unmarshal([]byte(f.send(t, "GET", "/search/api/tickets", nil, "").body), &list))
	require.Len(t, list.Tickets, maxSearch)
	require.Equal(t, maxSearch, list.Count, "count is the list's length")
	require.Equal(t, "ticket-1", list.Tickets[0]["id"], "oldest first")
}

// TestGarbledLookup: the fault makes the next lookups answer 200 with an
// HTML page, then lookups answer normally again; creates and lookups each
// spend only their own faults.
func TestGarbledLookup(t *testing.T) {
	f := newFixtureWith(t, DevModes())
	requireGarbled := func(r raw) {
		t.Helper()
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "text/html", r.header.Get("Content-Type"))
		require.Equal(t, "<html><body><h1>Scheduled maintenance</h1></body></html>", r.body)
		require.False(t, json.Valid([]byte(r.body)))
	}
	const lookup = "/search/api/tickets?external_id=k1"
	create := func() raw {
		t.Helper()
		return f.send(t, "POST", "/search/api/tickets", nil, searchTicketBody("k1", "s"))
	}

	require.NoError(t, f.srv.Inject("search", Fault{Kind: FaultGarbledLookup}))
	require.Equal(t, http.StatusCreated, create().status, "a create does not spend a lookup fault")
	requireGarbled(f.send(t, "GET", lookup, nil, ""))
	normal := f.send(t, "GET", lookup, nil, "")
	require.Equal(t, http.StatusOK, normal.status)
	require.JSONEq(t, `{"tickets":[{"id":"ticket-1","external_id":"k1","status":"open"}],"count":1}`, normal.body, "spent")

	require.NoError(t, f.srv.Inject("search", Fault{Kind: FaultFail503}))
	require.JSONEq(t, normal.body, f.send(t, "GET", lookup, nil, "").body, "a lookup does not spend a create fault")
	require.Equal(t, http.StatusServiceUnavailable, create().status)
	require.Equal(t, http.StatusCreated, create().status)

	// Count works as for the other faults, and the ticket service's own
	// lookup can be garbled too, before it checks its parameter.
	require.NoError(t, f.srv.Inject("crm", Fault{Kind: FaultGarbledLookup, Count: 2}))
	require.Equal(t, http.StatusCreated, f.mustPost(t, "crm", "k1", ticket).status)
	requireGarbled(f.send(t, "GET", "/crm/tickets?key=k1", nil, ""))
	requireGarbled(f.send(t, "GET", "/crm/tickets", nil, ""))
	found := f.send(t, "GET", "/crm/tickets?key=k1", nil, "")
	require.Equal(t, http.StatusOK, found.status)
	require.JSONEq(t, `{"id":"ticket-1","status":"created"}`, found.body)

	// A refused lookup (another destination's route) spends nothing.
	require.NoError(t, f.srv.Inject("search", Fault{Kind: FaultGarbledLookup}))
	require.Equal(t, http.StatusMethodNotAllowed, f.send(t, "GET", "/search/tickets?key=k1", nil, "").status)
	requireGarbled(f.send(t, "GET", lookup, nil, ""))

	// Reset drops queued lookup faults.
	require.NoError(t, f.srv.Inject("search", Fault{Kind: FaultGarbledLookup}))
	require.NoError(t, f.srv.Reset("search"))
	require.JSONEq(t, `{"tickets":[],"count":0}`, f.send(t, "GET", lookup, nil, "").body)

	// Only where a lookup would spend it, and through the admin route too.
	require.Error(t, f.srv.Inject("helpdesk", Fault{Kind: FaultGarbledLookup}))
	require.Error(t, f.srv.Inject("search", Fault{Kind: FaultGarbledLookup, Count: -1}))
	r := f.send(t, "POST", "/admin/faults", nil, `{"destination":"search","fault":"garbled_lookup","count":1}`)
	require.Equal(t, http.StatusNoContent, r.status, r.body)
	requireGarbled(f.send(t, "GET", lookup, nil, ""))
	r = f.send(t, "POST", "/admin/faults", nil, `{"destination":"helpdesk","fault":"garbled_lookup"}`)
	require.Equal(t, http.StatusBadRequest, r.status)
}
