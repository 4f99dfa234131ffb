// Package httpdest delivers to HTTP destinations: one JSON POST per attempt,
// classified by what the transport saw (was the request written? what came
// back?) into a contract.Class.
package httpdest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
)

const (
	// maxBody bounds every response body read.
	maxBody = 1 << 20
	// maxReceiptBody bounds the raw body kept in a receipt, which lands in
	// workflow history.
	maxReceiptBody = 4 << 10
	// maxErrorBody bounds the body excerpt quoted in Outcome.Error.
	maxErrorBody = 200
)

// Adapter is one HTTP destination.
type Adapter struct {
	name string
	d    contract.Destination
	// auth is the full header value; it is only ever put in a request header.
	auth   string
	client *http.Client
}

var _ activities.Adapter = (*Adapter)(nil)

// New builds the adapter for destination name, reading its secret once.
func New(name string, d contract.Destination) (*Adapter, error) {
	u, err := url.Parse(d.URL)
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url: %q is not an absolute http(s) URL", d.URL)
	}
	if d.Contract.Retry.AttemptTimeout <= 0 {
		return nil, errors.New("contract.retry.attempt_timeout: required and positive")
	}
	a := &Adapter{name: name, d: d}
	if d.Auth != nil {
		secret, err := d.Auth.Secret()
		if err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		a.auth = secret
		if d.Auth.Scheme != "" {
			a.auth = d.Auth.Scheme + " " + secret
		}
	}
	a.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			// A fresh connection per attempt: on a reused keep-alive
			// connection, the server closing it while idle looks exactly
			// like a hang-up after our write, and would turn a request that
			// never arrived into an unknown outcome (a review, for a
			// destination without dedup).
			DisableKeepAlives: true,
		},
		// A redirect is classified, not followed: following a 307 would
		// resend the POST.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return a, nil
}

// String names the adapter without its credential.
func (a *Adapter) String() string { return fmt.Sprintf("httpdest %s (%s)", a.name, a.d.URL) }

// Deliver POSTs the payload once and classifies what happened.
func (a *Adapter) Deliver(ctx context.Context, req activities.Request) activities.Outcome {
	// The delivery's recorded contract: the key header, the replay marker
	// and the timeout a delivery started under stay its own.
	c := req.ContractOr(a.d.Contract)
	timeout := c.Retry.AttemptTimeout.D()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// mayBeWritten turns true as soon as request bytes may have left:
	// WroteHeaders fires when the headers reach the connection's buffer,
	// which is before the wire, so it errs towards "unknown", never
	// towards a resend. Trace hooks run on transport goroutines.
	var gotConn, mayBeWritten atomic.Bool
	trace := &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { gotConn.Store(true) },
		WroteHeaders: func() { mayBeWritten.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { mayBeWritten.Store(true) },
	}
	hr, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, a.d.URL, bytes.NewReader(req.Payload))
	if err != nil {
		return activities.Outcome{Class: contract.ClassNotSent, Error: fmt.Sprintf("building the request: %v", err)}
	}
	// Without GetBody the transport cannot replay the body. Go's
	// http.Transport otherwise treats a POST carrying Idempotency-Key as
	// replayable and may resend it by itself on a broken reused connection;
	// Courier owns every retry and must count each one.
	hr.GetBody = nil
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if h := c.KeyHeader; h != "" {
		hr.Header.Set(h, req.Key)
	}
	a.authorize(hr)

	resp, err := a.client.Do(hr)
	if err != nil {
		if !mayBeWritten.Load() {
			where := "before connecting"
			if gotConn.Load() {
				where = "before the request was written"
			}
			return activities.Outcome{Class: contract.ClassNotSent, Error: fmt.Sprintf("not sent, failed %s: %s", where, cause(err))}
		}
		return activities.Outcome{Class: contract.ClassUnknown, Error: afterWrite(ctx, err, timeout)}
	}
	defer resp.Body.Close()

	body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	tooLarge := len(body) > maxBody
	if tooLarge {
		body = nil
	}
	out := activities.Outcome{
		Class:      classify(resp.StatusCode, resp.Header, body, c.ReplayMarker),
		StatusCode: resp.StatusCode,
	}
	switch out.Class {
	case contract.ClassCreated, contract.ClassReplayed:
		if readErr != nil {
			// The status says the effect exists, but the receipt is lost;
			// a retry (replay) or a lookup recovers it.
			out.Class = contract.ClassUnknown
			out.Error = fmt.Sprintf("HTTP %d, then the response body broke off: %s", resp.StatusCode, afterWrite(ctx, readErr, timeout))
			return out
		}
		r := receipt(resp.StatusCode, body)
		r.Replayed = out.Class == contract.ClassReplayed
		out.Receipt = &r
		if tooLarge {
			out.Error = fmt.Sprintf("HTTP %d with a response body over %d bytes: receipt fields not read", resp.StatusCode, maxBody)
		}
	default:
		out.Error = fmt.Sprintf("HTTP %d%s", resp.StatusCode, excerpt(body))
		if out.Class == contract.ClassUnknown && resp.StatusCode < 400 {
			out.Error += " (redirects are not followed)"
		}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			out.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
	}
	return out
}

// Lookup asks the destination for the effect by key (and business id).
func (a *Adapter) Lookup(ctx context.Context, req activities.Request) (activities.Found, error) {
	if a.d.LookupURL == "" {
		return activities.Found{}, fmt.Errorf("destination %s has no lookup_url", a.name)
	}
	u := strings.NewReplacer(
		"{key}", url.QueryEscape(req.Key),
		"{business_id}", url.QueryEscape(req.BusinessID),
	).Replace(a.d.LookupURL)

	ctx, cancel := context.WithTimeout(ctx, req.ContractOr(a.d.Contract).Retry.AttemptTimeout.D())
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return activities.Found{}, fmt.Errorf("lookup request: %w", err)
	}
	hr.Header.Set("Accept", "application/json")
	a.authorize(hr)
	resp, err := a.client.Do(hr)
	if err != nil {
		return activities.Found{}, fmt.Errorf("lookup: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return activities.Found{}, fmt.Errorf("lookup: reading the response: %w", err)
	}
	if len(body) > maxBody {
		body = nil
	}
	switch resp.StatusCode {
	case http.StatusOK:
		r := receipt(resp.StatusCode, body)
		return activities.Found{Found: true, Receipt: &r}, nil
	case http.StatusNotFound:
		return activities.Found{}, nil
	}
	return activities.Found{}, fmt.Errorf("lookup: unexpected HTTP %d%s", resp.StatusCode, excerpt(body))
}

func (a *Adapter) authorize(hr *http.Request) {
	if a.d.Auth != nil {
		hr.Header.Set(a.d.Auth.Header, a.auth)
	}
}

// afterWrite describes a failure once the request may have been written.
func afterWrite(ctx context.Context, err error, timeout time.Duration) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no response within the attempt timeout (%s) after the request was written", timeout)
	case errors.Is(err, context.Canceled):
		return "attempt canceled after the request was written"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed after the request was written: " + cause(err)
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return "connection reset after the request was written: " + cause(err)
	}
	return "transport error after the request was written: " + cause(err)
}

// cause drops url.Error's "Post <url>:" prefix: the URL is in the config.
func cause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// receipt reads the resource id and status from a JSON body; a body that is
// not a JSON object gives a receipt with just the status code.
func receipt(status int, body []byte) activities.Receipt {
	r := activities.Receipt{StatusCode: status}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return r
	}
	for _, name := range []string{"id", "ticket_id", "resource_id"} {
		if id := scalar(fields[name]); id != "" {
			r.ResourceID = id
			break
		}
	}
	r.Status = scalar(fields["status"])
	if len(body) <= maxReceiptBody {
		r.Body = json.RawMessage(bytes.Clone(body))
	}
	return r
}

// scalar renders a JSON string or number as text ("ticket-1", 42).
func scalar(raw json.RawMessage) string {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if len(raw) == 0 || d.Decode(&v) != nil {
		return ""
	}
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	}
	return ""
}

// excerpt quotes the start of an error body for Outcome.Error.
func excerpt(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if s == "" {
		return ""
	}
	if len(s) > maxErrorBody {
		s = strings.ToValidUTF8(s[:maxErrorBody], "") + "..."
	}
	return ": " + s
}
