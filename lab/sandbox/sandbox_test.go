package sandbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const ticket = `{"request_id":"example-001","subject":"Move the workshop booking"}`

type fixture struct {
	srv    *Server
	http   *httptest.Server
	client *http.Client
	dbPath string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, DefaultModes())
}

func newFixtureWith(t *testing.T, modes map[string]Mode) *fixture {
	t.Helper()
	dbPath := filepath.Join(t.TempDir(), "sandbox.db")
	srv, err := Open(dbPath, modes)
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		require.NoError(t, srv.Close())
	})
	// One connection per request, and no body to replay: a broken
	// connection must surface as an error here, never as a silent resend.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return &fixture{srv: srv, http: hs, client: client, dbPath: dbPath}
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
}

func (f *fixture) post(t *testing.T, dest, key, body string) (reply, error) {
	t.Helper()
	return f.postCtx(context.Background(), t, dest, key, body)
}

func (f *fixture) postCtx(ctx context.Context, t *testing.T, dest, key, body string) (reply, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.http.URL+"/"+dest+"/tickets", bytes.NewBufferString(body))
	require.NoError(t, err)
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(KeyHeader, key)
	}
	return f.do(t, req)
}

func (f *fixture) do(t *testing.T, req *http.Request) (reply, error) {
	t.Helper()
	resp, err := f.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, header: resp.Header}
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if len(b) > 0 {
		require.NoError(t, json.Unmarshal(b, &r.body), "body %s", b)
	}
	return r, nil
}

func (f *fixture) mustPost(t *testing.T, dest, key, body string) reply {
	t.Helper()
	r, err := f.post(t, dest, key, body)
	require.NoError(t, err)
	return r
}

func (f *fixture) records(t *testing.T, dest string) []Record {
	t.Helper()
	recs, err := f.srv.Records(dest)
	require.NoError(t, err)
	return recs
}

func results(logs []RequestLog) []Result {
	out := make([]Result, len(logs))
	for i, l := range logs {
		out[i] = l.Result
	}
	return out
}

func ptr(s string) *string { return &s }

// requireHungUp checks the server closed the connection without a byte of
// response, as a real peer crash or middlebox would.
func requireHungUp(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	require.True(t, errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET),
		"want EOF or reset, got %v", err)
}

func TestHonoursKeys(t *testing.T) {
	f := newFixture(t)

	first := f.mustPost(t, "helpdesk", "same-operation", ticket)
	require.Equal(t, http.StatusCreated, first.status)
	require.Equal(t, map[string]any{"id": "ticket-1", "status": "created"}, first.body)
	require.Empty(t, first.header.Get(ReplayedHeader))

	// Same key, same payload in another member order and spacing: a replay.
	again := f.mustPost(t, "helpdesk", "same-operation", `{ "subject": "Move the workshop booking", "request_id": "example-001" }`)
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, "true", again.header.Get(ReplayedHeader))
	require.Equal(t, "ticket-1", again.body["id"])

	reused := f.mustPost(t, "helpdesk", "same-operation", `{"request_id":"example-001","subject":"Another subject"}`)
	require.Equal(t, http.StatusUnprocessableEntity, reused.status)
	require.Equal(t, "idempotency_key_reused", reused.body["error"])

	// Without a key there is nothing to deduplicate on.
	unkeyed := f.mustPost(t, "helpdesk", "", ticket)
	require.Equal(t, http.StatusCreated, unkeyed.status)
	require.Equal(t, "ticket-2", unkeyed.body["id"])

	recs := f.records(t, "helpdesk")
	require.Len(t, recs, 2)
	require.Equal(t, "same-operation", recs[0].Key)
	require.JSONEq(t, ticket, string(recs[0].Payload))
	require.Empty(t, recs[1].Key)
	require.Equal(t, []RequestLog{
		{Request: 1, Key: ptr("same-operation"), Write: true, Result: ResultWrittenThenReceipt},
		{Request: 2, Key: ptr("same-operation"), CacheHit: true, Result: ResultCachedReceipt},
		{Request: 3, Key: ptr("same-operation"), Result: ResultKeyReused},
		{Request: 4, Write: true, Result: ResultWrittenThenReceipt},
	}, f.srv.Requests("helpdesk"))
}

func TestEveryPostWritesWithoutKeySupport(t *testing.T) {
	for _, dest := range []string{"ignoring", "legacy"} {
		t.Run(dest, func(t *testing.T) {
			f := newFixture(t)
			for i := 1; i <= 2; i++ {
				r := f.mustPost(t, dest, "same-operation", ticket)
				require.Equal(t, http.StatusCreated, r.status)
				require.Equal(t, fmt.Sprintf("ticket-%d", i), r.body["id"])
				require.Empty(t, r.header.Get(ReplayedHeader))
			}
			recs := f.records(t, dest)
			require.Len(t, recs, 2)
			require.Empty(t, recs[0].Key, "a destination without key support stores no key")
			require.Equal(t, []Result{ResultWrittenThenReceipt, ResultWrittenThenReceipt}, results(f.srv.Requests(dest)))
			require.Equal(t, ptr("same-operation"), f.srv.Requests(dest)[0].Key, "the log shows what was sent")
		})
	}
}

func TestLookup(t *testing.T) {
	f := newFixture(t)
	get := func(dest, key string) reply {
		req, err := http.NewRequest(http.MethodGet, f.http.URL+"/"+dest+"/tickets?key="+key, nil)
		require.NoError(t, err)
		r, err := f.do(t, req)
		require.NoError(t, err)
		return r
	}

	require.Equal(t, http.StatusNotFound, get("crm", "k1").status)
	require.Equal(t, http.StatusCreated, f.mustPost(t, "crm", "k1", ticket).status)
	second := f.mustPost(t, "crm", "k1", ticket)
	require.Equal(t, "ticket-2", second.body["id"], "lookup destinations do not deduplicate")

	found := get("crm", "k1")
	require.Equal(t, http.StatusOK, found.status)
	require.Equal(t, map[string]any{"id": "ticket-1", "status": "created"}, found.body)
	require.Equal(t, http.StatusNotFound, get("crm", "k2").status)
	require.Equal(t, http.StatusBadRequest, get("crm", "").status)
	// A destination that cannot be searched must not answer "not found".
	require.Equal(t, http.StatusMethodNotAllowed, get("helpdesk", "k1").status)
}

func TestValidation(t *testing.T) {
	f := newFixture(t)
	for _, body := range []string{
		``, `not json`, `[]`, `"text"`, `null`, `{}`,
		`{"subject":""}`, `{"subject":7}`, `{"subject":null}`,
		`{"subject":"ok"} {"subject":"again"}`,
	} {
		for dest := range DefaultModes() {
			r := f.mustPost(t, dest, "k", body)
			require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s %q", dest, body)
			require.Equal(t, map[string]any{"error": "validation", "field": "subject"}, r.body)
		}
	}
	for dest := range DefaultModes() {
		require.Empty(t, f.records(t, dest))
		for _, l := range f.srv.Requests(dest) {
			require.Equal(t, RequestLog{Request: l.Request, Key: ptr("k"), Result: ResultValidationRejected}, l)
		}
	}
	// A rejected request does not consume its key.
	require.Equal(t, http.StatusCreated, f.mustPost(t, "helpdesk", "k", ticket).status)
}

func TestUnknownDestination(t *testing.T) {
	f := newFixture(t)
	require.Equal(t, http.StatusNotFound, f.mustPost(t, "nowhere", "", ticket).status)
	resp, err := f.client.Get(f.http.URL + "/admin/records?destination=nowhere")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// The seed's "key" case: the first response is lost after the commit, the
// repeat with the same key recovers the first receipt.
func TestCloseAfterCommitThenReplay(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.srv.Inject("helpdesk", Fault{Kind: FaultCloseAfterCommit}))

	_, err := f.post(t, "helpdesk", "same-operation", ticket)
	requireHungUp(t, err)
	require.Len(t, f.records(t, "helpdesk"), 1, "the effect was committed before the hang-up")

	r := f.mustPost(t, "helpdesk", "same-operation", ticket)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "ticket-1", r.body["id"])
	require.Len(t, f.records(t, "helpdesk"), 1)
	require.Equal(t, []RequestLog{
		{Request: 1, Key: ptr("same-operation"), Write: true, Result: ResultWrittenThenClosed},
		{Request: 2, Key: ptr("same-operation"), CacheHit: true, Result: ResultCachedReceipt},
	}, f.srv.Requests("helpdesk"))
}

// The seed's "blind" case: without key support the repeat is a second effect.
func TestCloseAfterCommitBlindRetry(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.srv.Inject("legacy", Fault{Kind: FaultCloseAfterCommit}))
	_, err := f.post(t, "legacy", "", ticket)
	requireHungUp(t, err)
	r := f.mustPost(t, "legacy", "", ticket)
	require.Equal(t, "ticket-2", r.body["id"])
	require.Len(t, f.records(t, "legacy"), 2)
	require.Equal(t, []RequestLog{
		{Request: 1, Write: true, Result: ResultWrittenThenClosed},
		{Request: 2, Write: true, Result: ResultWrittenThenReceipt},
	}, f.srv.Requests("legacy"))
}

func TestDelayAfterCommit(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.srv.Inject("helpdesk", Fault{Kind: FaultDelayAfterCommit, Delay: 5 * time.Second}))

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := f.postCtx(ctx, t, "helpdesk", "k", ticket)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Len(t, f.records(t, "helpdesk"), 1, "committed before the delay")
	require.Equal(t, []Result{ResultWrittenThenDelayed}, results(f.srv.Requests("helpdesk")))

	// The key was released at commit: the repeat gets the replay, not 409.
	r := f.mustPost(t, "helpdesk", "k", ticket)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "ticket-1", r.body["id"])
}

func TestDelayAfterCommitAnswersPatientClient(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.srv.Inject("legacy", Fault{Kind: FaultDelayAfterCommit, Delay: 100 * time.Millisecond}))
	start := time.Now()
	r := f.mustPost(t, "legacy", "", ticket)
	require.Equal(t, http.StatusCreated, r.status)
	require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
}

func TestDelayBeforeCommit(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.srv.Inject("helpdesk", Fault{Kind: FaultDelayBeforeCommit, Delay: 500 * time.Millisecond}))

	errc := make(chan error, 1)
	go func() {
		_, err := f.post(t, "helpdesk", "k", ticket)
		errc <- err
	}()
	// While the first request holds the key, a repeat is told it is in flight.
	require.Eventually(t, func() bool { return len(f.srv.Requests("helpdesk")) == 1 }, 2*time.Second, 5*time.Millisecond)
	r := f.mustPost(t, "helpdesk", "k", ticket)
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "idempotency_key_in_flight", r.body["error"])

	requireHungUp(t, <-errc)
	require.Empty(t, f.records(t, "helpdesk"), "nothing was applied")
	require.Equal(t, []RequestLog{
		{Request: 1, Key: ptr("k"), Result: ResultDelayedThenClosed},
		{Request: 2, Key: ptr("k"), Result: ResultInFlight},
	}, f.srv.Requests("helpdesk"))

	// The key is free again, and unused.
	require.Equal(t, http.StatusCreated, f.mustPost(t, "helpdesk", "k", ticket).status)
}

func TestFail503(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.srv.Inject("helpdesk", Fault{Kind: FaultFail503, Count: 2}))
	for range 2 {
		r := f.mustPost(t, "helpdesk", "k", ticket)
		require.Equal(t, http.StatusServiceUnavailable, r.status)
		require.Equal(t, "1", r.header.Get("Retry-After"))
		require.Equal(t, map[string]any{"error": "unavailable"}, r.body)
	}
	require.Empty(t, f.records(t, "helpdesk"))
	require.Equal(t, http.StatusCreated, f.mustPost(t, "helpdesk", "k", ticket).status, "faults are spent")
	require.Equal(t, []Result{ResultUnavailable, ResultUnavailable, ResultWrittenThenReceipt}, results(f.srv.Requests("helpdesk")))
}

func TestFaultsQueueInOrder(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.srv.Inject("legacy", Fault{Kind: FaultFail503}))
	require.NoError(t, f.srv.Inject("legacy", Fault{Kind: FaultCloseAfterCommit}))
	require.Equal(t, http.StatusServiceUnavailable, f.mustPost(t, "legacy", "", ticket).status)
	_, err := f.post(t, "legacy", "", ticket)
	requireHungUp(t, err)
	require.Equal(t, http.StatusCreated, f.mustPost(t, "legacy", "", ticket).status)
	// Faults are per destination.
	require.Equal(t, http.StatusCreated, f.mustPost(t, "helpdesk", "", ticket).status)
}

func TestInjectRejectsBadFaults(t *testing.T) {
	f := newFixture(t)
	require.Error(t, f.srv.Inject("nowhere", Fault{Kind: FaultFail503}))
	require.Error(t, f.srv.Inject("helpdesk", Fault{Kind: "explode"}))
	require.Error(t, f.srv.Inject("helpdesk", Fault{Kind: FaultDelayAfterCommit}), "delay required")
}

func TestAdminEndpoints(t *testing.T) {
	f := newFixture(t)
	admin := func(method, path, body string) (int, []byte) {
		req, err := http.NewRequest(method, f.http.URL+path, bytes.NewBufferString(body))
		require.NoError(t, err)
		resp, err := f.client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b
	}

	status, _ := admin("POST", "/admin/faults", `{"destination":"helpdesk","fault":"close_after_commit","count":1}`)
	require.Equal(t, http.StatusNoContent, status)
	for _, bad := range []string{
		`{"destination":"helpdesk","fault":"explode"}`,
		`{"destination":"helpdesk","fault":"delay_after_commit","delay":"soon"}`,
		`{"destination":"helpdesk","fault":"fail_503","extra":1}`,
	} {
		status, _ := admin("POST", "/admin/faults", bad)
		require.Equal(t, http.StatusBadRequest, status, bad)
	}
	status, _ = admin("POST", "/admin/faults", `{"destination":"nowhere","fault":"fail_503"}`)
	require.Equal(t, http.StatusNotFound, status)

	_, err := f.post(t, "helpdesk", "k", ticket)
	requireHungUp(t, err)

	status, body := admin("GET", "/admin/records?destination=helpdesk", "")
	require.Equal(t, http.StatusOK, status)
	var recs []map[string]any
	require.NoError(t, json.Unmarshal(body, &recs))
	require.Len(t, recs, 1)
	require.Equal(t, "ticket-1", recs[0]["ticket_id"])
	require.Equal(t, "k", recs[0]["key"])
	require.Equal(t, map[string]any{"request_id": "example-001", "subject": "Move the workshop booking"}, recs[0]["payload"])
	require.NotEmpty(t, recs[0]["created_at"])

	status, body = admin("GET", "/admin/requests?destination=helpdesk", "")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `[{"request":1,"key":"k","write":true,"cache_hit":false,"result":"written_then_connection_closed"}]`, string(body))

	status, body = admin("GET", "/admin/requests?destination=legacy", "")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `[]`, string(body))

	status, _ = admin("POST", "/admin/reset?destination=helpdesk", "")
	require.Equal(t, http.StatusNoContent, status)
	_, body = admin("GET", "/admin/records?destination=helpdesk", "")
	require.JSONEq(t, `[]`, string(body))
	_, body = admin("GET", "/admin/requests?destination=helpdesk", "")
	require.JSONEq(t, `[]`, string(body))
	// After a reset the key is forgotten and numbering starts again.
	r := f.mustPost(t, "helpdesk", "k", ticket)
	require.Equal(t, http.StatusCreated, r.status)
	require.Equal(t, "ticket-1", r.body["id"])
}

func TestTicketsSurviveRestart(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "sandbox.db")
	serve := func(fn func(url string)) {
		srv, err := Open(dbPath, DefaultModes())
		require.NoError(t, err)
		hs := httptest.NewServer(srv.Handler())
		fn(hs.URL)
		hs.Close()
		require.NoError(t, srv.Close())
	}
	post := func(url, key string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, url+"/helpdesk/tickets", bytes.NewBufferString(ticket))
		require.NoError(t, err)
		req.Header.Set(KeyHeader, key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var r receipt
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		return resp.StatusCode, r.ID
	}

	serve(func(url string) {
		status, id := post(url, "k1")
		require.Equal(t, http.StatusCreated, status)
		require.Equal(t, "ticket-1", id)
	})
	serve(func(url string) {
		status, id := post(url, "k1")
		require.Equal(t, http.StatusOK, status, "the key survived the restart")
		require.Equal(t, "ticket-1", id)
		status, id = post(url, "k2")
		require.Equal(t, http.StatusCreated, status)
		require.Equal(t, "ticket-2", id, "numbering continues")
	})
}

func TestConcurrentSameKeyWritesOnce(t *testing.T) {
	f := newFixture(t)
	const n = 20
	statuses := make(chan int, n)
	ids := make(chan any, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			r, err := f.post(t, "helpdesk", "same-operation", ticket)
			if err != nil {
				t.Error(err)
				return
			}
			statuses <- r.status
			ids <- r.body["id"]
		})
	}
	close(start)
	wg.Wait()
	close(statuses)
	close(ids)

	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	require.Equal(t, 1, count[http.StatusCreated], "statuses %v", count)
	require.Equal(t, n, count[http.StatusCreated]+count[http.StatusOK]+count[http.StatusConflict], "statuses %v", count)
	for id := range ids {
		if id != nil {
			require.Equal(t, "ticket-1", id)
		}
	}
	require.Len(t, f.records(t, "helpdesk"), 1)
}

func TestConcurrentWritersDoNotFail(t *testing.T) {
	f := newFixture(t)
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := f.post(t, "helpdesk", fmt.Sprintf("k%d", i), ticket)
			if err != nil || r.status != http.StatusCreated {
				t.Errorf("request %d: %v %d", i, err, r.status)
			}
		})
	}
	wg.Wait()
	require.Len(t, f.records(t, "helpdesk"), n)
}

func TestListenAndServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ListenAndServe(ctx, addr, filepath.Join(t.TempDir(), "s.db"), DefaultModes()) }()
	require.Eventually(t, func() bool {
		resp, err := http.Post("http://"+addr+"/helpdesk/tickets", "application/json", bytes.NewBufferString(ticket))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusCreated
	}, 5*time.Second, 20*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("ListenAndServe did not return after cancel")
	}
}

// TestEcho: the echo faults answer with the request's headers (as sent,
// base64, URL-encoded) and body, before any write (400, 500) or in the
// receipt of the ticket they wrote (echo_created).
func TestEcho(t *testing.T) {
	f := newFixture(t)
	for _, k := range []FaultKind{FaultEcho400, FaultEcho500, FaultEchoCreated} {
		require.NoError(t, f.srv.Inject("helpdesk", Fault{Kind: k}))
	}
	for _, want := range []int{http.StatusBadRequest, http.StatusInternalServerError, http.StatusCreated} {
		r := f.mustPost(t, "helpdesk", "k-"+strconv.Itoa(want), ticket)
		require.Equal(t, want, r.status)
		e, ok := r.body["echo"].(map[string]any)
		require.True(t, ok, "%d: %v", want, r.body)
		require.Equal(t, ticket, e["body"])
		require.Equal(t, "k-"+strconv.Itoa(want), e["headers"].(map[string]any)[KeyHeader])
		require.Equal(t, base64.StdEncoding.EncodeToString([]byte("application/json")), e["headers_base64"].(map[string]any)["Content-Type"])
		require.Equal(t, "application%2Fjson", e["headers_escaped"].(map[string]any)["Content-Type"])
	}
	recs := f.records(t, "helpdesk")
	require.Len(t, recs, 1, "only echo_created writes")
	require.NotEmpty(t, f.mustPost(t, "helpdesk", "k-201", ticket).body["id"], "the created receipt keeps its id")
}
