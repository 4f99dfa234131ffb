package soak

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

const (
	// reviewPoll is how often the reviewer looks for parked deliveries.
	reviewPoll = time.Second
	// reviewSettle is how long a delivery must have been parked before the
	// reviewer looks at the destination: a request written by a worker that
	// was just killed may still be landing.
	reviewSettle  = 2 * time.Second
	reviewTimeout = 30 * time.Second
	// reviewers is how many reviews may be in flight at once.
	reviewers = 4
)

// reviewer answers parked deliveries as a careful operator would: it looks
// for the effect at the destination first. Found: delivered, with the
// destination's id for it. Not found: retry.
func (r *run) reviewer(ctx context.Context) {
	tick := time.NewTicker(reviewPoll)
	defer tick.Stop()
	// Reviews run side by side, one per delivery at a time: an update
	// waiting on a killed worker's task must not hold the others up.
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, reviewers)
	var mu sync.Mutex
	busy := map[string]bool{}
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		parked, err := r.starter.ListAwaitingReview(lctx)
		cancel()
		if err != nil {
			continue // the server may be restarting
		}
		for _, p := range parked {
			d := r.byKey[p.Key]
			mu.Lock()
			skip := d == nil || busy[d.key]
			if !skip {
				busy[d.key] = true
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
				r.review(ctx, d)
				mu.Lock()
				delete(busy, d.key)
				mu.Unlock()
				<-sem
			}()
		}
	}
}

func (r *run) review(ctx context.Context, d *delivery) {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	// Visibility lags: the status query says whether it still waits.
	st, err := r.starter.Status(ctx, d.key)
	if err != nil || st.State != workflows.StateAwaitingReview || st.Review == nil {
		return
	}
	if time.Since(st.Review.Requested) < reviewSettle {
		return
	}
	id, found, err := r.findEffect(ctx, d)
	if err != nil {
		r.logf("reviewer: look for %s: %v", d.in.BusinessID, err)
		return
	}
	dec := workflows.ReviewDecision{Decision: workflows.DecisionRetry, Reviewer: "soak",
		Note: "no effect at the destination"}
	if found {
		dec = workflows.ReviewDecision{Decision: workflows.DecisionDelivered, Reviewer: "soak",
			Note: "effect found at the destination", ResourceID: id}
	}
	rec, err := r.starter.Review(ctx, d.key, dec)
	var notAwaiting *starter.NotAwaitingReviewError
	switch {
	case errors.As(err, &notAwaiting):
		// Decided already (a retried review after a lost answer).
	case err != nil:
		r.logf("reviewer: %s: %v (will try again)", d.in.BusinessID, err)
	case rec.Accepted:
		r.mu.Lock()
		r.sum.ReviewsSent++
		r.mu.Unlock()
	}
}

// findEffect looks for the delivery's effect in the destination's store.
func (r *run) findEffect(ctx context.Context, d *delivery) (id string, found bool, err error) {
	effects, err := r.effects(ctx)
	if err != nil {
		return "", false, err
	}
	for _, e := range effects[d.in.BusinessID] {
		if e.dest == d.in.Destination {
			return e.id, true, nil
		}
	}
	return "", false, nil
}

// effect is one effect a destination stored.
type effect struct {
	dest string
	id   string // ticket id or resource id
	key  string // the key stored with it, when the destination stores one
	bid  string
}

// effects reads every destination's own store, by business id.
func (r *run) effects(ctx context.Context) (map[string][]effect, error) {
	out := map[string][]effect{}
	for dest, svc := range sandboxName {
		recs, err := r.sandbox.Records(svc)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			var p struct {
				RequestID string `json:"request_id"`
			}
			_ = json.Unmarshal(rec.Payload, &p)
			out[p.RequestID] = append(out[p.RequestID], effect{dest: dest, id: rec.TicketID, key: rec.Key, bid: p.RequestID})
		}
	}
	rows, err := r.ledgerRows(ctx)
	if err != nil {
		return nil, err
	}
	for _, row := range rows {
		out[row.BusinessID] = append(out[row.BusinessID], effect{dest: DestUnique, id: row.ResourceID, key: row.Key, bid: row.BusinessID})
	}
	return out, nil
}
