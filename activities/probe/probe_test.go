package probe_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/activities/probe"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destination/httpdest"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/lab/testsuite"
)

// env is the sandbox ticket service and the SQLite ledger on loopback, with
// the adapters a worker would open for them.
func env(t *testing.T) *testsuite.Env {
	t.Helper()
	e, err := testsuite.NewEnv(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

func run(t *testing.T, e *testsuite.Env, name string, d destinations.Destination, ad destination.Adapter, o probe.Options) probe.Report {
	t.Helper()
	r, err := probe.Run(context.Background(), name, d, ad, o)
	require.NoError(t, err)
	// The report always names the probe operation, so its effects can be found.
	require.Equal(t, probe.Operation, r.Operation)
	require.NotEmpty(t, r.Key)
	require.NotEmpty(t, r.Checked)
	return r
}

func probeDest(t *testing.T, e *testsuite.Env, name string) probe.Report {
	t.Helper()
	return run(t, e, name, e.Config.Destinations[name], e.Adapters.ByName[name], probe.Options{})
}

// probeChanged probes the destination name as declared but for change,
// through an adapter opened for the changed declaration.
func probeChanged(t *testing.T, e *testsuite.Env, name string, change func(d *destinations.Destination)) probe.Report {
	t.Helper()
	d := e.Config.Destinations[name]
	change(&d)
	ad, err := httpdest.New(name, d, nil)
	require.NoError(t, err)
	return run(t, e, name, d, ad, probe.Options{})
}

func effects(t *testing.T, e *testsuite.Env, dest, businessID string) int {
	t.Helper()
	n, err := e.Effects(dest, businessID)
	require.NoError(t, err)
	return n
}

func TestHonoursKeys(t *testing.T) {
	e := env(t)
	r := probeDest(t, e, lab.DestHelpdesk)
	require.Equal(t, probe.Passed, r.Verdict, r.Finding)
	require.Contains(t, r.Finding, "replays")
	require.Len(t, r.Steps, 2)
	require.Equal(t, contract.ClassCreated, r.Steps[0].Class)
	require.Equal(t, contract.ClassReplayed, r.Steps[1].Class)
	require.Equal(t, r.Steps[0].ResourceID, r.Steps[1].ResourceID)
	require.Equal(t, 1, effects(t, e, lab.DestHelpdesk, r.BusinessID))
	require.Equal(t, []string{r.Steps[0].ResourceID}, r.Effects)
}

// TestIgnoresKeys is the seed's "ignored" case: the destination declares
// dedup key, accepts the header and ignores it.
func TestIgnoresKeys(t *testing.T) {
	e := env(t)
	r := probeDest(t, e, lab.DestIgnoring)
	require.Equal(t, probe.Violation, r.Verdict)
	require.Contains(t, r.Finding, "CONTRACT VIOLATION: the destination ignores the key")
	require.Contains(t, r.Finding, "Declare dedup none")
	require.Len(t, r.Effects, 2)
	require.Equal(t, 2, effects(t, e, lab.DestIgnoring, r.BusinessID))
}

func TestUniqueCommit(t *testing.T) {
	e := env(t)
	r := probeDest(t, e, lab.DestLedger)
	require.Equal(t, probe.Passed, r.Verdict, r.Finding)
	require.Contains(t, r.Checked, "UNIQUE key")
	require.Equal(t, 1, effects(t, e, lab.DestLedger, r.BusinessID))
}

func TestLookup(t *testing.T) {
	e := env(t)
	r := probeDest(t, e, lab.DestCRM)
	require.Equal(t, probe.Passed, r.Verdict, r.Finding)
	require.Len(t, r.Steps, 3, "lookup, send, lookup")
	require.False(t, *r.Steps[0].Found)
	require.True(t, *r.Steps[2].Found)
	require.Equal(t, r.Steps[1].ResourceID, r.Steps[2].ResourceID)
	require.Equal(t, 1, effects(t, e, lab.DestCRM, r.BusinessID))
}

// TestLookupNotByKey: a lookup_url that does not filter by the key never
// finds the effect, so a lost response would be followed by a second send.
func TestLookupNotByKey(t *testing.T) {
	e := env(t)
	r := probeChanged(t, e, lab.DestCRM, func(d *destinations.Destination) {
		d.LookupURL = e.SandboxURL + "/crm/tickets?key=some-fixed-value"
	})
	require.Equal(t, probe.Violation, r.Verdict)
	require.Contains(t, r.Finding, "the lookup does not find the effect just created")
}

// laggingIndex is a partner whose lookup (GET ?key=) sees a record only
// lag after its create was answered, as a search index refreshed late does.
func laggingIndex(t *testing.T, lag time.Duration) *httptest.Server {
	var mu sync.Mutex
	created := map[string]time.Time{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPost {
			key := r.Header.Get("Idempotency-Key")
			created[key] = time.Now()
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]string{"id": "rec-" + key})
			return
		}
		key := r.URL.Query().Get("key")
		if at, ok := created[key]; ok && time.Since(at) >= lag {
			_ = json.NewEncoder(w).Encode(map[string]string{"id": "rec-" + key})
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestLookupSettle: the probe measures how long the effect takes to appear
// to the lookup, and says when the declared settle time is shorter.
func TestLookupSettle(t *testing.T) {
	e := env(t)
	srv := laggingIndex(t, 400*time.Millisecond)
	at := func(settle time.Duration) func(d *destinations.Destination) {
		return func(d *destinations.Destination) {
			d.URL, d.LookupURL = srv.URL+"/records", srv.URL+"/records?key={key}"
			s := contract.Duration(settle)
			d.Contract.Settle = &s
		}
	}

	r := probeChanged(t, e, lab.DestCRM, at(2*time.Second))
	require.Equal(t, probe.Passed, r.Verdict, r.Finding)
	require.Equal(t, "2s", r.Settle)
	appeared, err := time.ParseDuration(r.Appeared)
	require.NoError(t, err)
	require.GreaterOrEqual(t, appeared, 400*time.Millisecond)
	require.Less(t, appeared, time.Second, "measured to within a tenth of the settle time")
	require.Contains(t, r.Finding, "within the declared settle of 2s")
	require.Empty(t, r.Warnings)

	r = probeChanged(t, e, lab.DestCRM, at(600*time.Millisecond))
	require.Equal(t, probe.Passed, r.Verdict, r.Finding)
	require.Len(t, r.Warnings, 1)
	require.Contains(t, r.Warnings[0], "half the declared settle of 600ms or more")

	r = probeChanged(t, e, lab.DestCRM, at(100*time.Millisecond))
	require.Equal(t, probe.Violation, r.Verdict, r.Finding)
	require.NotEmpty(t, r.Appeared, "measured past the settle time")
	require.Contains(t, r.Finding, "appeared to the lookup only "+r.Appeared+" after the send was answered")
	require.Contains(t, r.Finding, "the declared settle of 100ms is shorter")
}

func TestNone(t *testing.T) {
	e := env(t)
	r := probeDest(t, e, lab.DestLegacy)
	require.Equal(t, probe.Passed, r.Verdict, r.Finding)
	require.Len(t, r.Steps, 1, "a destination without dedup is sent the probe once")
	require.Contains(t, r.Checked, "not sent twice")
	require.Equal(t, 1, effects(t, e, lab.DestLegacy, r.BusinessID))
}

func TestRejectsProbePayload(t *testing.T) {
	e := env(t)
	// The sandbox requires a subject.
	r := run(t, e, lab.DestHelpdesk, e.Config.Destinations[lab.DestHelpdesk],
		e.Adapters.ByName[lab.DestHelpdesk], probe.Options{Payload: json.RawMessage(`{"title": "no subject"}`)})
	require.Equal(t, probe.Rejected, r.Verdict)
	require.Contains(t, r.Finding, "refused the probe payload (HTTP 422")
	require.Contains(t, r.Finding, "--payload")
	require.Len(t, r.Steps, 1)
	require.Empty(t, r.Effects)
}

// TestMarkerMatchesNew: a replay marker that also matches a new effect
// (here status 201) would make every delivery look like a duplicate.
func TestMarkerMatchesNew(t *testing.T) {
	e := env(t)
	r := probeChanged(t, e, lab.DestHelpdesk, func(d *destinations.Destination) { d.Contract.ReplayMarker = &contract.ReplayMarker{Status: 201} })
	require.Equal(t, probe.Violation, r.Verdict)
	require.Contains(t, r.Finding, "replay_marker status 201 also matches new effects")
}

// TestNoMarker: replays without a declared marker pass, with a warning.
func TestNoMarker(t *testing.T) {
	e := env(t)
	r := probeChanged(t, e, lab.DestHelpdesk, func(d *destinations.Destination) { d.Contract.ReplayMarker = nil })
	require.Equal(t, probe.Passed, r.Verdict, r.Finding)
	require.Len(t, r.Warnings, 1)
	require.Contains(t, r.Warnings[0], "set replay_marker")
}

func TestUnreachable(t *testing.T) {
	e := env(t)
	r := probeChanged(t, e, lab.DestHelpdesk, func(d *destinations.Destination) { d.URL = "http://127.0.0.1:1/helpdesk/tickets" })
	require.Equal(t, probe.Inconclusive, r.Verdict)
	require.Contains(t, r.Finding, "not_sent")
}

func TestBusinessIDUniquePerRun(t *testing.T) {
	e := env(t)
	a, b := probeDest(t, e, lab.DestHelpdesk), probeDest(t, e, lab.DestHelpdesk)
	require.NotEqual(t, a.BusinessID, b.BusinessID)
	require.NotEqual(t, a.Key, b.Key)
	var p map[string]any
	require.NoError(t, json.Unmarshal(a.Payload, &p))
	require.Equal(t, a.BusinessID, p["request_id"])
	require.Contains(t, p["subject"], "Courier probe")
}

// TestLookupByCallersField: a search partner whose lookup matches the
// external id the caller sets in the payload (no key_field) finds the
// probe's effect only when the probe's payload carries its business id
// there: with the default payload the probe cannot pass, with
// {business_id} in --payload it does.
func TestLookupByCallersField(t *testing.T) {
	dir := t.TempDir()
	sb, err := lab.StartSandbox(filepath.Join(dir, lab.SandboxDB), "", sandbox.DialectModes())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	examples, err := lab.Examples(filepath.Join("..", "..", "examples", "destinations"), sb.URL)
	require.NoError(t, err)
	var d destinations.Destination
	for _, ex := range examples {
		if s, ok := ex.Config.Destinations["search"]; ok {
			d = s
		}
	}
	require.NotEmpty(t, d.URL, "examples/destinations/search.json")
	d.Contract.KeyField = ""
	d.LookupURL = strings.Replace(d.LookupURL, "{key}", "{business_id}", 1)
	d.Lookup.Match.Equals = "{business_id}"
	d.Contract.Settle = ptr(contract.Duration(time.Second))
	ad, err := httpdest.New("search", d, nil)
	require.NoError(t, err)

	probeWith := func(payload string) probe.Report {
		r, err := probe.Run(context.Background(), "search", d, ad, probe.Options{Payload: json.RawMessage(payload)})
		require.NoError(t, err)
		return r
	}
	r := probeWith(`{"external_id": "set-by-the-caller", "subject": "probe"}`)
	require.Equal(t, probe.Violation, r.Verdict, "a payload without the probe's id cannot be found: %s", r.Finding)

	r = probeWith(`{"external_id": "{business_id}", "subject": "probe of {key}"}`)
	require.Equal(t, probe.Passed, r.Verdict, r.Finding)
	var sent map[string]string
	require.NoError(t, json.Unmarshal(r.Payload, &sent))
	require.Equal(t, r.BusinessID, sent["external_id"])
	require.Equal(t, "probe of "+r.Key, sent["subject"])
}

func ptr[T any](v T) *T { return &v }
