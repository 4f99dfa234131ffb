package destinations

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/abde64c9/courier/contract"
)

// NATS is where a destination with adapter nats publishes: a subject that
// a JetStream stream captures. Each message's Nats-Msg-Id is the delivery's
// key, so the stream's duplicate window is the destination's key
// retention.
type NATS struct {
	// URL is the NATS server, e.g. nats://127.0.0.1:4222.
	URL string `json:"url"`
	// Stream must store every message; the worker checks at start that it
	// exists and that its duplicate window covers contract.key_retention.
	Stream  string `json:"stream"`
	Subject string `json:"subject"`
}

// validateNATS checks a destination with adapter nats.
func (d Destination) validateNATS() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if n := d.NATS; n == nil {
		bad(`nats: required for adapter nats, e.g. "nats": {"url": "nats://127.0.0.1:4222", "stream": "ORDERS", "subject": "orders.created"}`)
	} else {
		if u, err := url.Parse(n.URL); n.URL == "" || err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
			bad("nats.url: %q is not a NATS server's URL; use nats://host:port (or tls://host:port)", n.URL)
		}
		if n.Stream == "" || strings.ContainsAny(n.Stream, ". *>\t") {
			bad("nats.stream: %q is not a stream's name; name the JetStream stream (no spaces, '.', '*' or '>')", n.Stream)
		}
		if n.Subject == "" || strings.ContainsAny(n.Subject, " *>\t") {
			bad("nats.subject: %q is not a subject to publish to; use a literal subject such as orders.created (no wildcards)", n.Subject)
		}
	}
	if d.URL != "" || d.LookupURL != "" || d.Auth != nil || d.Driver != "" || d.DSN != "" || d.Table != "" {
		bad("url, lookup_url, auth, driver, dsn, table: not for adapter nats; its server is nats.url")
	}
	c := d.Contract
	if c.Dedup != contract.DedupKey {
		bad("contract.dedup: adapter nats deduplicates by the message id within the stream's duplicate window; declare key, not %q", c.Dedup)
	}
	if c.KeyHeader != "" || c.KeyField != "" || c.ReplayMarker != nil {
		bad("contract.key_header, key_field, replay_marker: not for adapter nats; the key is the message id (Nats-Msg-Id) and the stream says when it is a duplicate")
	}
	if c.Dedup == contract.DedupKey && c.KeyRetention <= 0 {
		bad("contract.key_retention: required for adapter nats; declare the stream's duplicate window or less, e.g. \"2m\"")
	}
	return errors.Join(errs...)
}
