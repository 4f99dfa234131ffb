package httpdest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destinations"
)

// Standard Webhooks headers.
const (
	WebhookID        = "webhook-id"
	WebhookTimestamp = "webhook-timestamp"
	WebhookSignature = "webhook-signature"
	// WebhookSecretPrefix starts a Standard Webhooks secret; the rest is
	// the key, base64.
	WebhookSecretPrefix = "whsec_"
)

// request builds one attempt's request in the destination's dialect: the
// URL template filled in, the payload placed, the key where the contract
// puts it, static headers, then the credential or signature.
func (a *Adapter) request(ctx context.Context, req destination.Request, c contract.Contract) (*http.Request, error) {
	u, err := destinations.ExpandURL(a.d.URL, urlValues(req))
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if c.Dedup == contract.DedupLookup && a.d.LookupURL != "" {
		// After a lost answer the lookup alone tells whether the effect
		// exists: a delivery it could not look up is not sent at all.
		if _, err := destinations.ExpandURL(a.d.LookupURL, urlValues(req)); err != nil {
			return nil, fmt.Errorf("lookup_url: %w", err)
		}
	}
	body, err := requestBody(req.Payload, a.d.Body, destinations.Pointer(c.KeyField), req.Key)
	if err != nil {
		return nil, err
	}
	method := a.d.Method
	if method == "" {
		method = http.MethodPost
	}
	hr, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	// Without GetBody the transport cannot replay the body. Go's
	// http.Transport otherwise treats a request carrying Idempotency-Key
	// (or a PUT) as replayable and may resend it by itself on a broken
	// reused connection; Courier owns every retry and must count each one.
	hr.GetBody = nil
	for name, v := range a.d.Headers {
		hr.Header.Set(name, v)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if h := c.KeyHeader; h != "" {
		hr.Header.Set(h, req.Key)
	}
	a.authorize(hr)
	if a.webhookKey != nil {
		// Fresh on each attempt; the id, the key, never changes.
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		hr.Header.Set(WebhookID, req.Key)
		hr.Header.Set(WebhookTimestamp, ts)
		hr.Header.Set(WebhookSignature, "v1,"+Sign(a.webhookKey, req.Key, ts, body))
	}
	return hr, nil
}

func urlValues(req destination.Request) destinations.URLValues {
	return destinations.URLValues{Key: req.Key, BusinessID: req.BusinessID, Tenant: req.Tenant, Operation: req.Operation}
}

// requestBody is the payload as it is, or placed under a pointer, with the
// key at keyField when one is set. A payload left as is keeps its bytes.
func requestBody(payload json.RawMessage, b *destinations.Body, keyField destinations.Pointer, key string) ([]byte, error) {
	if (b == nil || b.Under == "") && keyField == "" {
		return payload, nil
	}
	var doc any
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	if b != nil && b.Under != "" {
		var err error
		if doc, err = place(map[string]any{}, b.Under, doc); err != nil {
			return nil, fmt.Errorf("body.under: %w", err)
		}
	}
	if keyField != "" {
		var err error
		if doc, err = place(doc, keyField, key); err != nil {
			return nil, fmt.Errorf("contract.key_field: %w", err)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// place sets the value at pointer p in doc, making the objects on the way.
func place(doc any, p destinations.Pointer, v any) (any, error) {
	toks, err := p.Tokens()
	if err != nil {
		return nil, err
	}
	at := doc
	for i, t := range toks {
		obj, ok := at.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: %q is not a JSON object", p, "/"+strings.Join(toks[:i], "/"))
		}
		if i == len(toks)-1 {
			obj[t] = v
			break
		}
		if _, ok := obj[t]; !ok {
			obj[t] = map[string]any{}
		}
		at = obj[t]
	}
	return doc, nil
}

// WebhookKey decodes a whsec_ secret into its signing key.
func WebhookKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, WebhookSecretPrefix)
	if !ok {
		return nil, fmt.Errorf("a Standard Webhooks secret starts with %s", WebhookSecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) == 0 {
		return nil, errors.New("a Standard Webhooks secret is whsec_ followed by the key in base64")
	}
	return key, nil
}

// Sign is the Standard Webhooks signature of one message: base64 of the
// HMAC-SHA256 of "id.timestamp.body".
func Sign(key []byte, id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + timestamp + "."))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}
