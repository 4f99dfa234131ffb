package lab

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// Reviewer answers parked deliveries as a careful operator would: it looks
// for the effect at the destination first. Found: delivered, with the
// destination's id for it. Not found: retry.
type Reviewer struct {
	Starter *starter.Client
	Effects *Effects
	// Name is the reviewer's identity in each decision.
	Name string
	// Poll is how often it looks for parked deliveries (zero: 1 s).
	Poll time.Duration
	// Settle is how long a delivery must have been parked before the
	// destination is looked at: a request written by a worker that was just
	// killed may still be landing.
	Settle time.Duration
	// Concurrency bounds the reviews in flight (zero: 4), so an update
	// waiting on a killed worker's task does not hold the others up.
	Concurrency int
	// Only, when set, picks the deliveries it answers, by key.
	Only func(key string) bool
	// Decided is told of each accepted decision.
	Decided func(key string, d workflows.ReviewDecision)
	// Logf receives what it could not do; nil discards.
	Logf func(format string, args ...any)
}

// reviewTimeout bounds one review.
const reviewTimeout = 30 * time.Second

// Run reviews until ctx is done.
func (r *Reviewer) Run(ctx context.Context) {
	if r.Poll == 0 {
		r.Poll = time.Second
	}
	if r.Concurrency == 0 {
		r.Concurrency = 4
	}
	if r.Logf == nil {
		r.Logf = func(string, ...any) {}
	}
	tick := time.NewTicker(r.Poll)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, r.Concurrency)
	var mu sync.Mutex
	busy := map[string]bool{}
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		parked, err := r.Starter.ListAwaitingReview(lctx)
		cancel()
		if err != nil {
			continue // the server may be restarting
		}
		for _, p := range parked {
			mu.Lock()
			skip := busy[p.Key] || (r.Only != nil && !r.Only(p.Key))
			if !skip {
				busy[p.Key] = true
			}
			mu.Unlock()
			if skip {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.review(ctx, p.Key)
				mu.Lock()
				delete(busy, p.Key)
				mu.Unlock()
				<-sem
			}()
		}
	}
}

func (r *Reviewer) review(ctx context.Context, key string) {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	// Visibility lags: the status query says whether it still waits.
	st, err := r.Starter.Status(ctx, key)
	if err != nil || st.State != workflows.StateAwaitingReview || st.Review == nil {
		return
	}
	if time.Since(st.Review.Requested) < r.Settle {
		return
	}
	dec, err := r.Decide(ctx, st)
	if err != nil {
		r.Logf("reviewer: look for %s: %v", st.Operation.BusinessID, err)
		return
	}
	rec, err := r.Starter.Review(ctx, key, dec)
	var notAwaiting *starter.NotAwaitingReviewError
	switch {
	case errors.As(err, &notAwaiting):
		// Decided already (a retried review after a lost answer).
	case err != nil:
		r.Logf("reviewer: %s: %v (will try again)", st.Operation.BusinessID, err)
	case rec.Accepted && r.Decided != nil:
		r.Decided(key, dec)
	}
}

// Decide is the careful operator's decision for a parked delivery.
func (r *Reviewer) Decide(ctx context.Context, st workflows.DeliveryStatus) (workflows.ReviewDecision, error) {
	all, err := r.Effects.All(ctx)
	if err != nil {
		return workflows.ReviewDecision{}, err
	}
	for _, e := range all[st.Operation.BusinessID] {
		if e.Dest == st.Operation.Destination {
			return workflows.ReviewDecision{Decision: workflows.DecisionDelivered, Reviewer: r.Name,
				Note: "effect found at the destination", ResourceID: e.ID}, nil
		}
	}
	return workflows.ReviewDecision{Decision: workflows.DecisionRetry, Reviewer: r.Name,
		Note: "no effect at the destination"}, nil
}
