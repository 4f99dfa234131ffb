package sandbox

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPersonalities: each vendor personality places and limits its key,
// and answers a repeat, a reused key and a bad request in its own words.
func TestPersonalities(t *testing.T) {
	srv, err := Open(filepath.Join(t.TempDir(), "s.db"), DialectModes())
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); _ = srv.Close() })
	send := func(method, path string, header map[string]string, body string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	const ticket, other = `{"request_id":"r-1","subject":"s"}`, `{"request_id":"r-1","subject":"other"}`
	key := func(name string) map[string]string { return map[string]string{name: "k-1"} }

	// Stripe-like: 200 then a marked replay, a reused key is idempotency_error.
	st, _, body := send("POST", "/stripe/v1/tickets", key("Idempotency-Key"), ticket)
	require.Equal(t, 200, st)
	require.Contains(t, body, `"id":"ticket-1"`)
	st, h, _ := send("POST", "/stripe/v1/tickets", key("Idempotency-Key"), ticket)
	require.Equal(t, "true", h.Get(ReplayedHeader))
	st, h, body = send("POST", "/stripe/v1/tickets", key("Idempotency-Key"), other)
	require.Equal(t, 400, st)
	require.Contains(t, body, `"type":"idempotency_error"`)
	require.Equal(t, "false", h.Get("Stripe-Should-Retry"))
	st, _, _ = send("POST", "/stripe/v1/tickets", map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}, ticket)
	require.Equal(t, 400, st)

	// Adyen-like: the key echoed on a replay only; at most 64 characters.
	_, h, _ = send("POST", "/adyen/v71/payments", key("Idempotency-Key"), ticket)
	require.Empty(t, h.Get("Idempotency-Key"))
	_, h, _ = send("POST", "/adyen/v71/payments", key("Idempotency-Key"), ticket)
	require.Equal(t, "k-1", h.Get("Idempotency-Key"))
	st, _, _ = send("POST", "/adyen/v71/payments", map[string]string{"Idempotency-Key": strings.Repeat("k", 65)}, ticket)
	require.Equal(t, 422, st)

	// PayPal-like: 201, then 200 for the repeat.
	st, _, _ = send("POST", "/paypal/v2/checkout/orders", key("PayPal-Request-Id"), ticket)
	require.Equal(t, 201, st)
	st, _, _ = send("POST", "/paypal/v2/checkout/orders", key("PayPal-Request-Id"), ticket)
	require.Equal(t, 200, st)

	// Square-like: the key in the body, stored without it.
	sq := `{"idempotency_key":"k-1","request_id":"r-1","subject":"s"}`
	st, _, body = send("POST", "/square/v2/payments", nil, sq)
	require.Equal(t, 200, st)
	require.Contains(t, body, `"payment":{"id":"ticket-1"`)
	st, _, body = send("POST", "/square/v2/payments", nil, strings.Replace(sq, `"s"`, `"t"`, 1))
	require.Equal(t, 400, st)
	require.Contains(t, body, "IDEMPOTENCY_KEY_REUSED")
	st, _, body = send("POST", "/square/v2/payments", nil, ticket)
	require.Equal(t, 400, st, "no key")
	require.Contains(t, body, "MISSING_REQUIRED_PARAMETER")
	recs, err := srv.Records("square")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.JSONEq(t, ticket, string(recs[0].Payload))

	// PUT by business id: the thing named in Location only.
	st, h, body = send("PUT", "/things/things/order-7", nil, ticket)
	require.Equal(t, 201, st)
	require.Equal(t, "/things/things/order-7", h.Get("Location"))
	require.Empty(t, body)
	st, _, _ = send("PUT", "/things/things/order-7", nil, ticket)
	require.Equal(t, 200, st)
	st, _, _ = send("PUT", "/things/things/order-7", nil, other)
	require.Equal(t, 409, st)
	st, _, _ = send("POST", "/things/things/order-7", nil, ticket)
	require.Equal(t, 404, st, "PUT only")

	// Signed webhook: verified, deduplicated on webhook-id.
	event := `{"data":` + ticket + `}`
	signed := func(id, body, secret string, at time.Time) map[string]string {
		k, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		ts := strconv.FormatInt(at.Unix(), 10)
		m := hmac.New(sha256.New, k)
		m.Write([]byte(id + "." + ts + "." + body))
		return map[string]string{"webhook-id": id, "webhook-timestamp": ts,
			"webhook-signature": "v1,bm90IGl0 v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))}
	}
	st, _, body = send("POST", "/webhooks/webhooks", signed("msg-1", event, WebhookSecret, time.Now()), event)
	require.Equal(t, 200, st, body)
	_, _, body = send("POST", "/webhooks/webhooks", signed("msg-1", event, WebhookSecret, time.Now()), event)
	require.Contains(t, body, `"status":"duplicate"`)
	st, _, _ = send("POST", "/webhooks/webhooks", signed("msg-2", event, "whsec_b3RoZXI=", time.Now()), event)
	require.Equal(t, 401, st, "another secret")
	st, _, _ = send("POST", "/webhooks/webhooks", signed("msg-2", event, WebhookSecret, time.Now().Add(-time.Hour)), event)
	require.Equal(t, 401, st, "a stale timestamp")
	st, _, _ = send("POST", "/webhooks/webhooks", signed("msg-2", event, WebhookSecret, time.Now()), strings.Replace(event, `"s"`, `"x"`, 1))
	require.Equal(t, 401, st, "a changed body")
}
