package destinationtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/abde64c9/courier/destination"
)

// fault is what the kit does around the adapter for one key.
type fault int

const (
	// loseResponse: the first attempt reaches the adapter; when it reports
	// a new effect, the answer is lost (unknown outcome).
	loseResponse fault = iota + 1
	// timeoutBefore: the first attempt never reaches the adapter and ends
	// in a timeout (unknown outcome).
	timeoutBefore
	// crashAfterCommit: the first attempt's context ends as soon as the
	// effect exists, as when its worker dies; the adapter's own answer
	// stands.
	crashAfterCommit
	// repeatLater: as loseResponse, and the second attempt reaches the
	// adapter only once wait has passed since the first one's effect.
	repeatLater
	// throttleFirst: the first attempt never reaches the adapter and is
	// throttled for wait; the second loses its response, as loseResponse.
	throttleFirst
)

// plan is the fault for one key and what happened to it.
type plan struct {
	fault fault
	wait  time.Duration

	calls int
	// first is the receipt of the effect the adapter reported, and effects
	// what Count said right after it.
	first   *destination.Receipt
	effects int
	at      time.Time
	// answered is the adapter's answer to a crashed attempt, and late how
	// long after its context ended it came.
	answered destination.Outcome
	canceled bool
	late     time.Duration
}

// faulty wraps the adapter under test with the faults the cases plan by key;
// a key without a plan goes through untouched.
type faulty struct {
	inner destination.Adapter
	count func(ctx context.Context, key string) (int, error)

	mu    sync.Mutex
	plans map[string]*plan
}

// planFor sets the fault of key.
func (f *faulty) planFor(key string, p *plan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plans[key] = p
}

// observed returns a copy of key's plan as it stands.
func (f *faulty) observed(key string) plan {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.plans[key]; p != nil {
		return *p
	}
	return plan{}
}

func (f *faulty) Deliver(ctx context.Context, req destination.Request) destination.Outcome {
	f.mu.Lock()
	p := f.plans[req.Key]
	call := 0
	var first time.Time
	if p != nil {
		p.calls++
		call, first = p.calls, p.at
	}
	f.mu.Unlock()
	if p == nil {
		return f.inner.Deliver(ctx, req)
	}
	switch {
	case p.fault == timeoutBefore && call == 1:
		return destination.Outcome{Class: destination.Unknown,
			Error: "no answer within the attempt's time (injected: the request never reached the adapter)"}
	case p.fault == throttleFirst && call == 1:
		return destination.Outcome{Class: destination.Throttled, RetryAfter: p.wait,
			Error: "throttled (injected: the request never reached the adapter)"}
	case p.fault == crashAfterCommit && call == 1:
		return f.crash(ctx, req, p)
	case p.fault == repeatLater && call == 2:
		t := time.NewTimer(time.Until(first.Add(p.wait)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return destination.Failed(ctx.Err(), false)
		}
	}
	out := f.inner.Deliver(ctx, req)
	lose := call == 1 && (p.fault == loseResponse || p.fault == repeatLater) ||
		call == 2 && p.fault == throttleFirst
	if !lose || out.Class != destination.Created {
		return out
	}
	f.committed(ctx, req.Key, p, out.Receipt)
	return destination.Outcome{Class: destination.Unknown,
		Error: fmt.Sprintf("response lost after the effect committed (injected) for key %s", req.Key)}
}

// committed records the effect an attempt made before its answer was lost.
func (f *faulty) committed(ctx context.Context, key string, p *plan, r *destination.Receipt) {
	n, _ := f.count(ctx, key)
	f.mu.Lock()
	defer f.mu.Unlock()
	p.first, p.effects, p.at = r, n, time.Now()
}

// crashPoll paces the look for the effect while a crashed attempt runs.
const crashPoll = 2 * time.Millisecond

// crash runs the attempt under a context that ends as soon as Count sees
// the effect, and keeps whatever the adapter then answers.
func (f *faulty) crash(ctx context.Context, req destination.Request, p *plan) destination.Outcome {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	var canceledAt time.Time
	var watched sync.WaitGroup
	watched.Go(func() {
		tick := time.NewTicker(crashPoll)
		defer tick.Stop()
		for {
			if n, err := f.count(ctx, req.Key); err == nil && n > 0 {
				canceledAt = time.Now()
				cancel()
				return
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	out := f.inner.Deliver(actx, req)
	close(done)
	watched.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	p.answered, p.canceled = out, !canceledAt.IsZero()
	if p.canceled {
		p.late = time.Since(canceledAt)
	}
	if out.Class == destination.Created {
		p.first = out.Receipt
	}
	return out
}

func (f *faulty) Lookup(ctx context.Context, req destination.Request) (destination.Found, error) {
	lk, ok := f.inner.(destination.Lookuper)
	if !ok {
		return destination.Found{}, fmt.Errorf("%T has no Lookup: %w", f.inner, destination.ErrUnreadable)
	}
	return lk.Lookup(ctx, req)
}
