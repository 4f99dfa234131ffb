// Package faults injects transport faults around a destination adapter, for
// the lab and the tests: a decorator, so that production adapters carry no
// test hooks. Tests only; no product package imports it.
package faults

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
)

// Adapter wraps a destination adapter with injectable faults.
type Adapter struct {
	destination.Adapter
	// AfterEffect, when set, is called right after the wrapped adapter
	// reports a new effect (for SQL: right after COMMIT), before the attempt
	// reports it: a test's look at the store between the commit and the
	// report, or its process exiting there (sqldest's crash test). Set it
	// before the first Deliver.
	AfterEffect func()
	lostAcks    atomic.Int64
}

// Wrap decorates ad.
func Wrap(ad destination.Adapter) *Adapter { return &Adapter{Adapter: ad} }

// LoseAcks makes the next n new effects report unknown_outcome
// ("acknowledgement lost after commit"), as if the connection dropped right
// after the effect was stored. The effects are stored. Safe for concurrent use.
func (a *Adapter) LoseAcks(n int) { a.lostAcks.Store(int64(max(n, 0))) }

// Deliver makes the wrapped attempt, then applies the faults.
func (a *Adapter) Deliver(ctx context.Context, req destination.Request) destination.Outcome {
	out := a.Adapter.Deliver(ctx, req)
	if out.Class != contract.ClassCreated {
		return out
	}
	if a.AfterEffect != nil {
		a.AfterEffect()
	}
	if a.takeLostAck() {
		return destination.Outcome{Class: contract.ClassUnknown,
			Error: fmt.Sprintf("acknowledgement lost after commit of key %s (injected fault)", req.Key)}
	}
	return out
}

// Lookup asks the wrapped adapter's Lookup, untouched.
func (a *Adapter) Lookup(ctx context.Context, req destination.Request) (destination.Found, error) {
	lk, ok := a.Adapter.(destination.Lookuper)
	if !ok {
		return destination.Found{}, fmt.Errorf("the wrapped adapter has no Lookup: %w", destination.ErrUnreadable)
	}
	return lk.Lookup(ctx, req)
}

func (a *Adapter) takeLostAck() bool {
	for {
		n := a.lostAcks.Load()
		if n <= 0 {
			return false
		}
		if a.lostAcks.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
