// Package activities does all of Courier's I/O: one attempt at a destination,
// a lookup by key, a review reminder. Destination adapters live beneath it.
package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/contract"
)

// Error types the workflow can tell apart.
const (
	// ErrUnknownDestination: the worker has no adapter for the destination.
	ErrUnknownDestination = "UnknownDestination"
)

// Request is one attempt's input. It carries the payload and the derived key,
// never a credential.
type Request struct {
	Key         string          `json:"key"`
	Fingerprint string          `json:"fingerprint"`
	Tenant      string          `json:"tenant,omitempty"`
	Destination string          `json:"destination"`
	Operation   string          `json:"operation"`
	BusinessID  string          `json:"business_id"`
	Payload     json.RawMessage `json:"payload"`
	Attempt     int             `json:"attempt"`
}

// Receipt is what the destination returned for the effect.
type Receipt struct {
	ResourceID string          `json:"resource_id"`
	Status     string          `json:"status,omitempty"`
	StatusCode int             `json:"status_code,omitempty"`
	Replayed   bool            `json:"replayed"`
	Body       json.RawMessage `json:"body,omitempty"`
}

// Outcome is one attempt's classified result. An adapter always returns one:
// transport failures are facts to classify, not activity errors.
type Outcome struct {
	Class      contract.Class `json:"class"`
	StatusCode int            `json:"status_code,omitempty"`
	Receipt    *Receipt       `json:"receipt,omitempty"`
	Error      string         `json:"error,omitempty"`
	// RetryAfter is the destination's own pacing (Retry-After), if any.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
}

// Found is a lookup's answer.
type Found struct {
	Found   bool     `json:"found"`
	Receipt *Receipt `json:"receipt,omitempty"`
}

// Reminder asks reviewers again about a parked delivery.
type Reminder struct {
	Key         string    `json:"key"`
	Destination string    `json:"destination"`
	Since       time.Time `json:"since"`
	Evidence    string    `json:"evidence"`
}

// Adapter delivers to one destination.
type Adapter interface {
	// Deliver makes one attempt and classifies what happened.
	Deliver(ctx context.Context, req Request) Outcome
	// Lookup finds an effect by key, for dedup lookup destinations.
	Lookup(ctx context.Context, req Request) (Found, error)
}

// Activities holds the worker's adapters, one per configured destination.
type Activities struct {
	Adapters map[string]Adapter
	// OnReminder, when set, is told about each review reminder (metrics, paging).
	OnReminder func(Reminder)
}

func (a *Activities) adapter(name string) (Adapter, error) {
	ad, ok := a.Adapters[name]
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("destination %q is not configured on this worker", name), ErrUnknownDestination, nil)
	}
	return ad, nil
}

// Attempt makes one attempt at the destination. Its result is recorded in
// history, so the workflow's decision replays exactly.
func (a *Activities) Attempt(ctx context.Context, req Request) (Outcome, error) {
	ad, err := a.adapter(req.Destination)
	if err != nil {
		return Outcome{}, err
	}
	out := ad.Deliver(ctx, req)
	activity.GetLogger(ctx).Info("attempt finished",
		"key", req.Key, "destination", req.Destination, "attempt", req.Attempt,
		"class", out.Class, "status_code", out.StatusCode, "error", out.Error)
	return out, nil
}

// Lookup asks a lookup destination whether the effect exists. Unlike an
// attempt it is a read, so Temporal may retry it freely.
func (a *Activities) Lookup(ctx context.Context, req Request) (Found, error) {
	ad, err := a.adapter(req.Destination)
	if err != nil {
		return Found{}, err
	}
	f, err := ad.Lookup(ctx, req)
	if err != nil {
		return Found{}, fmt.Errorf("lookup %s at %s: %w", req.Key, req.Destination, err)
	}
	activity.GetLogger(ctx).Info("lookup finished",
		"key", req.Key, "destination", req.Destination, "attempt", req.Attempt, "found", f.Found)
	return f, nil
}

// RemindReview tells operators that a delivery still waits for a decision.
func (a *Activities) RemindReview(ctx context.Context, r Reminder) error {
	activity.GetLogger(ctx).Warn("delivery awaiting review",
		"key", r.Key, "destination", r.Destination, "since", r.Since, "evidence", r.Evidence)
	if a.OnReminder != nil {
		a.OnReminder(r)
	}
	return nil
}
