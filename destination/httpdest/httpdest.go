// Package httpdest delivers to HTTP destinations: one JSON request per
// attempt, shaped by the destination's dialect (method, URL template, where
// the key goes, signing), classified by what the transport saw (was the
// request written? what came back?) into a contract.Class. Only the worker
// opens it.
package httpdest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/redact"
	"github.com/abde64c9/courier/internal/text"
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
	d    destinations.Destination
	// auth is the full header value; it is only ever put in a request header.
	auth string
	// webhookKey signs requests, for auth kind standard-webhooks.
	webhookKey []byte
	client     *http.Client
	// red replaces the worker's secrets in every answer as it is read: an
	// answer that echoes the request would otherwise carry them into the
	// receipt, the error and from there history.
	red *redact.Redactor
}

var _ destination.Adapter = (*Adapter)(nil)

// New builds the adapter for destination name, reading its secret and TLS
// files once: a destination it cannot use stops the worker at start. red
// (nil: none) redacts the worker's secrets from its answers.
func New(name string, d destinations.Destination, red *redact.Redactor) (*Adapter, error) {
	if err := destinations.CheckURL(d.URL); err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if d.Contract.Retry.AttemptTimeout <= 0 {
		return nil, errors.New("contract.retry.attempt_timeout: required and positive")
	}
	a := &Adapter{name: name, d: d, red: red}
	if d.Auth != nil {
		var err error
		if d.Auth.Kind == destinations.AuthStandardWebhooks {
			var secret string
			if secret, err = d.Auth.Secret(); err == nil {
				a.webhookKey, err = WebhookKey(secret)
			}
		} else {
			a.auth, err = d.Auth.HeaderValue()
		}
		if err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
	}
	tlsConfig, err := clientTLS(d.TLS)
	if err != nil {
		return nil, err
	}
	a.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       tlsConfig,
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
		// resend the request.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return a, nil
}

// clientTLS reads a destination's TLS files; nil without tls options.
func clientTLS(t *destinations.TLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	c := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file: %s holds no PEM certificate", t.CAFile)
		}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.cert_file, tls.key_file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// String names the adapter without its credential.
func (a *Adapter) String() string { return fmt.Sprintf("httpdest %s (%s)", a.name, a.d.URL) }

// contractOf is what req runs under: its recorded contract, or the
// configured one for a request that carries none (a test's, a tool's).
func (a *Adapter) contractOf(req destination.Request) contract.Contract {
	if req.Contract.Dedup == "" {
		return a.d.Contract
	}
	return req.Contract
}

// Deliver POSTs the payload once and classifies what happened.
func (a *Adapter) Deliver(ctx context.Context, req destination.Request) destination.Outcome {
	out := a.deliver(ctx, req)
	out.Error = a.red.String(out.Error) // a transport error quoting what it was sent
	return out
}

func (a *Adapter) deliver(ctx context.Context, req destination.Request) destination.Outcome {
	// The delivery's recorded contract: the key header, the replay marker
	// and the timeout a delivery started under stay its own.
	c := a.contractOf(req)
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
	hr, err := a.request(httptrace.WithClientTrace(ctx, trace), req, c)
	if err != nil {
		// Nothing was sent, and sending again cannot help: the delivery
		// does not fit the destination's request template.
		return destination.Outcome{Class: contract.ClassRejected, Error: "not sent: " + err.Error()}
	}

	resp, err := a.client.Do(hr)
	if err != nil {
		if !mayBeWritten.Load() {
			where := "before connecting"
			if gotConn.Load() {
				where = "before the request was written"
			}
			return destination.Outcome{Class: contract.ClassNotSent, Error: fmt.Sprintf("not sent, failed %s: %s", where, cause(err))}
		}
		return destination.Outcome{Class: contract.ClassUnknown, Error: afterWrite(ctx, err, timeout)}
	}
	defer resp.Body.Close()

	body, readErr := a.read(resp)
	tooLarge := len(body) > maxBody
	if tooLarge {
		body = nil
	}
	class, rule := classify(resp.StatusCode, resp.Header, body, c.ReplayMarker, a.d.Rules)
	out := destination.Outcome{Class: class, StatusCode: resp.StatusCode}
	switch out.Class {
	case contract.ClassCreated, contract.ClassReplayed:
		if readErr != nil {
			// The status says the effect exists, but the receipt is lost;
			// a retry (replay) or a lookup recovers it.
			out.Class = contract.ClassUnknown
			out.Error = fmt.Sprintf("HTTP %d, then the response body broke off: %s", resp.StatusCode, afterWrite(ctx, readErr, timeout))
			return out
		}
		spec, field := a.d.Receipt, "receipt"
		if rule >= 0 && a.d.Rules[rule].Receipt != nil {
			spec, field = a.d.Rules[rule].Receipt, fmt.Sprintf("rules[%d].receipt", rule)
		}
		r, reads := receiptFrom(resp.StatusCode, resp.Header, body, spec, field)
		r.Replayed = out.Class == contract.ClassReplayed
		out.Receipt, out.Reads = &r, reads
		if tooLarge {
			out.Error = fmt.Sprintf("HTTP %d with a response body over %d bytes: receipt fields not read", resp.StatusCode, maxBody)
		}
	default:
		out.Error = fmt.Sprintf("HTTP %d%s", resp.StatusCode, excerpt(body))
		if rule >= 0 {
			out.Error += fmt.Sprintf(" (read as %s by rules[%d])", out.Class, rule)
		}
		if out.Class == contract.ClassUnknown && resp.StatusCode < 400 {
			out.Error += " (redirects are not followed)"
		}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 || out.Class == contract.ClassThrottled {
			out.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
	}
	return out
}

// read reads an answer's body, bounded, and redacts it and the headers
// before anything is cut or read from them: an excerpt cut first could keep
// part of a secret.
func (a *Adapter) read(resp *http.Response) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	a.red.Header(resp.Header)
	return a.red.Bytes(body), err
}

func (a *Adapter) authorize(hr *http.Request) {
	if a.auth != "" {
		hr.Header.Set(a.d.Auth.Header, a.auth)
	}
}

// afterWrite describes a failure once the request may have been written:
// destination.AfterWrite's words, with the attempt timeout named when it
// ran out.
func afterWrite(ctx context.Context, err error, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no response within the attempt timeout (%s) after the request was written", timeout)
	}
	return destination.AfterWrite(withoutURL(err))
}

// cause is err's text without url.Error's "Post <url>:" prefix.
func cause(err error) string { return withoutURL(err).Error() }

// withoutURL drops url.Error's "Post <url>:" prefix: the URL is in the
// config.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// receipt reads the resource id and status from a JSON body the default
// way; a body that is not a JSON object gives just the status code.
func receipt(status int, body []byte) destination.Receipt {
	r, _ := receiptFrom(status, nil, body, nil, "receipt")
	return r
}

// defaultIDs are where Courier's own dialect looks for a resource id.
var defaultIDs = destinations.Pointers{"/id", "/ticket_id", "/resource_id"}

// receiptFrom reads a receipt from an answer where spec, the file's field
// named field, says (nil: a top-level id, ticket_id or resource_id, and
// status), with what it read where.
func receiptFrom(status int, h http.Header, body []byte, spec *destinations.ReceiptSpec, field string) (destination.Receipt, []destination.Read) {
	r := destination.Receipt{StatusCode: status}
	if spec != nil && spec.IDFromLocation {
		r.ResourceID = locationID(h.Get("Location"))
		return r, []destination.Read{{Field: field + ".id_from_location", Value: orAbsent(r.ResourceID)}}
	}
	doc, _ := decodeBody(body)
	if _, isObject := doc.(map[string]any); !isObject {
		return r, []destination.Read{{Field: field, Value: "(not a JSON object)"}}
	}
	if len(body) <= maxReceiptBody {
		r.Body = json.RawMessage(bytes.Clone(body))
	}
	var reads []destination.Read
	r.ResourceID, r.Status, reads = readReceipt(doc, spec, field)
	return r, reads
}

// readReceipt reads a record's id (the first of its pointers that holds a
// value) and status, as spec says.
func readReceipt(doc any, spec *destinations.ReceiptSpec, field string) (id, status string, reads []destination.Read) {
	ids, statusAt := defaultIDs, destinations.Pointer("/status")
	if spec != nil {
		ids, statusAt = spec.ID, spec.Status
	}
	for _, p := range ids {
		v, _ := p.Lookup(doc)
		id = scalarText(v)
		reads = append(reads, destination.Read{Field: field + ".id", Pointer: string(p), Value: orAbsent(id)})
		if id != "" {
			break
		}
	}
	if statusAt != "" {
		v, _ := statusAt.Lookup(doc)
		status = scalarText(v)
		reads = append(reads, destination.Read{Field: field + ".status", Pointer: string(statusAt), Value: orAbsent(status)})
	}
	return id, status, reads
}

func orAbsent(v string) string {
	if v == "" {
		return "(absent)"
	}
	return v
}

// locationID is the last path segment of a Location header, unescaped.
func locationID(loc string) string {
	u, err := url.Parse(strings.TrimSpace(loc))
	if err != nil {
		return ""
	}
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	seg, err := url.PathUnescape(p[strings.LastIndexByte(p, '/')+1:])
	if err != nil {
		return ""
	}
	return seg
}

// decodeBody decodes a JSON body, numbers kept as written.
func decodeBody(body []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if len(body) == 0 || d.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

// scalarText renders a JSON string, number or boolean as text ("ticket-1",
// 42, true); anything else as "".
func scalarText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

// excerpt quotes the start of an error body for Outcome.Error, on one
// line; invalid UTF-8 (a binary body) is dropped before it is cut.
func excerpt(body []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(body), "")), " ")
	if s == "" {
		return ""
	}
	if len(s) > maxErrorBody {
		s = text.Cut(s, maxErrorBody) + "..."
	}
	return ": " + s
}
