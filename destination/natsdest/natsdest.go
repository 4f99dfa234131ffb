// Package natsdest is a destination that publishes to a NATS JetStream
// stream, written on the public destination API alone.
//
// Each publish carries Nats-Msg-Id = the delivery's key, so the stream's
// duplicate window deduplicates a repeat: declare the destination's
// contract dedup key with key_retention at most the stream's duplicate
// window (New refuses a longer one). A receipt's resource id is the stream
// sequence of the message, the original's for a repeat. Each message also
// carries the payload's fingerprint (FingerprintHeader), so a repeat of
// the key with another payload is a conflict, not a replay.
package natsdest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/abde64c9/courier/destination"
)

// Options say where an Adapter publishes.
type Options struct {
	// URL is the NATS server, e.g. nats://127.0.0.1:4222.
	URL string
	// Stream is the JetStream stream that must store each message; a
	// message another stream would capture is refused.
	Stream string
	// Subject is what each delivery's payload is published to; Stream
	// must capture it.
	Subject string
	// KeyRetention is the destination's declared key_retention; New
	// refuses one longer than the stream's duplicate window, or none.
	KeyRetention time.Duration
	// ConnectTimeout bounds New's connection and stream check; zero: 10s.
	ConnectTimeout time.Duration
}

// Adapter publishes one delivery's payload per attempt. It holds one
// connection, made by New, which reconnects on its own after a break.
type Adapter struct {
	o  Options
	nc *nats.Conn
	js jetstream.JetStream
	// mu guards stream: nil until the stream has been checked, at New
	// when the server was reachable, else at the first attempt that
	// finds it reachable.
	mu     sync.Mutex
	stream jetstream.Stream
}

var _ destination.Adapter = (*Adapter)(nil)

// New connects to o.URL and checks o.Stream: it must exist and keep
// message ids at least as long as o.KeyRetention, or New fails. A server
// that cannot be reached does not fail New, so that a NATS outage does not
// stop a worker that serves other destinations: the adapter keeps
// connecting in the background, answers not sent until it is connected,
// and checks the stream at its first attempt that reaches the server.
func New(o Options) (*Adapter, error) {
	var errs []error
	if o.URL == "" {
		errs = append(errs, errors.New("url: required, e.g. nats://127.0.0.1:4222"))
	}
	if o.Stream == "" {
		errs = append(errs, errors.New("stream: required, the JetStream stream that stores the messages"))
	}
	if o.Subject == "" {
		errs = append(errs, errors.New("subject: required, the subject the stream captures"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	timeout := o.ConnectTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	nc, err := nats.Connect(o.URL, nats.Name("courier"), nats.Timeout(timeout),
		nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		// While disconnected a publish fails at once instead of waiting in
		// a buffer that could be flushed after the attempt has ended.
		nats.ReconnectBufSize(-1), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", redacted(o.URL), err)
	}
	a := &Adapter{o: o, nc: nc}
	if a.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("JetStream at %s: %w", redacted(o.URL), err)
	}
	if !nc.IsConnected() {
		return a, nil // checked at the first attempt that reaches it
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := a.checked(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return a, nil
}

// checked checks the stream once: see check.
func (a *Adapter) checked(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stream != nil {
		return nil
	}
	s, err := a.check(ctx)
	if err == nil {
		a.stream = s
	}
	return err
}

// check finds the stream and compares its duplicate window with the
// declared key retention.
func (a *Adapter) check(ctx context.Context) (jetstream.Stream, error) {
	s, err := a.js.Stream(ctx, a.o.Stream)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("stream %q: not found at %s; create it (with subject %s and a duplicate window) or name an existing stream",
				a.o.Stream, redacted(a.o.URL), a.o.Subject)
		}
		return nil, fmt.Errorf("stream %q at %s: %w", a.o.Stream, redacted(a.o.URL), err)
	}
	return s, CheckRetention(a.o.KeyRetention, s.CachedInfo().Config.Duplicates, a.o.Stream)
}

// CheckRetention refuses a declared key retention that the stream's
// duplicate window does not cover: past the window a repeat of the same
// key is stored again, so Courier must stop retrying by then.
func CheckRetention(declared, window time.Duration, stream string) error {
	switch {
	case declared <= 0:
		return fmt.Errorf("contract.key_retention: not declared, but stream %q keeps message ids only for its duplicate window of %s; "+
			"declare key_retention %q or less", stream, window, window.String())
	case declared > window:
		return fmt.Errorf("contract.key_retention: %s declared, but stream %q keeps message ids only for its duplicate window of %s; "+
			"declare key_retention %q or less, or raise the stream's duplicate window (duplicate_window) to at least %s",
			declared, stream, window, window.String(), declared)
	}
	return nil
}

// Close closes the connection.
func (a *Adapter) Close() error {
	a.nc.Close()
	return nil
}

// Deliver publishes req.Payload to the subject with Nats-Msg-Id req.Key
// and waits for the stream's acknowledgement, at most the attempt timeout
// of the delivery's contract.
func (a *Adapter) Deliver(ctx context.Context, req destination.Request) destination.Outcome {
	if t := req.Contract.Retry.AttemptTimeout.D(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return destination.Failed(err, false)
	}
	if !a.nc.IsConnected() {
		return destination.Failed(fmt.Errorf("not connected to NATS at %s (%s)", redacted(a.o.URL), a.nc.Status()), false)
	}
	if err := a.checked(ctx); err != nil {
		// Nothing is published to a stream that is missing or keeps ids
		// for less than the declared key retention.
		return destination.Outcome{Class: destination.NotSent, Error: "not sent: " + err.Error()}
	}
	msg := &nats.Msg{Subject: a.o.Subject, Data: req.Payload, Header: nats.Header{FingerprintHeader: []string{req.Fingerprint}}}
	ack, err := a.js.PublishMsg(ctx, msg, jetstream.WithMsgID(req.Key), jetstream.WithExpectStream(a.o.Stream),
		jetstream.WithRetryAttempts(0)) // Courier owns every retry
	if err != nil {
		return classify(err)
	}
	class := destination.Created
	if ack.Duplicate {
		// The server names the sequence of the message first stored
		// under this id, within the duplicate window.
		class = destination.Replayed
		if other := a.otherPayload(ctx, ack.Sequence, req.Fingerprint); other != "" {
			return destination.Outcome{Class: destination.Conflict, Error: fmt.Sprintf(
				"message %d of stream %s has this key with another payload (fingerprint %s)", ack.Sequence, ack.Stream, other)}
		}
	}
	body, _ := json.Marshal(ack)
	return destination.Outcome{Class: class, Receipt: &destination.Receipt{
		ResourceID: strconv.FormatUint(ack.Sequence, 10),
		Status:     ack.Stream,
		Replayed:   ack.Duplicate,
		Body:       body,
	}}
}

// FingerprintHeader carries the payload's fingerprint with each message,
// so that a repeat of the key can be told from another payload under it.
const FingerprintHeader = "Courier-Fingerprint"

// otherPayload is the fingerprint of the message at seq when it differs
// from fingerprint. A message that cannot be read counts as the same: the
// stream itself recognised the key, and Courier compares fingerprints
// before it sends.
func (a *Adapter) otherPayload(ctx context.Context, seq uint64, fingerprint string) string {
	a.mu.Lock()
	s := a.stream
	a.mu.Unlock()
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return ""
	}
	if got := m.Header.Get(FingerprintHeader); got != fingerprint {
		return cmp.Or(got, "none")
	}
	return ""
}

// classify maps a failed publish onto a class.
func classify(err error) destination.Outcome {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		// The server answered that no stream listens on the subject.
		return destination.Outcome{Class: destination.NotSent,
			Error: "not sent, no stream captures the subject (the stream is missing or its subjects changed): " + err.Error()}
	case errors.Is(err, nats.ErrMaxPayload):
		return destination.Outcome{Class: destination.Rejected, Error: "the payload is larger than the server takes (max_payload): " + err.Error()}
	case errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrBadSubject), errors.Is(err, nats.ErrHeadersNotSupported):
		return destination.Failed(err, false)
	case errors.As(err, &api) && api.Code == 503:
		// The stream answered that it cannot store now: nothing stored.
		return destination.Outcome{Class: destination.Throttled, StatusCode: api.Code, Error: "stream unavailable, nothing stored: " + api.Error()}
	case errors.As(err, &api):
		return destination.Outcome{Class: destination.Rejected, StatusCode: api.Code, Error: "the stream refused the message: " + api.Error()}
	case errors.Is(err, jetstream.ErrInvalidJSAck):
		return destination.Outcome{Class: destination.Unknown, Error: "the stream's acknowledgement could not be read: " + err.Error()}
	}
	return destination.Failed(err, true)
}

// redacted is u without a password, for errors.
func redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "the configured URL"
	}
	return p.Redacted()
}
