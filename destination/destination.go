// Package destination is Courier's public API for side effects: any Go
// code that makes one (a vendor SDK's call, a publish to a message bus, an
// insert into a team's own store) becomes a destination with Courier's
// guarantee by implementing Adapter. A team registers its adapters by
// destination name in its own worker binary (worker.ProcessOptions.Adapters)
// and declares each one's contract with adapter go in the destinations file
// or in code (destinations.Config.Declare). Courier's own HTTP, SQL, NATS
// and SMTP destinations are adapters on this API.
//
// An adapter classifies; it never decides. It makes one attempt and says
// what happened as a Class. The destination's declared contract (its dedup
// kind, retries, key retention, reviewers) and the one decision table
// (contract.Next) then decide whether to retry, look the effect up, finish
// or park the delivery for a person's review.
//
// An adapter must never:
//   - retry on its own: the workflow's bounded policy retries, and a hidden
//     retry after an unknown outcome is the duplicate Courier exists to stop;
//   - block past the attempt's context: when it ends, return Unknown if the
//     request may have been written, NotSent if it cannot have been;
//   - put a credential in a Receipt or an Outcome's Error: both are recorded
//     in the delivery's history and shown in the web UI.
//
// The conformance kit, package worker/destinationtest, checks from go test
// that an adapter keeps the contract it declares, through the real
// Delivery workflow.
//
// # Stability
//
// This package follows semantic versioning with Courier's module: within a
// major version, names are not removed or renamed, a Class keeps its
// meaning, and new fields of Request, Outcome, Receipt and Found are
// optional (their zero value keeps today's behaviour). New classes may be
// added; an adapter never needs to return one it does not know.
package destination

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/abde64c9/courier/contract"
)

// Adapter makes one attempt at a destination.
type Adapter interface {
	// Deliver makes exactly one attempt to apply req's effect and
	// classifies what happened. Failures are facts to classify (see
	// Failed), never a reason to try again inside the call. It returns
	// once ctx ends, at the latest.
	Deliver(ctx context.Context, req Request) Outcome
}

// Lookuper is implemented by an adapter whose destination declares dedup
// lookup: after an unknown outcome, and before any resend, Courier asks it
// whether the effect of req.Key exists. A lookup is a read, so Courier may
// repeat it.
type Lookuper interface {
	// Lookup finds the effect made for req.Key (or for a field of
	// req.Payload that the destination indexes). It returns Found with a
	// Receipt naming the effect's resource id when it exists, Found false
	// when the destination says it does not, and an error when it cannot
	// tell (wrap ErrUnreadable for an answer that does not fit, so the
	// delivery parks instead of asking again).
	Lookup(ctx context.Context, req Request) (Found, error)
}

// Request is one attempt. It carries the payload and Courier's derived key,
// never a credential: the adapter holds its own.
type Request struct {
	// Key is the delivery's idempotency key, derived by Courier from the
	// tenant, destination, operation and business id: the same business
	// operation always has the same key. Give it to the destination as its
	// idempotency key, message id or unique column.
	Key string `json:"key"`
	// Fingerprint is a digest of the payload: the same key with another
	// fingerprint is another payload under a used key.
	Fingerprint string          `json:"fingerprint"`
	Tenant      string          `json:"tenant,omitempty"`
	Destination string          `json:"destination"`
	Operation   string          `json:"operation"`
	BusinessID  string          `json:"business_id"`
	Payload     json.RawMessage `json:"payload"`
	// Attempt counts from 1 within the delivery.
	Attempt int `json:"attempt"`
	// Contract is what this delivery runs under: the destination's contract
	// as recorded with the delivery's first attempt, which stays the
	// delivery's own when the destinations file changes later.
	Contract contract.Contract `json:"contract"`
}

// Class is what one attempt's result says about the effect at the
// destination. Map onto the first that fits:
type Class = contract.Class

const (
	// Created: the destination made the effect now and named it; the
	// Outcome carries a Receipt.
	Created = contract.ClassCreated
	// Replayed: the destination recognised the key and named the effect an
	// earlier attempt made; the Outcome carries its Receipt.
	Replayed = contract.ClassReplayed
	// NotSent: nothing can have reached the destination (the dial failed,
	// the name did not resolve, TLS failed before the request was written,
	// the context ended before the write).
	NotSent = contract.ClassNotSent
	// Unknown: the request was or may have been written and no answer says
	// what happened (a timeout, a reset or a closed connection after the
	// write, a lost acknowledgement). When in doubt, this one.
	Unknown = contract.ClassUnknown
	// InFlight: the destination says the same key is being processed right
	// now; nothing is known yet.
	InFlight = contract.ClassInFlight
	// Conflict: the destination says the key was used before with another
	// payload.
	Conflict = contract.ClassConflict
	// Rejected: the destination refused the request as invalid and applied
	// nothing; the same request will be refused again.
	Rejected = contract.ClassRejected
	// Throttled: the destination refused for now and applied nothing; set
	// Outcome.RetryAfter when it says when to come back.
	Throttled = contract.ClassThrottled
	// ServerError: the destination failed on its side; the effect may or
	// may not exist.
	ServerError = contract.ClassServerError
)

// Outcome is one attempt's classified result.
type Outcome struct {
	Class Class `json:"class"`
	// StatusCode is the destination's own status, when it has one (HTTP's);
	// shown to people, never decided on.
	StatusCode int `json:"status_code,omitempty"`
	// Receipt names the effect, for Created and Replayed.
	Receipt *Receipt `json:"receipt,omitempty"`
	// Error says what happened, for people: short, and without a
	// credential or the payload.
	Error string `json:"error,omitempty"`
	// RetryAfter is the destination's own pacing, if it gave one.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Reads show how the answer was read, for courier probe; never recorded.
	Reads []Read `json:"-"`
}

// Receipt is what the destination returned for the effect. It is recorded
// in the delivery's history and shown in the web UI: keep it small (the
// resource id, a status, a short redacted answer), never a credential.
type Receipt struct {
	// ResourceID names the effect at the destination (a ticket id, a row's
	// key, a stream sequence, a Message-ID). Required for Created and
	// Replayed.
	ResourceID string `json:"resource_id"`
	Status     string `json:"status,omitempty"`
	StatusCode int    `json:"status_code,omitempty"`
	// Replayed: the destination named an effect an earlier attempt made.
	Replayed bool `json:"replayed"`
	// Source is where the receipt came from (Source*); Courier sets it.
	Source string `json:"source,omitempty"`
	// Body is the destination's answer, kept small and redacted.
	Body json.RawMessage `json:"body,omitempty"`
}

// Where a receipt came from.
const (
	// SourceCreated: the attempt's own answer, which made the effect.
	SourceCreated = "created"
	// SourceReplayed: the destination recognised the key and named the
	// original effect.
	SourceReplayed = "replayed"
	// SourceLookup: a lookup found the original effect.
	SourceLookup = "lookup"
	// SourceReview: a reviewer found the effect and named it.
	SourceReview = "review"
)

// Found is a lookup's answer. Found is true only when the answer names the
// effect: its Receipt then carries the effect's resource id.
type Found struct {
	Found   bool     `json:"found"`
	Receipt *Receipt `json:"receipt,omitempty"`
	// Reads show how the answer was read, and Listed how many records a
	// list answer held, for courier probe; never recorded.
	Reads  []Read `json:"-"`
	Listed int    `json:"-"`
}

// Read is a value an adapter read at a declared place in an answer, for
// courier probe; never recorded.
type Read struct {
	// Field is the destinations file's field that declared the place, e.g.
	// "rules[0].receipt.id" or "lookup.items".
	Field   string `json:"field"`
	Pointer string `json:"pointer,omitempty"`
	// Value is what was there, as text; "(absent)" when nothing was.
	Value string `json:"value"`
}

// ErrUnreadable marks a lookup's error for an answer that could not be read
// as the destination declares: not a failure that passes, but a reading
// that does not fit the destination. The delivery parks with it.
var ErrUnreadable = errors.New("the answer cannot be read as the destinations file declares")
