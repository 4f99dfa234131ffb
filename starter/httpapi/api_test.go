package httpapi

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/abde64c9/courier/lab/testcert"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

const (
	acmeToken   = "acme-secret-token"
	globexToken = "globex-secret-token"
)

// apiLab is a lab stack (dev server, sandbox, one courier worker) with an
// API server of its own on loopback.
type apiLab struct {
	t     *testing.T
	ctx   context.Context
	stack *lab.Stack
	url   string
	http  *http.Client
}

func testConfig(rl RateLimit) Config {
	return Config{Callers: []Caller{
		{Tenant: "acme", TokenSHA256: HashToken(acmeToken)},
		{Tenant: "globex", TokenSHA256: HashToken(globexToken)},
	}, RateLimit: rl}
}

// serve runs an API server over the stack's client (or tc) on a loopback
// port until the test ends or stop is called; done yields Serve's error.
func (l *apiLab) serve(o Options, tlsConfig ...*tls.Config) (url string, stop func(), done <-chan error) {
	l.t.Helper()
	if o.Temporal == nil {
		o.Temporal = l.stack.Temporal.Client()
		o.Starter = l.stack.Starter
	}
	if o.Config.Callers == nil {
		o.Config = testConfig(RateLimit{})
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := New(o)
	require.NoError(l.t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(l.t, err)
	scheme := "http://"
	if len(tlsConfig) > 0 {
		ln, scheme = tls.NewListener(ln, tlsConfig[0]), "https://"
	}
	ctx, cancel := context.WithCancel(l.ctx)
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	l.t.Cleanup(cancel)
	return scheme + ln.Addr().String(), cancel, errc
}

// answer is one HTTP answer.
type answer struct {
	code   int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(a.body, &m), "%d %s", a.code, a.body)
	return m
}

// problem checks a is an RFC 9457 problem of this status and returns it.
func (a answer) problem(t *testing.T, code int) map[string]any {
	t.Helper()
	require.Equal(t, code, a.code, "%s", a.body)
	require.Equal(t, "application/problem+json", a.header.Get("Content-Type"))
	p := a.json(t)
	require.Equal(t, float64(code), p["status"])
	require.NotEmpty(t, p["title"])
	require.Contains(t, p["type"], typeBase)
	return p
}

// do sends one request to base (l.url when empty).
func (l *apiLab) do(base, method, path, token string, header map[string]string, body []byte) answer {
	l.t.Helper()
	a, err := l.try(base, method, path, token, header, body)
	require.NoError(l.t, err)
	return a
}

// try is do, returning the error: for a request made off the test's goroutine.
func (l *apiLab) try(base, method, path, token string, header map[string]string, body []byte) (answer, error) {
	if base == "" {
		base = l.url
	}
	req, err := http.NewRequestWithContext(l.ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := l.http.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, header: resp.Header, body: b}, err
}

func (l *apiLab) post(dest, key string, body []byte, header map[string]string) answer {
	h := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	for k, v := range header {
		h[k] = v
	}
	return l.do("", http.MethodPost, "/v1/destinations/"+dest+"/operations/create-ticket", acmeToken, h, body)
}

// effects is how many effects dest's own store holds for a business id.
func (l *apiLab) effects(dest, id string) int {
	l.t.Helper()
	n, err := l.stack.Effects.Count(l.ctx, dest, id)
	require.NoError(l.t, err)
	return n
}

// started says whether Temporal holds a delivery with this key.
func (l *apiLab) started(key string) bool {
	l.t.Helper()
	_, err := l.stack.Temporal.Client().DescribeWorkflowExecution(l.ctx, workflows.WorkflowID(key), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false
	}
	require.NoError(l.t, err)
	return true
}

func acmeKey(dest, id string) string {
	return opkey.Key(opkey.Operation{Tenant: "acme", Destination: dest, Operation: "create-ticket", BusinessID: id})
}

// TestAPI: a real dev server, a real courier worker and the sandbox
// destinations, an API server on loopback and real HTTP clients; every
// answer is checked against what the destinations themselves stored.
func TestAPI(t *testing.T) {
	ctx, courier := lab.RealTest(t, 6*time.Minute)
	stack, err := lab.Start(ctx, lab.Options{Courier: courier, Workers: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = stack.Close() })
	l := &apiLab{t: t, ctx: ctx, stack: stack, http: &http.Client{Timeout: time.Minute}}
	l.url, _, _ = l.serve(Options{Destinations: &stack.Config, Wait: 20 * time.Second})

	t.Run("created, then replayed", func(t *testing.T) {
		l.t = t
		first := l.post(lab.DestHelpdesk, `"order-1"`, lab.Ticket("order-1", "Call back"), nil)
		require.Equal(t, http.StatusCreated, first.code, "%s", first.body)
		res := first.json(t)
		require.Equal(t, "delivered", res["state"])
		require.Equal(t, acmeKey(lab.DestHelpdesk, "order-1"), res["key"])
		require.NotEmpty(t, res["receipt"].(map[string]any)["resource_id"])
		require.Empty(t, first.header.Get("Idempotent-Replayed"))

		again := l.post(lab.DestHelpdesk, `"order-1"`, lab.Ticket("order-1", "Call back"), nil)
		require.Equal(t, http.StatusOK, again.code, "%s", again.body)
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.Equal(t, string(first.body), string(again.body))

		// The same payload as another client encodes it (member order,
		// spacing, a bare token for the key) is the same delivery.
		reencoded := []byte(`{ "subject" : "Call b\u0061ck", "request_id" : "order-1" }`)
		bare := l.post(lab.DestHelpdesk, `order-1`, reencoded, nil)
		require.Equal(t, http.StatusOK, bare.code, "%s", bare.body)
		require.Equal(t, string(first.body), string(bare.body))
		require.Equal(t, 1, l.effects(lab.DestHelpdesk, "order-1"), "one effect at the partner")

		t.Run("another payload is a conflict", func(t *testing.T) {
			other := lab.Ticket("order-1", "Something else")
			p := l.post(lab.DestHelpdesk, `"order-1"`, other, nil).problem(t, http.StatusUnprocessableEntity)
			fp, err := opkey.Fingerprint(other)
			require.NoError(t, err)
			require.Equal(t, res["fingerprint"], p["existing_fingerprint"])
			require.Equal(t, fp, p["request_fingerprint"])
			require.Equal(t, 1, l.effects(lab.DestHelpdesk, "order-1"))
		})

		t.Run("its status, to its own tenant only", func(t *testing.T) {
			loc := "/v1/deliveries/" + res["key"].(string)
			mine := l.do("", http.MethodGet, loc, acmeToken, nil, nil)
			require.Equal(t, http.StatusOK, mine.code, "%s", mine.body)
			st := mine.json(t)
			require.Equal(t, "delivered", st["state"])
			require.Equal(t, "created", st["status"])
			require.Len(t, st["attempts"], 1)
			require.Equal(t, res["receipt"], st["receipt"])
			theirs := l.do("", http.MethodGet, loc, globexToken, nil, nil).problem(t, http.StatusNotFound)
			unknown := l.do("", http.MethodGet, "/v1/deliveries/"+acmeKey(lab.DestHelpdesk, "never"), globexToken, nil, nil).problem(t, http.StatusNotFound)
			require.Equal(t, strings.Replace(theirs["detail"].(string), res["key"].(string), "K", 1),
				strings.Replace(unknown["detail"].(string), acmeKey(lab.DestHelpdesk, "never"), "K", 1),
				"another tenant's key reads as an unknown one")
			l.do("", http.MethodGet, "/v1/deliveries/not-a-key", acmeToken, nil, nil).problem(t, http.StatusBadRequest)
		})
	})

	t.Run("bad keys send nothing", func(t *testing.T) {
		l.t = t
		long := strings.Repeat("k", MaxKeyBytes+1)
		for name, key := range map[string]string{"missing": "", "empty": `""`, "over-long": `"` + long + `"`,
			"unclosed": `"order-2`, "bare digits": "1042", "not ASCII": "\"orde\u00e9r-2\""} {
			p := l.post(lab.DestHelpdesk, key, lab.Ticket("order-2", "x"), nil).problem(t, http.StatusBadRequest)
			require.Contains(t, p["detail"], "Idempotency-Key", name)
		}
		require.False(t, l.started(acmeKey(lab.DestHelpdesk, long)))
		require.Equal(t, 0, l.effects(lab.DestHelpdesk, "order-2"))
		// A good key with a bad payload or operation: nothing started either.
		l.post(lab.DestHelpdesk, `"order-2"`, []byte(`["not an object"]`), nil).problem(t, http.StatusBadRequest)
		l.post(lab.DestHelpdesk, `"order-2"`, []byte(`{"a": 1, "a": 2}`), nil).problem(t, http.StatusBadRequest)
		l.post("nowhere", `"order-2"`, lab.Ticket("order-2", "x"), nil).problem(t, http.StatusNotFound)
		require.False(t, l.started(acmeKey(lab.DestHelpdesk, "order-2")))
		require.Equal(t, 0, l.effects(lab.DestHelpdesk, "order-2"))
		big := append([]byte(`{"pad": "`), bytes.Repeat([]byte("x"), opkey.MaxPayloadBytes)...)
		l.post(lab.DestHelpdesk, `"order-2"`, append(big, `"}`...), nil).problem(t, http.StatusRequestEntityTooLarge)
	})

	t.Run("the tenant is the token's", func(t *testing.T) {
		l.t = t
		for _, tok := range []string{"", "not-a-token", acmeToken + "x", HashToken(acmeToken), " "} {
			a := l.do("", http.MethodPost, "/v1/destinations/helpdesk/operations/create-ticket", tok,
				map[string]string{"Idempotency-Key": `"order-3"`}, lab.Ticket("order-3", "x"))
			a.problem(t, http.StatusUnauthorized)
			require.Contains(t, a.header.Get("WWW-Authenticate"), "Bearer")
		}
		l.do("", http.MethodGet, "/v1/destinations", "", nil, nil).problem(t, http.StatusUnauthorized)
		l.do("", http.MethodGet, "/v1/destinations", "", map[string]string{"Authorization": "Basic " + acmeToken}, nil).problem(t, http.StatusUnauthorized)
		require.Equal(t, http.StatusOK, l.do("", http.MethodGet, "/v1/destinations", "",
			map[string]string{"Authorization": "bearer " + acmeToken}, nil).code, "the scheme's name is case-insensitive")
		body := []byte(`{"tenant": "globex", "request_id": "order-3", "subject": "x"}`)
		require.Contains(t, l.post(lab.DestHelpdesk, `"order-3"`, body, nil).problem(t, http.StatusBadRequest)["detail"], `"tenant"`)
		l.post(lab.DestHelpdesk, `"order-3"`, lab.Ticket("order-3", "x"), map[string]string{"X-Tenant": "globex"}).problem(t, http.StatusBadRequest)
		for _, tenant := range []string{"acme", "globex"} {
			require.False(t, l.started(opkey.Key(opkey.Operation{Tenant: tenant, Destination: lab.DestHelpdesk, Operation: "create-ticket", BusinessID: "order-3"})))
		}
		require.Equal(t, 0, l.effects(lab.DestHelpdesk, "order-3"))
	})

	t.Run("parked for review", func(t *testing.T) {
		l.t = t
		require.NoError(t, stack.Sandbox.Inject(lab.DestLegacy, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
		a := l.post(lab.DestLegacy, `"order-4"`, lab.Ticket("order-4", "x"), nil)
		require.Equal(t, http.StatusAccepted, a.code, "%s", a.body)
		key := acmeKey(lab.DestLegacy, "order-4")
		require.Equal(t, "/v1/deliveries/"+key, a.header.Get("Location"))
		require.Equal(t, "awaiting_review", a.json(t)["state"])
		require.NotEmpty(t, a.json(t)["evidence"])
		again := l.post(lab.DestLegacy, `"order-4"`, lab.Ticket("order-4", "x"), nil)
		require.Equal(t, http.StatusAccepted, again.code)
		require.Equal(t, string(a.body), string(again.body))
		st := l.do("", http.MethodGet, a.header.Get("Location"), acmeToken, nil, nil)
		require.Equal(t, http.StatusOK, st.code, "%s", st.body)
		require.Equal(t, "awaiting_review", st.json(t)["state"])
		require.NotEmpty(t, st.json(t)["evidence"])
	})

	t.Run("not settled within the wait, then replayed", func(t *testing.T) {
		l.t = t
		require.NoError(t, stack.Sandbox.Inject(lab.DestHelpdesk, sandbox.Fault{Kind: sandbox.FaultDelayAfterCommit, Delay: 3 * time.Second}))
		a := l.post(lab.DestHelpdesk, `"order-5"`, lab.Ticket("order-5", "x"), map[string]string{"Prefer": "wait=1"})
		require.Equal(t, http.StatusAccepted, a.code, "%s", a.body)
		require.Equal(t, "wait=1", a.header.Get("Preference-Applied"))
		require.Equal(t, "pending", a.json(t)["state"])
		require.Equal(t, "/v1/deliveries/"+acmeKey(lab.DestHelpdesk, "order-5"), a.header.Get("Location"))
		again := l.post(lab.DestHelpdesk, `"order-5"`, lab.Ticket("order-5", "x"), nil)
		require.Equal(t, http.StatusOK, again.code, "%s", again.body)
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.Equal(t, 1, l.effects(lab.DestHelpdesk, "order-5"))
	})

	t.Run("rejected by the destination", func(t *testing.T) {
		l.t = t
		require.NoError(t, stack.Sandbox.Inject(lab.DestHelpdesk, sandbox.Fault{Kind: sandbox.FaultEcho400}))
		p := l.post(lab.DestHelpdesk, `"order-6"`, lab.Ticket("order-6", "x"), nil).problem(t, http.StatusBadGateway)
		require.Equal(t, "rejected", p["state"])
	})

	t.Run("50 at once with one key", func(t *testing.T) {
		l.t = t
		const n = 50
		answers := make([]answer, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { answers[i] = l.post(lab.DestHelpdesk, `"order-7"`, lab.Ticket("order-7", "x"), nil) })
		}
		wg.Wait()
		codes := map[int]int{}
		for _, a := range answers {
			codes[a.code]++
			require.Equal(t, string(answers[0].body), string(a.body), "every caller gets the same body")
		}
		require.Equal(t, map[int]int{http.StatusCreated: 1, http.StatusOK: n - 1}, codes)
		require.Equal(t, 1, l.effects(lab.DestHelpdesk, "order-7"), "one effect at the partner")
	})

	t.Run("the answer lost on the way, then asked again", func(t *testing.T) {
		l.t = t
		require.NoError(t, stack.Sandbox.Inject(lab.DestHelpdesk, sandbox.Fault{Kind: sandbox.FaultDelayAfterCommit, Delay: 2 * time.Second}))
		impatient := &apiLab{t: t, ctx: ctx, stack: stack, url: l.url, http: &http.Client{Timeout: 300 * time.Millisecond}}
		_, err := impatient.try("", http.MethodPost, "/v1/destinations/helpdesk/operations/create-ticket", acmeToken,
			map[string]string{"Idempotency-Key": `"order-10"`}, lab.Ticket("order-10", "x"))
		require.Error(t, err, "the caller gave up before the answer")
		again := l.post(lab.DestHelpdesk, `"order-10"`, lab.Ticket("order-10", "x"), nil)
		require.Equal(t, http.StatusOK, again.code, "%s", again.body)
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.Equal(t, "delivered", again.json(t)["state"])
		require.Equal(t, 1, l.effects(lab.DestHelpdesk, "order-10"))
	})

	t.Run("a worker lost during the request", func(t *testing.T) {
		l.t = t
		require.NoError(t, stack.Sandbox.Inject(lab.DestHelpdesk, sandbox.Fault{Kind: sandbox.FaultDelayAfterCommit, Delay: 2 * time.Second}))
		got := make(chan answer, 1)
		go func() {
			a, _ := l.try("", http.MethodPost, "/v1/destinations/helpdesk/operations/create-ticket", acmeToken,
				map[string]string{"Idempotency-Key": `"order-11"`}, lab.Ticket("order-11", "x"))
			got <- a
		}()
		for !l.started(acmeKey(lab.DestHelpdesk, "order-11")) {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // the attempt is at the partner
		old := stack.Workers[len(stack.Workers)-1]
		old.Kill()
		<-old.Done()
		_, err := stack.StartWorker(ctx)
		require.NoError(t, err)
		a := <-got
		// Answered: delivered (201, or 200 where the starter counts the
		// retried update as a join) or not settled within the wait (202).
		require.Contains(t, []int{http.StatusCreated, http.StatusOK, http.StatusAccepted}, a.code, "%s", a.body)
		again := l.post(lab.DestHelpdesk, `"order-11"`, lab.Ticket("order-11", "x"), nil)
		require.Equal(t, http.StatusOK, again.code, "%s", again.body)
		require.Equal(t, "delivered", again.json(t)["state"])
		require.Equal(t, 1, l.effects(lab.DestHelpdesk, "order-11"))
	})

	t.Run("a client certificate binds its tenant", func(t *testing.T) {
		l.t = t
		ca := newTestCA(t)
		acmeCert, strangerCert := ca.issue(t, "acme-client", false), ca.issue(t, "stranger", false)
		cfg := testConfig(RateLimit{})
		cfg.Callers = append(cfg.Callers, Caller{Tenant: "acme", CertSHA256: HashCert(acmeCert.Certificate[0])})
		url, _, _ := l.serve(Options{Config: cfg}, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "127.0.0.1", true)},
			ClientCAs: ca.pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12})
		as := func(cert *tls.Certificate) *apiLab {
			c := &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
			if cert != nil {
				c.Certificates = []tls.Certificate{*cert}
			}
			return &apiLab{t: t, ctx: ctx, stack: stack, url: url, http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: c}}}
		}
		loc := "/v1/deliveries/" + acmeKey(lab.DestHelpdesk, "order-1")
		mine := as(&acmeCert).do("", http.MethodGet, loc, "", nil, nil)
		require.Equal(t, http.StatusOK, mine.code, "%s", mine.body)
		require.Equal(t, "delivered", mine.json(t)["state"])
		require.Equal(t, http.StatusOK, as(&acmeCert).do("", http.MethodGet, loc, acmeToken, nil, nil).code)
		as(&acmeCert).do("", http.MethodGet, loc, globexToken, nil, nil).problem(t, http.StatusUnauthorized)
		as(&strangerCert).do("", http.MethodGet, loc, "", nil, nil).problem(t, http.StatusUnauthorized)
		as(nil).do("", http.MethodGet, loc, "", nil, nil).problem(t, http.StatusUnauthorized)
		as(nil).do("", http.MethodGet, loc, globexToken, nil, nil).problem(t, http.StatusNotFound)
	})

	t.Run("destinations", func(t *testing.T) {
		l.t = t
		a := l.do("", http.MethodGet, "/v1/destinations", acmeToken, nil, nil)
		require.Equal(t, http.StatusOK, a.code, "%s", a.body)
		var desk []map[string]any
		require.NoError(t, json.Unmarshal(a.body, &desk))
		var names []string
		for _, d := range desk {
			names = append(names, d["name"].(string))
		}
		require.Equal(t, stack.Config.Names(), names)
	})

	t.Run("rate limited per tenant", func(t *testing.T) {
		l.t = t
		url, _, _ := l.serve(Options{Config: testConfig(RateLimit{PerSecond: 0.1, Burst: 2})})
		get := func(token string) answer {
			return l.do(url, http.MethodGet, "/v1/deliveries/"+acmeKey(lab.DestHelpdesk, "none"), token, nil, nil)
		}
		get(acmeToken).problem(t, http.StatusNotFound)
		get(acmeToken).problem(t, http.StatusNotFound)
		limited := get(acmeToken)
		limited.problem(t, http.StatusTooManyRequests)
		after, err := strconv.Atoi(limited.header.Get("Retry-After"))
		require.NoError(t, err)
		require.Positive(t, after)
		get(globexToken).problem(t, http.StatusNotFound) // another tenant's bucket
	})

	t.Run("Temporal unreachable", func(t *testing.T) {
		l.t = t
		addr, err := lab.FreeAddr()
		require.NoError(t, err)
		tc, err := client.NewLazyClient(client.Options{HostPort: addr})
		require.NoError(t, err)
		t.Cleanup(tc.Close)
		url, _, _ := l.serve(Options{Temporal: tc, Starter: starter.New(tc)})
		a := l.do(url, http.MethodPost, "/v1/destinations/helpdesk/operations/create-ticket", acmeToken,
			map[string]string{"Idempotency-Key": `"order-8"`}, lab.Ticket("order-8", "x"))
		a.problem(t, http.StatusServiceUnavailable)
		require.NotEmpty(t, a.header.Get("Retry-After"))
		ready := l.do(url, http.MethodGet, "/readyz", "", nil, nil)
		ready.problem(t, http.StatusServiceUnavailable)
		require.Equal(t, http.StatusOK, l.do(url, http.MethodGet, "/healthz", "", nil, nil).code)
		require.Equal(t, http.StatusOK, l.do("", http.MethodGet, "/readyz", "", nil, nil).code)
		require.False(t, l.started(acmeKey(lab.DestHelpdesk, "order-8")))
	})

	t.Run("shutdown answers the request in flight", func(t *testing.T) {
		l.t = t
		url, stop, done := l.serve(Options{})
		require.NoError(t, stack.Sandbox.Inject(lab.DestHelpdesk, sandbox.Fault{Kind: sandbox.FaultDelayAfterCommit, Delay: 3 * time.Second}))
		type result struct {
			answer
			err error
		}
		got := make(chan result, 1)
		go func() {
			a, err := l.try(url, http.MethodPost, "/v1/destinations/helpdesk/operations/create-ticket", acmeToken,
				map[string]string{"Idempotency-Key": `"order-9"`}, lab.Ticket("order-9", "x"))
			got <- result{a, err}
		}()
		key := acmeKey(lab.DestHelpdesk, "order-9")
		for !l.started(key) {
			time.Sleep(50 * time.Millisecond)
		}
		stop()
		a := <-got
		require.NoError(t, a.err, "the request in flight is answered")
		require.Equal(t, http.StatusAccepted, a.code, "%s", a.body)
		require.Equal(t, "/v1/deliveries/"+key, a.header.Get("Location"))
		require.NoError(t, <-done)
		// The start made is not lost: the repeat joins it.
		again := l.post(lab.DestHelpdesk, `"order-9"`, lab.Ticket("order-9", "x"), nil)
		require.Equal(t, http.StatusOK, again.code, "%s", again.body)
		require.Equal(t, 1, l.effects(lab.DestHelpdesk, "order-9"))
	})

	t.Run("served as documented", func(t *testing.T) {
		l.t = t
		a := l.do("", http.MethodGet, PathOpenAPI, "", nil, nil)
		require.Equal(t, http.StatusOK, a.code)
		require.Equal(t, string(OpenAPI), string(a.body))
		l.do("", http.MethodGet, "/v1/nothing", "", nil, nil).problem(t, http.StatusNotFound)
		wrong := l.do("", http.MethodGet, "/v1/destinations/helpdesk/operations/create-ticket", acmeToken, nil, nil)
		wrong.problem(t, http.StatusMethodNotAllowed)
		require.Equal(t, http.MethodPost, wrong.header.Get("Allow"))
		// Every status the server answered above is documented for its route.
		doc := documented(t)
		metrics := l.do("", http.MethodGet, PathMetrics, "", nil, nil)
		require.Equal(t, http.StatusOK, metrics.code)
		line := regexp.MustCompile(`courier_api_requests_total\{code="(\d+)",route="([^"]+)"\}`)
		seen := 0
		for _, m := range line.FindAllStringSubmatch(string(metrics.body), -1) {
			code, _ := strconv.Atoi(m[1])
			if m[2] == "unmatched" || code == statusCallerGone {
				continue
			}
			seen++
			require.Contains(t, doc, m[2])
			require.True(t, slices.Contains(doc[m[2]], code), "%s answered %d, which its document does not list", m[2], code)
		}
		require.Greater(t, seen, 10, fmt.Sprintf("%s", metrics.body))
	})
}

// testCA is a certificate authority for a test's server and clients.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	cert, key := testcert.New(t, nil, nil, "test CA", nil)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return testCA{cert: cert, key: key, pool: pool}
}

// issue is a certificate for a server at 127.0.0.1 or a client named cn.
func (ca testCA) issue(t *testing.T, cn string, server bool) tls.Certificate {
	t.Helper()
	var names []string
	if server {
		names = []string{"127.0.0.1"}
	}
	cert, key := testcert.New(t, ca.cert, ca.key, cn, names)
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key}
}
