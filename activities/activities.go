// Package activities does all of Courier's I/O: one attempt at a destination,
// a lookup by key, a review reminder, each through a destination's adapter
// (package destination and the adapters beneath it).
// The worker registers it and the workflows name its activities; it imports
// no workflow code.
package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/reviewproof"
)

// Activities holds the worker's adapters, one per configured destination.
type Activities struct {
	Adapters map[string]destination.Adapter
	// Contracts are the worker's current contracts, by destination, and
	// Reviewers who may review: a delivery's first attempt runs under and
	// records them. Reviewing, by destination, replaces Reviewers where a
	// destination has reviewers of its own or they sign their decisions.
	Contracts map[string]contract.Contract
	Reviewers []string
	Reviewing map[string]Reviewing
	// DefaultPolicy is the file's default reviewers' keys (nil: they have
	// none), who review at a destination the file no longer names.
	DefaultPolicy *reviewproof.Policy
	// Tenants, by destination, are the only tenants whose deliveries may
	// use it; a destination not in it serves every tenant.
	Tenants map[string][]string
	// Runs reads earlier runs before an attempt that a repeat would
	// duplicate; without it such an attempt is not sent.
	Runs Runs
	// Ledger, when set, is the outcome ledger: read before a run's first
	// attempt sends, written by each step that learns an outcome.
	// LedgerConverter encodes the receipts it keeps (the worker's data
	// converter, with its codec); nil is the SDK's default.
	Ledger          Outcomes
	LedgerConverter converter.DataConverter
	// StopGrace, when set, is how long an attempt may go on once its worker
	// is stopping; then it is cut short and reports what it knows (sent or
	// not) before the worker exits. Keep it under the worker's stop timeout.
	StopGrace time.Duration
	// Notifiers are told of parked deliveries, by destination; a
	// destination without one is only logged.
	Notifiers map[string]Notifier
	// Gate, when set, holds attempts back at paused or broken destinations.
	Gate Gate
	// OnReminder, when set, is told about each review reminder (metrics, paging).
	OnReminder func(Reminder)
}

// Notifier tells people that a delivery waits for their review, or that a
// destination's breaker opened.
type Notifier interface {
	Notify(ctx context.Context, r Reminder) error
	NotifyGate(ctx context.Context, n GateNotice) error
}

func (a *Activities) adapter(name string) (destination.Adapter, error) {
	ad, ok := a.Adapters[name]
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("destination %q is not configured on the workers", name), ErrUnknownDestination, nil)
	}
	return ad, nil
}

// terms are the worker's current terms for a destination; their contract
// is nil when the worker has no such destination.
func (a *Activities) terms(destination string) Terms {
	t := Terms{Reviewers: a.Reviewers}
	if r, ok := a.Reviewing[destination]; ok {
		t.Reviewers, t.Policy = r.Names, r.Policy
	}
	if c, ok := a.Contracts[destination]; ok {
		t.Contract = &c
	}
	return t
}

// Lookup asks a lookup destination whether the effect exists. Unlike an
// attempt it is a read, so Temporal may retry it freely.
func (a *Activities) Lookup(ctx context.Context, req Request) (Found, error) {
	ad, _, stop, err := a.prepare(ctx, &req)
	if err != nil {
		return Found{}, err
	}
	defer stop()
	f, err := lookup(ctx, ad, req)
	if errors.Is(err, ErrUnreadable) {
		// Asking again soon gets the same answer: the delivery parks with it.
		return Found{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("lookup %s at %s: %v", req.Key, req.Destination, err), ErrLookupUnreadable, nil)
	}
	if err != nil {
		return Found{}, fmt.Errorf("lookup %s at %s: %w", req.Key, req.Destination, err)
	}
	if f.Found && a.Ledger != nil {
		// The lookup learned the outcome: the effect exists.
		if err := a.RecordOutcome(ctx, Decided{Key: req.Key, Fingerprint: req.Fingerprint, Destination: req.Destination,
			Status: "duplicate", Receipt: f.Receipt}); err != nil {
			return Found{}, err
		}
	}
	activity.GetLogger(ctx).Info("lookup finished",
		"key", req.Key, "destination", req.Destination, "attempt", req.Attempt, "found", f.Found)
	return f, nil
}

// lookup asks the adapter whether the effect exists. Found means the
// answer names the effect (see Found); one that does not is unreadable.
func lookup(ctx context.Context, ad destination.Adapter, req Request) (Found, error) {
	lk, ok := ad.(destination.Lookuper)
	if !ok {
		return Found{}, fmt.Errorf("destination %q declares dedup lookup, but its adapter has no Lookup: %w", req.Destination, ErrUnreadable)
	}
	ctx, cancel := attemptContext(ctx, req)
	defer cancel()
	f, err := lk.Lookup(ctx, req.Attempted())
	if err != nil {
		return f, err
	}
	if f.Found && (f.Receipt == nil || f.Receipt.ResourceID == "") {
		return f, fmt.Errorf("found, but the answer names no resource id%s: %w", readsText(f.Reads), ErrUnreadable)
	}
	if f.Receipt != nil {
		f.Receipt.Source = SourceLookup
	}
	return f, nil
}

// ResolveTerms returns the worker's current terms for a destination, for a
// delivery that has none recorded yet (its first attempt was lost before it
// could report them). Run as a local activity: its answer is recorded.
func (a *Activities) ResolveTerms(_ context.Context, destination string) (Terms, error) {
	return a.terms(destination), nil
}

// CheckSigner says why the workers' current destinations file no longer
// lets a verified decision's signer decide it at its destination, or ""
// when it does: the destination's reviewers there (its own, or the
// default it takes) must list the same name with the same key, allowed
// that decision. So removing a key from the file, or a decision from a
// reviewer, revokes it for deliveries parked before too. Run as a local
// activity: its answer is recorded, and replay decides alike.
func (a *Activities) CheckSigner(_ context.Context, s Signer) (string, error) {
	p := a.DefaultPolicy
	if r, ok := a.Reviewing[s.Destination]; ok {
		p = r.Policy
	}
	signed, err := reviewproof.ParsePublicKey(s.PublicKey)
	if err != nil {
		return "", fmt.Errorf("the recorded key of reviewer %s: %w", s.Reviewer, err)
	}
	i := -1
	if p != nil {
		i = slices.IndexFunc(p.Reviewers, func(r reviewproof.Reviewer) bool {
			k, err := reviewproof.ParsePublicKey(r.Key)
			return r.Name == s.Reviewer && err == nil && k.Equal(signed)
		})
	}
	if i < 0 {
		return fmt.Sprintf("key of reviewer %s for destination %s is no longer in the destinations file: it was revoked after this delivery recorded it; "+
			"sign with a key the file lists", s.Reviewer, s.Destination), nil
	}
	if r := p.Reviewers[i]; !slices.Contains(r.Decisions, s.Decision) {
		return fmt.Sprintf("reviewer %s may no longer decide %s at destination %s: the destinations file now gives %s",
			s.Reviewer, s.Decision, s.Destination, p.Rule(r)), nil
	}
	return "", nil
}

// RemindReview tells operators that a delivery waits for a decision: it
// logs, and tells the destination's notifier, if any.
func (a *Activities) RemindReview(ctx context.Context, r Reminder) (string, error) {
	activity.GetLogger(ctx).Warn("delivery awaiting review",
		"key", r.Key, "destination", r.Destination, "reminder", r.Number, "since", r.Since, "evidence", r.Evidence)
	if a.OnReminder != nil {
		a.OnReminder(r)
	}
	n, ok := a.Notifiers[r.Destination]
	if !ok {
		return NoticeLogged, nil
	}
	r.Namespace = activity.GetInfo(ctx).WorkflowNamespace
	return NoticeSent, n.Notify(ctx, r)
}

// What RemindReview did with a notice, as the delivery records it.
const (
	NoticeSent   = "notifier told"
	NoticeLogged = "no notifier configured: in the worker's log only"
)

// NotifyGate tells the destination's notifier, if any, that its gate
// changed (its breaker opened).
func (a *Activities) NotifyGate(ctx context.Context, n GateNotice) error {
	activity.GetLogger(ctx).Warn("destination gate changed", "destination", n.Destination, "state", n.State, "why", n.Why)
	if nt, ok := a.Notifiers[n.Destination]; ok {
		return nt.NotifyGate(ctx, n)
	}
	return nil
}

// ReleaseHeld tells the deliveries held at a destination to look again.
func (a *Activities) ReleaseHeld(ctx context.Context, destination string) error {
	if a.Gate == nil {
		return nil
	}
	return a.Gate.Release(ctx, destination)
}
