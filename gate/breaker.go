package gate

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/workflows"
)

// resolve records the workers' current terms for the destination.
func (g *gate) resolve(ctx workflow.Context) error {
	t, err := workflows.ResolveTerms(ctx, g.s.Name)
	if err != nil {
		return err
	}
	g.terms, g.termsAt = t, workflow.Now(ctx)
	if g.proved && g.s.Signed != (t.Policy != nil) {
		g.s.Signed, g.dirty = t.Policy != nil, true
	}
	return nil
}

// configured is the destination's breaker in the workers' destinations
// file, from terms at most termsFresh old; nil: it has none.
func (g *gate) configured(ctx workflow.Context) *contract.Breaker {
	if g.termsAt.IsZero() || workflow.Now(ctx).Sub(g.termsAt) >= termsFresh {
		if err := g.resolve(ctx); err != nil {
			// Decided from the last terms resolved, if any.
			g.logger(ctx).Error("resolve the destination's breaker", "error", err)
		}
	}
	if g.terms.Contract == nil {
		return nil
	}
	return g.terms.Contract.Breaker
}

// authorize says who makes change c, a pause or resume by by with proof:
// where the workers' reviewers have keys, the principal its proof verifies
// against them (see verify); else by, refused when the reviewers do not list
// it (none listed: anyone), as a review is refused: Temporal does not tell
// the gate who sent an update.
func (g *gate) authorize(ctx workflow.Context, by, proof string, c reviewproof.GateChange) (string, error) {
	if !g.trusted {
		return by, nil
	}
	if err := g.resolve(ctx); err != nil {
		return "", err
	}
	if g.proved && g.terms.Policy != nil {
		return g.verify(ctx, proof, c)
	}
	if allowed := g.terms.Reviewers; len(allowed) > 0 && !slices.Contains(allowed, by) {
		return "", temporal.NewApplicationError(fmt.Sprintf("by: %q may not %s destinations; allowed: %s",
			by, c.Action, strings.Join(allowed, ", ")), ErrInvalidChange)
	}
	return by, nil
}

// noBreaker closes the breaker of a destination that has none.
func (g *gate) noBreaker() {
	if g.s.Breaker.State != Closed {
		g.s.Breaker = Breaker{State: Closed}
		g.by, g.why = "breaker", "no breaker configured"
	}
}

// probe grants the probe to the first worker that asks once the cool-down
// is over, and to another only if that one never reported.
func (g *gate) probe(ctx workflow.Context, key string) bool {
	now := workflow.Now(ctx)
	b := &g.s.Breaker
	switch {
	case g.s.Paused != nil:
		return false
	case b.State == Closed:
		return true
	}
	if b.State == Open && now.Before(b.ReopensAt()) {
		return false
	}
	if b.State == HalfOpen && b.ProbeKey != "" && now.Sub(b.ProbeAt) < probeTimeout {
		return false
	}
	b.State, b.ProbeKey, b.ProbeAt = HalfOpen, key, now
	g.by, g.why, g.dirty = "breaker", "cool-down over: one probe attempt ("+key+")", true
	g.settle(ctx)
	return true
}

// report moves the breaker on an attempt's class.
func (g *gate) report(ctx workflow.Context, r Report) {
	cfg := r.Breaker
	if g.trusted {
		r.Breaker = nil
		cfg = g.configured(ctx)
	}
	now := workflow.Now(ctx)
	g.s.Recent = append(g.s.Recent, r)
	if n := len(g.s.Recent); n > maxRecent {
		g.s.Recent = g.s.Recent[n-maxRecent:]
	}
	b := &g.s.Breaker
	b.Config = cfg
	switch {
	case cfg == nil:
		// The workers have no breaker for it (any more): it is closed.
		g.noBreaker()
	case r.Class.FoundDown():
		b.LastFailure = string(r.Class)
		if r.Error != "" {
			b.LastFailure += ": " + r.Error
		}
		switch b.State {
		case Closed:
			if b.Failures == 0 || now.Sub(b.WindowStart) > cfg.Window.D() {
				b.Failures, b.WindowStart = 0, now
			}
			b.Failures++
			if b.Failures >= cfg.Failures {
				b.State, b.OpenedAt = Open, now
				g.by, g.why = "breaker", fmt.Sprintf("%d consecutive failures within %s (last: %s)", b.Failures, cfg.Window, b.LastFailure)
			}
		case HalfOpen:
			if r.Key == b.ProbeKey {
				b.State, b.OpenedAt, b.ProbeKey = Open, now, ""
				g.by, g.why = "breaker", "the probe failed: "+b.LastFailure
			}
		}
	case r.Class.Answered():
		if b.State == HalfOpen && r.Key != b.ProbeKey {
			break // a straggler from before the breaker opened
		}
		if b.State != Closed {
			g.by, g.why = "breaker", fmt.Sprintf("the destination answered (%s)", r.Class)
		}
		*b = Breaker{State: Closed, Config: cfg}
	}
	g.dirty = true
	g.settle(ctx)
}
