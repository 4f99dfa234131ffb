package testsuite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// Real runs deliveries through the starter against a real Temporal server,
// where a worker (in this process or in another) runs them.
type Real struct {
	Starter  *starter.Client
	Temporal client.Client
	// Signal sends review decisions as signal "review"; otherwise they go
	// through the validated update, as `courier review` sends them.
	Signal bool

	rl *RealLab // the lab running this case, for the real-only cases

	mu      sync.Mutex
	parked  []string
	results []workflows.DeliveryResult
}

// Deliver implements Deliverer: start (or join) the delivery, wait for it
// and answer its reviews with decide until it finishes, or leave it parked
// when decide has no answer.
func (r *Real) Deliver(ctx context.Context, in workflows.DeliveryInput, decide Decider) (Outcome, error) {
	h, err := r.Starter.Start(ctx, in)
	var conflict *starter.ConflictError
	if errors.As(err, &conflict) {
		return refused(conflict), nil
	}
	if err != nil {
		return Outcome{}, err
	}
	for {
		st, err := r.Starter.Wait(ctx, h.Key)
		if err != nil {
			return Outcome{}, fmt.Errorf("wait for delivery %s: %w", h.Key, err)
		}
		if st.State != workflows.StateAwaitingReview {
			res := st.DeliveryResult
			if h.Joined {
				res = joined(res)
			}
			r.record(res)
			return Outcome{Result: res}, nil
		}
		var d *workflows.ReviewDecision
		if decide != nil {
			d = decide(st)
		}
		if d == nil {
			r.mu.Lock()
			r.parked = append(r.parked, h.Key)
			r.mu.Unlock()
			return Outcome{Parked: &st}, nil
		}
		seen := 0
		if st.Review != nil {
			seen = len(st.Review.Decisions)
		}
		if err := r.review(ctx, h.Key, *d); err != nil {
			return Outcome{}, err
		}
		// A signal is recorded before the worker acts on it: wait until the
		// delivery has it, or the next Wait could see the old parked state.
		if err := r.awaitDecision(ctx, h.Key, seen); err != nil {
			return Outcome{}, err
		}
	}
}

func (r *Real) review(ctx context.Context, key string, d workflows.ReviewDecision) error {
	if !r.Signal {
		if _, err := r.Starter.Review(ctx, key, d); err != nil {
			return fmt.Errorf("review %s by update: %w", key, err)
		}
		return nil
	}
	// An invalid signal is recorded and ignored by the workflow; refuse it
	// here so a bad decider cannot loop forever.
	if err := d.Validate(); err != nil {
		return fmt.Errorf("review decision for %s: %w", key, err)
	}
	if err := r.Temporal.SignalWorkflow(ctx, workflows.WorkflowID(key), "", workflows.SignalReview, d); err != nil {
		return fmt.Errorf("review %s by signal: %w", key, err)
	}
	return nil
}

// statusPoll paces the lab's own status checks.
const statusPoll = 200 * time.Millisecond

// awaitDecision polls the status until the delivery holds more than seen
// review records.
func (r *Real) awaitDecision(ctx context.Context, key string, seen int) error {
	tick := time.NewTicker(statusPoll)
	defer tick.Stop()
	for {
		st, err := r.Starter.Status(ctx, key)
		if err != nil {
			return fmt.Errorf("status of %s after review: %w", key, err)
		}
		if st.Review != nil && len(st.Review.Decisions) > seen {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("delivery %s never received the review decision: %w", key, ctx.Err())
		}
	}
}

func (r *Real) record(res workflows.DeliveryResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, res)
}

// Parked is the keys of the deliveries left awaiting review.
func (r *Real) Parked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.parked...)
}

// Results is every finished delivery's result, in order.
func (r *Real) Results() []workflows.DeliveryResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]workflows.DeliveryResult(nil), r.results...)
}

// joined is what a request that joined an earlier delivery observed: that
// delivery's status and receipt, and no attempt of its own.
func joined(res workflows.DeliveryResult) workflows.DeliveryResult {
	switch res.Status {
	case workflows.StatusCreated, workflows.StatusDuplicate, workflows.StatusDeliveredByReview:
		res.Status = workflows.StatusDuplicate
	}
	res.Attempts, res.Events = []workflows.Attempt{}, []workflows.Event{}
	return res
}

// refused is a request the starter stopped as a conflict: the operation had
// been started with another payload, so this one was never sent. Its one
// step is that check, classified as the destination would have.
func refused(c *starter.ConflictError) Outcome {
	now := time.Now().UTC()
	msg := c.Error()
	return Outcome{Result: workflows.DeliveryResult{
		Key: c.Key, Fingerprint: c.RequestFingerprint, Status: workflows.StatusConflict, Error: msg,
		Attempts: []workflows.Attempt{{Number: 1, Started: now, Ended: now, Class: contract.ClassConflict,
			Error: "refused by the starter before sending: " + msg}},
		Events: []workflows.Event{},
	}}
}
