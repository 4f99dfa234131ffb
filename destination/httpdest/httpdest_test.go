package httpdest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
)

const payload = `{"request_id":"example-001","subject":"Move the workshop booking"}`

func httpDestination(url string) destinations.Destination {
	return destinations.Destination{
		Adapter: destinations.AdapterHTTP,
		URL:     url,
		Contract: contract.Contract{
			Dedup:     contract.DedupKey,
			KeyHeader: "Idempotency-Key",
			Retry: contract.Retry{
				MaxAttempts:    3,
				AttemptTimeout: contract.Duration(2 * time.Second),
				Deadline:       contract.Duration(time.Minute),
			},
		},
	}
}

func request(key string) destination.Request {
	return destination.Request{
		Key: key, Destination: "helpdesk", Operation: "create-ticket",
		BusinessID: "example-001", Payload: json.RawMessage(payload), Attempt: 1,
	}
}

func newAdapter(t *testing.T, d destinations.Destination) *Adapter {
	t.Helper()
	a, err := New("helpdesk", d, nil)
	require.NoError(t, err)
	return a
}

// startSandbox serves the sandbox ticket service on a loopback port, as
// the fault lab does, and returns it and its base URL.
func startSandbox(t testing.TB) (*sandbox.Server, string) {
	t.Helper()
	sb, err := lab.StartSandbox(filepath.Join(t.TempDir(), lab.SandboxDB), "", nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sb.Close()) })
	return sb.Server, sb.URL
}

// sandboxDest is a sandbox destination with the sandbox's replay marker.
func sandboxDest(base, path string) destinations.Destination {
	d := httpDestination(base + "/" + path + "/tickets")
	d.Contract.ReplayMarker = &contract.ReplayMarker{Header: sandbox.ReplayedHeader, Value: "true"}
	return d
}

func TestClassifiesStatus(t *testing.T) {
	headerMarker := &contract.ReplayMarker{Header: "Idempotent-Replayed", Value: "true"}
	statusMarker := &contract.ReplayMarker{Status: http.StatusOK}
	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		marker     *contract.ReplayMarker
		class      contract.Class
		retryAfter time.Duration // want at least this, within a few seconds
	}{
		{name: "201 created", status: 201, body: `{"id":"ticket-1","status":"created"}`, marker: headerMarker, class: contract.ClassCreated},
		{name: "200 without marker config", status: 200, body: `{"id":"ticket-1"}`, class: contract.ClassCreated},
		{name: "replay by header", status: 200, header: map[string]string{"Idempotent-Replayed": "True"}, body: `{"id":"ticket-1"}`, marker: headerMarker, class: contract.ClassReplayed},
		{name: "header marker absent", status: 200, body: `{"id":"ticket-1"}`, marker: headerMarker, class: contract.ClassCreated},
		{name: "header marker other value", status: 200, header: map[string]string{"Idempotent-Replayed": "false"}, body: `{"id":"ticket-1"}`, marker: headerMarker, class: contract.ClassCreated},
		{name: "replay by status", status: 200, body: `{"id":"ticket-1"}`, marker: statusMarker, class: contract.ClassReplayed},
		{name: "new by status", status: 201, body: `{"id":"ticket-1"}`, marker: statusMarker, class: contract.ClassCreated},
		{name: "409 in flight", status: 409, body: `{"error":"idempotency_key_in_flight"}`, class: contract.ClassInFlight},
		{name: "422 key reused", status: 422, body: `{"error":"idempotency_key_reused"}`, class: contract.ClassConflict},
		{name: "409 key reused any case", status: 409, body: `{"error":{"code":"KEY_REUSED"}}`, class: contract.ClassConflict},
		{name: "422 validation", status: 422, body: `{"error":"validation","field":"subject"}`, class: contract.ClassRejected},
		{name: "400", status: 400, body: `bad request`, class: contract.ClassRejected},
		{name: "401", status: 401, class: contract.ClassRejected},
		{name: "404", status: 404, class: contract.ClassRejected},
		{name: "408 may have started", status: 408, class: contract.ClassUnknown},
		{name: "429 seconds", status: 429, header: map[string]string{"Retry-After": "7"}, class: contract.ClassThrottled, retryAfter: 7 * time.Second},
		{name: "503 http date", status: 503, header: map[string]string{"Retry-After": future}, class: contract.ClassThrottled, retryAfter: 85 * time.Second},
		{name: "500", status: 500, class: contract.ClassServerError},
		{name: "502 retry after", status: 502, header: map[string]string{"Retry-After": "3"}, class: contract.ClassServerError, retryAfter: 3 * time.Second},
		{name: "303 not followed", status: 303, header: map[string]string{"Location": "/elsewhere"}, class: contract.ClassUnknown},
		{name: "307 not followed", status: 307, header: map[string]string{"Location": "/elsewhere"}, class: contract.ClassUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var posts atomic.Int32
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				posts.Add(1)
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer hs.Close()
			d := httpDestination(hs.URL)
			d.Contract.ReplayMarker = tc.marker

			out := newAdapter(t, d).Deliver(context.Background(), request("k"))
			require.Equal(t, tc.class, out.Class, "error: %s", out.Error)
			require.Equal(t, tc.status, out.StatusCode)
			require.EqualValues(t, 1, posts.Load(), "one attempt is one request, redirects included")
			require.InDelta(t, tc.retryAfter.Seconds(), out.RetryAfter.Seconds(), 5)

			if tc.status < 300 {
				require.Empty(t, out.Error)
				require.NotNil(t, out.Receipt)
				require.Equal(t, "ticket-1", out.Receipt.ResourceID)
				require.Equal(t, tc.status, out.Receipt.StatusCode)
				require.Equal(t, tc.class == contract.ClassReplayed, out.Receipt.Replayed)
			} else {
				require.Nil(t, out.Receipt)
				require.True(t, strings.HasPrefix(out.Error, fmt.Sprintf("HTTP %d", tc.status)), out.Error)
			}
		})
	}
}

func TestReceiptFields(t *testing.T) {
	big := fmt.Sprintf(`{"id":"t-9","pad":%q}`, strings.Repeat("x", maxReceiptBody))
	for _, tc := range []struct {
		body, id, status string
		keepsBody        bool
	}{
		{body: `{"id":"ticket-1","status":"created"}`, id: "ticket-1", status: "created", keepsBody: true},
		{body: `{"ticket_id":"T-7","status":"open"}`, id: "T-7", status: "open", keepsBody: true},
		{body: `{"resource_id":"r-1"}`, id: "r-1", keepsBody: true},
		{body: `{"id":12345678901234567890}`, id: "12345678901234567890", keepsBody: true},
		{body: `{"id":null,"ticket_id":"T-8"}`, id: "T-8", keepsBody: true},
		{body: `created`},
		{body: ``},
		{body: big, id: "t-9"},
	} {
		r := receipt(201, []byte(tc.body))
		require.Equal(t, tc.id, r.ResourceID, tc.body)
		require.Equal(t, tc.status, r.Status, tc.body)
		require.Equal(t, 201, r.StatusCode)
		if tc.keepsBody {
			require.JSONEq(t, tc.body, string(r.Body))
		} else {
			require.Nil(t, r.Body)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                               0,
		"5":                              5 * time.Second,
		" 120 ":                          2 * time.Minute,
		"0":                              0,
		"-3":                             0,
		"soon":                           0,
		"Mon, 30 Nov 2026 12:00:30 GMT":  30 * time.Second,
		"Monday, 30-Nov-26 12:01:00 GMT": time.Minute, // RFC 850, still valid HTTP-date
		"Mon, 30 Nov 2026 11:59:00 GMT":  0,           // in the past
		"99999999999999":                 contract.MaxDeadline,
	} {
		require.Equal(t, want, retryAfter(v, now), "%q", v)
	}
}

func TestDialRefusedIsNotSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	out := newAdapter(t, httpDestination("http://"+addr+"/helpdesk/tickets")).Deliver(context.Background(), request("k"))
	require.Equal(t, contract.ClassNotSent, out.Class)
	require.Contains(t, out.Error, "connection refused")
	require.Contains(t, out.Error, "before connecting")
	require.Zero(t, out.StatusCode)
}

func TestTLSHandshakeFailureIsNotSent(t *testing.T) {
	var posts atomic.Int32
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { posts.Add(1) }))
	hs.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake error is expected
	hs.StartTLS()
	defer hs.Close()
	// The adapter does not trust the test server's certificate.
	out := newAdapter(t, httpDestination(hs.URL)).Deliver(context.Background(), request("k"))
	require.Equal(t, contract.ClassNotSent, out.Class, out.Error)
	require.Contains(t, out.Error, "certificate")
	require.Zero(t, posts.Load())
}

// The seed's "key" case at the adapter: the response is lost after the
// commit (unknown), the retry with the same key is recognised as a replay.
func TestHangUpAfterWriteIsUnknownThenReplayed(t *testing.T) {
	sb, base := startSandbox(t)
	a := newAdapter(t, sandboxDest(base, "helpdesk"))
	require.NoError(t, sb.Inject("helpdesk", sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))

	out := a.Deliver(context.Background(), request("same-operation"))
	require.Equal(t, contract.ClassUnknown, out.Class)
	require.Equal(t, "connection closed after the request was written: EOF", out.Error)
	require.Nil(t, out.Receipt)

	out = a.Deliver(context.Background(), request("same-operation"))
	require.Equal(t, contract.ClassReplayed, out.Class, out.Error)
	require.Equal(t, http.StatusOK, out.StatusCode)
	require.Equal(t, "ticket-1", out.Receipt.ResourceID)
	require.Equal(t, "created", out.Receipt.Status)
	require.True(t, out.Receipt.Replayed)

	recs, err := sb.Records("helpdesk")
	require.NoError(t, err)
	require.Len(t, recs, 1)
}

func TestTimeoutAfterWriteIsUnknown(t *testing.T) {
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select { // sleep past the attempt timeout
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer hs.Close()
	defer close(release)
	d := httpDestination(hs.URL)
	d.Contract.Retry.AttemptTimeout = contract.Duration(200 * time.Millisecond)

	start := time.Now()
	out := newAdapter(t, d).Deliver(context.Background(), request("k"))
	require.Equal(t, contract.ClassUnknown, out.Class)
	require.Equal(t, "no response within the attempt timeout (200ms) after the request was written", out.Error)
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestSandboxFaultsClassify(t *testing.T) {
	sb, base := startSandbox(t)
	d := sandboxDest(base, "helpdesk")
	d.Contract.Retry.AttemptTimeout = contract.Duration(300 * time.Millisecond)
	a := newAdapter(t, d)
	for _, tc := range []struct {
		fault sandbox.Fault
		class contract.Class
	}{
		{sandbox.Fault{Kind: sandbox.FaultDelayAfterCommit, Delay: 5 * time.Second}, contract.ClassUnknown},
		{sandbox.Fault{Kind: sandbox.FaultDelayBeforeCommit, Delay: 5 * time.Second}, contract.ClassUnknown},
		{sandbox.Fault{Kind: sandbox.FaultFail503}, contract.ClassThrottled},
	} {
		t.Run(string(tc.fault.Kind), func(t *testing.T) {
			require.NoError(t, sb.Reset("helpdesk"))
			require.NoError(t, sb.Inject("helpdesk", tc.fault))
			out := a.Deliver(context.Background(), request("k-"+string(tc.fault.Kind)))
			require.Equal(t, tc.class, out.Class, out.Error)
			if tc.class == contract.ClassThrottled {
				require.Equal(t, time.Second, out.RetryAfter)
				require.Equal(t, `HTTP 503: {"error":"unavailable"}`, out.Error)
			}
		})
	}
}

func TestSandboxModes(t *testing.T) {
	sb, base := startSandbox(t)
	ctx := context.Background()

	helpdesk := newAdapter(t, sandboxDest(base, "helpdesk"))
	first := helpdesk.Deliver(ctx, request("k1"))
	require.Equal(t, contract.ClassCreated, first.Class, first.Error)
	require.Equal(t, http.StatusCreated, first.StatusCode)
	require.Equal(t, "ticket-1", first.Receipt.ResourceID)
	require.JSONEq(t, `{"id":"ticket-1","status":"created"}`, string(first.Receipt.Body))
	require.Equal(t, contract.ClassReplayed, helpdesk.Deliver(ctx, request("k1")).Class)

	other := request("k1")
	other.Payload = json.RawMessage(`{"subject":"something else"}`)
	conflict := helpdesk.Deliver(ctx, other)
	require.Equal(t, contract.ClassConflict, conflict.Class)
	require.Equal(t, http.StatusUnprocessableEntity, conflict.StatusCode)

	invalid := request("k2")
	invalid.Payload = json.RawMessage(`{"request_id":"example-002"}`)
	rejected := helpdesk.Deliver(ctx, invalid)
	require.Equal(t, contract.ClassRejected, rejected.Class)
	require.Equal(t, `HTTP 422: {"error":"validation","field":"subject"}`, rejected.Error)

	legacy := newAdapter(t, sandboxDest(base, "legacy"))
	for _, id := range []string{"ticket-1", "ticket-2"} {
		out := legacy.Deliver(ctx, request("k1"))
		require.Equal(t, contract.ClassCreated, out.Class)
		require.Equal(t, id, out.Receipt.ResourceID)
	}
	recs, err := sb.Records("helpdesk")
	require.NoError(t, err)
	require.Len(t, recs, 1)
}

func TestBodyLimit(t *testing.T) {
	huge := strings.Repeat(" ", 2*maxBody) // valid JSON padding, far over the limit
	var served atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(map[string]int{"/ok": 201, "/err": 400}[r.URL.Path])
		n, _ := io.WriteString(w, `{"id":"ticket-1",`+huge+`"status":"created"}`)
		served.Add(int64(n))
	}))
	defer hs.Close()

	out := newAdapter(t, httpDestination(hs.URL+"/ok")).Deliver(context.Background(), request("k"))
	require.Equal(t, contract.ClassCreated, out.Class, "the status alone says the effect exists")
	require.Empty(t, out.Receipt.ResourceID, "an oversized body is not parsed")
	require.Nil(t, out.Receipt.Body)
	require.Contains(t, out.Error, "over 1048576 bytes")

	out = newAdapter(t, httpDestination(hs.URL+"/err")).Deliver(context.Background(), request("k"))
	require.Equal(t, contract.ClassRejected, out.Class)
	require.Equal(t, "HTTP 400", out.Error, "an oversized error body is not quoted")

	long := strings.Repeat("é", 1000)
	hs2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		io.WriteString(w, long)
	}))
	defer hs2.Close()
	out = newAdapter(t, httpDestination(hs2.URL)).Deliver(context.Background(), request("k"))
	require.LessOrEqual(t, len(out.Error), len("HTTP 400: ")+maxErrorBody+len("..."))
	require.True(t, strings.HasSuffix(out.Error, "..."))
}

// breakingServer answers the first POST and hangs up on every later one
// after reading it, counting what arrives.
func breakingServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var posts atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if posts.Add(1) == 1 {
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id":"ticket-1"}`)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		conn.Close()
	}))
	t.Cleanup(hs.Close)
	return hs, &posts
}

// Go's transport resends a POST carrying Idempotency-Key when a reused
// connection breaks. The control shows this test setup provokes that resend;
// the adapter must not let it happen.
func TestBrokenConnectionIsSentOnce(t *testing.T) {
	post := func(c *http.Client, url string) error {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(payload))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "same-operation")
		resp, err := c.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return err
	}
	t.Run("control: stock client resends", func(t *testing.T) {
		hs, posts := breakingServer(t)
		c := &http.Client{Transport: &http.Transport{}}
		require.NoError(t, post(c, hs.URL)) // leaves a keep-alive connection
		require.Error(t, post(c, hs.URL))
		require.EqualValues(t, 3, posts.Load(), "the stock transport sent the broken POST twice")
	})
	t.Run("adapter", func(t *testing.T) {
		hs, posts := breakingServer(t)
		a := newAdapter(t, httpDestination(hs.URL))
		require.Equal(t, contract.ClassCreated, a.Deliver(context.Background(), request("same-operation")).Class)
		out := a.Deliver(context.Background(), request("same-operation"))
		require.Equal(t, contract.ClassUnknown, out.Class, out.Error)
		require.EqualValues(t, 2, posts.Load(), "each attempt reached the server exactly once")
	})
	t.Run("adapter with keep-alive", func(t *testing.T) {
		// Each defence holds on its own: with connection reuse back on,
		// the missing GetBody still stops the transport's resend.
		hs, posts := breakingServer(t)
		a := newAdapter(t, httpDestination(hs.URL))
		a.client.Transport.(*http.Transport).DisableKeepAlives = false
		require.Equal(t, contract.ClassCreated, a.Deliver(context.Background(), request("same-operation")).Class)
		out := a.Deliver(context.Background(), request("same-operation"))
		require.Equal(t, contract.ClassUnknown, out.Class, out.Error)
		require.EqualValues(t, 2, posts.Load(), "each attempt reached the server exactly once")
	})
}

func TestHeadersAndAuth(t *testing.T) {
	var got http.Header
	var body []byte
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	defer hs.Close()

	const secret = "s3cret-token"
	t.Setenv("COURIER_TEST_TOKEN", secret)
	d := httpDestination(hs.URL)
	d.Auth = &destinations.Auth{Header: "Authorization", Scheme: "Bearer", SecretEnv: "COURIER_TEST_TOKEN"}
	a := newAdapter(t, d)
	out := a.Deliver(context.Background(), request("the-key"))
	require.Equal(t, contract.ClassCreated, out.Class)
	require.Equal(t, "the-key", got.Get("Idempotency-Key"))
	require.Equal(t, "application/json", got.Get("Content-Type"))
	require.Equal(t, "Bearer "+secret, got.Get("Authorization"))
	require.JSONEq(t, payload, string(body))

	// The secret appears nowhere but the request header.
	outJSON, err := json.Marshal(out)
	require.NoError(t, err)
	require.NotContains(t, string(outJSON), secret)
	require.NotContains(t, a.String(), secret)
	require.NotContains(t, fmt.Sprintf("%v %+v", a, a), secret)

	// No key header configured: none is sent.
	d.Contract.KeyHeader = ""
	newAdapter(t, d).Deliver(context.Background(), request("the-key"))
	require.Empty(t, got.Get("Idempotency-Key"))

	d.Auth.SecretEnv = "COURIER_TEST_TOKEN_UNSET"
	_, err = New("helpdesk", d, nil)
	require.ErrorContains(t, err, "COURIER_TEST_TOKEN_UNSET")
}

func TestNewRejectsUnusableDestinations(t *testing.T) {
	for name, d := range map[string]destinations.Destination{
		"no url":       httpDestination(""),
		"relative url": httpDestination("/helpdesk/tickets"),
		"other scheme": httpDestination("ftp://example.com/x"),
		"no timeout": func() destinations.Destination {
			d := httpDestination("http://127.0.0.1:1/x")
			d.Contract.Retry.AttemptTimeout = 0
			return d
		}(),
	} {
		_, err := New("x", d, nil)
		require.Error(t, err, name)
	}
}

func TestLookup(t *testing.T) {
	_, base := startSandbox(t)
	d := sandboxDest(base, "crm")
	d.Contract.Dedup = contract.DedupLookup
	d.LookupURL = base + "/crm/tickets?key={key}&business_id={business_id}"
	a := newAdapter(t, d)
	ctx := context.Background()

	key := "k&weird=1 ?#"
	f, err := a.Lookup(ctx, request(key))
	require.NoError(t, err)
	require.False(t, f.Found)

	require.Equal(t, contract.ClassCreated, a.Deliver(ctx, request(key)).Class)
	f, err = a.Lookup(ctx, request(key))
	require.NoError(t, err)
	require.True(t, f.Found)
	require.Equal(t, "ticket-1", f.Receipt.ResourceID)
	require.Equal(t, http.StatusOK, f.Receipt.StatusCode)

	f, err = a.Lookup(ctx, request("k"))
	require.NoError(t, err)
	require.False(t, f.Found, "the escaped key matched exactly")

	// A destination that cannot be searched is an error, never "not found".
	d.LookupURL = base + "/helpdesk/tickets?key={key}"
	_, err = newAdapter(t, d).Lookup(ctx, request(key))
	require.ErrorContains(t, err, "HTTP 405")

	d.LookupURL = ""
	_, err = newAdapter(t, d).Lookup(ctx, request(key))
	require.Error(t, err)
}

func TestLookupSubstitutesBusinessID(t *testing.T) {
	var gotQuery string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotQuery = r.URL.RawQuery
		w.Write([]byte(`{"ticket_id":"T-1"}`))
	}))
	defer hs.Close()
	d := httpDestination(hs.URL)
	d.LookupURL = hs.URL + "/search?ref={business_id}&k={key}"
	f, err := newAdapter(t, d).Lookup(context.Background(), request("a b"))
	require.NoError(t, err)
	require.Equal(t, "ref=example-001&k=a+b", gotQuery)
	require.Equal(t, "T-1", f.Receipt.ResourceID)
}

func BenchmarkDeliverSandbox(b *testing.B) {
	_, base := startSandbox(b)
	a, err := New("helpdesk", sandboxDest(base, "helpdesk"), nil)
	require.NoError(b, err)
	req := request("")
	i := 0
	for b.Loop() {
		i++
		req.Key = fmt.Sprintf("bench-%d", i)
		if out := a.Deliver(context.Background(), req); out.Class != contract.ClassCreated {
			b.Fatalf("%s: %s", out.Class, out.Error)
		}
	}
}
