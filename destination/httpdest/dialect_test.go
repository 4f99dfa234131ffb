package httpdest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab/testcert"
)

// seen is one request as a test server received it.
type seen struct {
	method, path, rawPath, rawQuery string
	header                          http.Header
	body                            []byte
}

// recorder serves answer and keeps every request it received.
func recorder(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, func() []seen) {
	t.Helper()
	var mu sync.Mutex
	var got []seen
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), b})
		mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs, func() []seen { mu.Lock(); defer mu.Unlock(); return append([]seen(nil), got...) }
}

func TestDialectRequest(t *testing.T) {
	hs, got := recorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.EscapedPath())
		w.WriteHeader(http.StatusCreated)
	})
	d := httpDestination(hs.URL + "/{tenant}/things/{business_id}?op={operation}")
	d.Method = http.MethodPut
	d.Headers = map[string]string{"Api-Version": "7"}
	d.Body = &destinations.Body{Under: "/data"}
	d.Receipt = &destinations.ReceiptSpec{IDFromLocation: true}
	d.Contract.KeyHeader = "X-Request-Key"
	d.Contract.KeyField = "/meta/idempotency_key"
	req := request("k-1")
	req.Tenant, req.BusinessID = "acme", "order 7:b"

	out := newAdapter(t, d).Deliver(context.Background(), req)
	require.Equal(t, contract.ClassCreated, out.Class, out.Error)
	require.Equal(t, "order 7:b", out.Receipt.ResourceID, "the Location's last segment, unescaped")
	r := got()[0]
	require.Equal(t, http.MethodPut, r.method)
	require.Equal(t, "/acme/things/order%207:b", r.rawPath, "each value path-escaped into one segment")
	require.Equal(t, "7", r.header.Get("Api-Version"))
	require.Equal(t, "k-1", r.header.Get("X-Request-Key"))
	require.Empty(t, r.header.Get("Idempotency-Key"))
	require.JSONEq(t, `{"data":`+payload+`,"meta":{"idempotency_key":"k-1"}}`, string(r.body))
}

func TestPayloadSentAsIsByDefault(t *testing.T) {
	hs, got := recorder(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) })
	raw := `{ "subject" : "spaces and order kept", "a": 1.50 }`
	req := request("k")
	req.Payload = json.RawMessage(raw)
	newAdapter(t, httpDestination(hs.URL)).Deliver(context.Background(), req)
	r := got()[0]
	require.Equal(t, raw, string(r.body))
	require.Equal(t, http.MethodPost, r.method)
	require.Equal(t, "k", r.header.Get("Idempotency-Key"))
}

func TestKeyInBodyKeepsNumbers(t *testing.T) {
	hs, got := recorder(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) })
	d := httpDestination(hs.URL)
	d.Contract.KeyHeader, d.Contract.KeyField = "", "/idempotency_key"
	req := request("k")
	req.Payload = json.RawMessage(`{"subject":"s","amount":12345678901234567890}`)
	newAdapter(t, d).Deliver(context.Background(), req)
	require.JSONEq(t, `{"subject":"s","amount":12345678901234567890,"idempotency_key":"k"}`, string(got()[0].body))
	require.Contains(t, string(got()[0].body), "12345678901234567890", "numbers as written")
}

// TestNotSentWhenTheDeliveryDoesNotFit: a delivery the template cannot
// take is refused before anything is sent, and not retried.
func TestNotSentWhenTheDeliveryDoesNotFit(t *testing.T) {
	hs, got := recorder(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) })
	d := httpDestination(hs.URL + "/{tenant}/things")
	out := newAdapter(t, d).Deliver(context.Background(), request("k"))
	require.Equal(t, contract.ClassRejected, out.Class)
	require.Contains(t, out.Error, "not sent: url: placeholder {tenant}: the delivery has no tenant")

	d = httpDestination(hs.URL)
	d.Contract.KeyField = "/subject/key"
	out = newAdapter(t, d).Deliver(context.Background(), request("k"))
	require.Equal(t, contract.ClassRejected, out.Class)
	require.Contains(t, out.Error, `contract.key_field: /subject/key: "/subject" is not a JSON object`)

	// A business id of .. in the path would reach /things/.. resolved: another resource.
	dots := request("k")
	dots.BusinessID = ".."
	out = newAdapter(t, httpDestination(hs.URL+"/things/{business_id}")).Deliver(context.Background(), dots)
	require.Equal(t, contract.ClassRejected, out.Class)
	require.Equal(t, `not sent: url: placeholder {business_id}: "..": a path segment of . or .. names another resource; `+
		`use another value, or put the placeholder in the query`, out.Error)

	// Nor is a delivery sent that its lookup could not find after a lost answer.
	d = httpDestination(hs.URL + "/things")
	d.Contract.Dedup, d.LookupURL = contract.DedupLookup, hs.URL+"/things/{business_id}"
	out = newAdapter(t, d).Deliver(context.Background(), dots)
	require.Equal(t, contract.ClassRejected, out.Class)
	require.Contains(t, out.Error, `not sent: lookup_url: placeholder {business_id}: "..": a path segment of . or .. names another resource`)
	_, err := newAdapter(t, d).Lookup(context.Background(), dots)
	require.ErrorContains(t, err, `lookup_url: placeholder {business_id}: "..": a path segment of . or .. names another resource`)
	require.Empty(t, got(), "nothing reached the destination")

	// In the query, .. is a value like any other.
	d = httpDestination(hs.URL + "/things?ref={business_id}")
	require.Equal(t, contract.ClassCreated, newAdapter(t, d).Deliver(context.Background(), dots).Class)
	require.Equal(t, "ref=..", got()[0].rawQuery)
}

func TestReceiptByPointer(t *testing.T) {
	hs, _ := recorder(t, func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"payment":{"id":"pay-9","status":"COMPLETED"},"id":"not-this"}`)
	})
	d := httpDestination(hs.URL)
	d.Receipt = &destinations.ReceiptSpec{ID: destinations.Pointers{"/payment/id"}, Status: "/payment/status"}
	out := newAdapter(t, d).Deliver(context.Background(), request("k"))
	require.Equal(t, "pay-9", out.Receipt.ResourceID)
	require.Equal(t, "COMPLETED", out.Receipt.Status)
}

func TestRulesClassify(t *testing.T) {
	hs, _ := recorder(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if h := q.Get("h"); h != "" {
			w.Header().Set("Should-Retry", h)
		}
		w.WriteHeader(atoi(q.Get("status")))
		io.WriteString(w, q.Get("body"))
	})
	rules := []destinations.Rule{
		{Status: destinations.StatusRange{Lo: 400, Hi: 400}, Body: &destinations.Match{Pointer: "/error/type", Value: "idempotency_error"}, Class: contract.ClassConflict},
		{Status: destinations.StatusRange{Lo: 200, Hi: 200}, Body: &destinations.Match{Pointer: "/status", Values: []string{"duplicate", "seen"}}, Class: contract.ClassReplayed},
		{Status: destinations.StatusRange{Lo: 500, Hi: 599}, Header: &destinations.Match{Name: "Should-Retry", Value: "false"}, Class: contract.ClassUnknown},
		{Status: destinations.StatusRange{Lo: 409, Hi: 409}, Body: &destinations.Match{Pointer: "/errors/0/code"}, Class: contract.ClassConflict},
	}
	for _, tc := range []struct {
		status       int
		header, body string
		class        contract.Class
	}{
		{400, "", `{"error":{"type":"idempotency_error"}}`, contract.ClassConflict},
		{400, "", `{"error":{"type":"invalid_request_error"}}`, contract.ClassRejected},
		{400, "", `not json`, contract.ClassRejected},
		{200, "", `{"id":"x","status":"seen"}`, contract.ClassReplayed},
		{200, "", `{"id":"x","status":"received"}`, contract.ClassCreated},
		{502, "FALSE", ``, contract.ClassUnknown},
		{502, "true", ``, contract.ClassServerError},
		{409, "", `{"errors":[{"code":"anything"}]}`, contract.ClassConflict},
		{409, "", `{"errors":[]}`, contract.ClassInFlight},
	} {
		d := httpDestination(hs.URL + "?status=" + strconv.Itoa(tc.status) + "&h=" + tc.header + "&body=" + url.QueryEscape(tc.body))
		d.Rules = rules
		out := newAdapter(t, d).Deliver(context.Background(), request("k"))
		require.Equal(t, tc.class, out.Class, "%d %s %s: %s", tc.status, tc.header, tc.body, out.Error)
		if tc.class == contract.ClassConflict {
			require.Contains(t, out.Error, "read as conflict by rules[")
		}
	}
}

// TestDefaultReadingIsMayHaveApplied holds the adapter's default reading
// and the config loader's safety check to one meaning of each status.
func TestDefaultReadingIsMayHaveApplied(t *testing.T) {
	for st := 100; st <= 599; st++ {
		cl := classifyDefault(st, http.Header{}, nil, nil)
		require.Equal(t, !destinations.MayHaveApplied(st), cl.NothingApplied(), "status %d reads as %s", st, cl)
	}
}

// verifyStandardWebhook is the receiver's side of the Standard Webhooks
// signature, written from the specification and not from the signer:
// the secret's key is the base64 after "whsec_"; the signed content is
// "{webhook-id}.{webhook-timestamp}.{body}"; webhook-signature holds
// space-separated "v1,<base64 HMAC-SHA256>" entries.
func verifyStandardWebhook(secret string, h http.Header, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	signed := h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "." + string(body)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signed))
	expected := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Split(h.Get("webhook-signature"), " ") {
		if hmac.Equal([]byte(sig), []byte(expected)) {
			return true
		}
	}
	return false
}

func TestStandardWebhooksSignature(t *testing.T) {
	// The specification's own example, first for the verifier itself.
	spec := http.Header{}
	spec.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	spec.Set("webhook-timestamp", "1614265330")
	spec.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	require.True(t, verifyStandardWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", spec, []byte(`{"test": 2432232314}`)))

	const secret = "whsec_" + "dGVzdC1zZWNyZXQtZm9yLWNvdXJpZXItd2ViaG9va3M="
	t.Setenv("COURIER_TEST_WEBHOOK_SECRET", secret)
	hs, got := recorder(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
	d := httpDestination(hs.URL)
	d.Auth = &destinations.Auth{Kind: destinations.AuthStandardWebhooks, SecretEnv: "COURIER_TEST_WEBHOOK_SECRET"}
	d.Body = &destinations.Body{Under: "/data"}
	d.Contract.KeyHeader = "webhook-id"
	a := newAdapter(t, d)

	require.Equal(t, contract.ClassCreated, a.Deliver(context.Background(), request("key-1")).Class)
	time.Sleep(1100 * time.Millisecond) // the next attempt's timestamp is a second later
	require.Equal(t, contract.ClassCreated, a.Deliver(context.Background(), request("key-1")).Class)
	reqs := got()
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		require.True(t, verifyStandardWebhook(secret, r.header, r.body), "the signature verifies")
		require.Equal(t, "key-1", r.header.Get("webhook-id"))
		ts, err := strconv.ParseInt(r.header.Get("webhook-timestamp"), 10, 64)
		require.NoError(t, err)
		require.InDelta(t, time.Now().Unix(), ts, 5)

		require.False(t, verifyStandardWebhook("whsec_"+base64.StdEncoding.EncodeToString([]byte("another secret")), r.header, r.body),
			"another secret does not verify")
		changed := strings.Replace(string(r.body), "workshop", "Workshop", 1)
		require.NotEqual(t, string(r.body), changed)
		require.False(t, verifyStandardWebhook(secret, r.header, []byte(changed)), "a changed body does not verify")
	}
	require.Equal(t, reqs[0].header.Get("webhook-id"), reqs[1].header.Get("webhook-id"), "the id never changes")
	require.NotEqual(t, reqs[0].header.Get("webhook-timestamp"), reqs[1].header.Get("webhook-timestamp"), "a fresh timestamp per attempt")
	require.NotEqual(t, reqs[0].header.Get("webhook-signature"), reqs[1].header.Get("webhook-signature"), "a fresh signature per attempt")

	t.Setenv("COURIER_TEST_WEBHOOK_SECRET", "not-a-whsec-secret")
	_, err := New("hooks", d, nil)
	require.ErrorContains(t, err, "auth: a Standard Webhooks secret starts with whsec_")
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := testcert.New(t, nil, nil, "courier test CA", nil)
	srvCert, srvKey := testcert.New(t, ca, caKey, "partner.test", []string{"partner.test"})
	cliCert, cliKey := testcert.New(t, ca, caKey, "courier worker", nil)
	caFile := testcert.WritePEM(t, dir, "ca.pem", "CERTIFICATE", ca.Raw)
	certFile := testcert.WritePEM(t, dir, "client.pem", "CERTIFICATE", cliCert.Raw)
	keyFile := testcert.WritePEM(t, dir, "client-key.pem", "PRIVATE KEY", cliKey)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	var handled atomic.Int32
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		w.WriteHeader(201)
		io.WriteString(w, `{"id":"by-`+r.TLS.PeerCertificates[0].Subject.CommonName+`"}`)
	}))
	hs.TLS = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}},
		ClientCAs:    pool, ClientAuth: tls.RequireAndVerifyClientCert,
	}
	hs.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	hs.StartTLS()
	defer hs.Close()

	d := httpDestination(hs.URL)
	d.TLS = &destinations.TLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile, ServerName: "partner.test"}
	out := newAdapter(t, d).Deliver(context.Background(), request("k"))
	require.Equal(t, contract.ClassCreated, out.Class, out.Error)
	require.Equal(t, "by-courier worker", out.Receipt.ResourceID)

	// Without the client certificate the server refuses the handshake and
	// never sees the request. Under TLS 1.3 the client has written it by
	// then (the server checks the certificate after the client's
	// Finished), so the adapter cannot tell it was not read: an unknown
	// outcome, never a receipt and never a silent resend.
	d.TLS = &destinations.TLS{CAFile: caFile, ServerName: "partner.test"}
	out = newAdapter(t, d).Deliver(context.Background(), request("k"))
	require.Contains(t, []contract.Class{contract.ClassNotSent, contract.ClassUnknown}, out.Class, out.Error)
	require.Contains(t, out.Error, "certificate required")
	require.Equal(t, int32(1), handled.Load(), "the server's handler ran only for the first request")

	for field, tlsOpts := range map[string]*destinations.TLS{
		"tls.ca_file":                 {CAFile: filepath.Join(dir, "missing.pem")},
		"tls.cert_file, tls.key_file": {CertFile: filepath.Join(dir, "missing.pem"), KeyFile: keyFile},
	} {
		d.TLS = tlsOpts
		_, err := New("partner", d, nil)
		require.ErrorContains(t, err, field+": ")
	}
	d.TLS = &destinations.TLS{CAFile: keyFile}
	_, err := New("partner", d, nil)
	require.ErrorContains(t, err, "holds no PEM certificate")
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }
