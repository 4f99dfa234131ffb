package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

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
// is over, and to another only if that one never reported; at a gate from
// versionGateOwn, only to a delivery whose attempt is under way at this
// destination, as the server records it.
func (g *gate) probe(ctx workflow.Context, key string) bool {
	b := &g.s.Breaker
	switch {
	case g.s.Paused != nil:
		return false
	case b.State == Closed:
		return true
	}
	if !g.probeDue(workflow.Now(ctx)) {
		return false
	}
	if g.own {
		if why := g.check(ctx, ActivityVerifyProbe, key); why != "" {
			g.logger(ctx).Warn("probe refused: not asked for a Delivery's attempt here", "key", key, "why", why)
			return false
		}
		if b.State == Closed || !g.probeDue(workflow.Now(ctx)) || g.s.Paused != nil {
			// It changed while the probe was checked.
			return b.State == Closed && g.s.Paused == nil
		}
	}
	now := workflow.Now(ctx)
	b.State, b.ProbeKey, b.ProbeAt = HalfOpen, key, now
	g.by, g.why, g.dirty = "breaker", "cool-down over: one probe attempt ("+key+")", true
	g.settle(ctx)
	return true
}

// probeDue says whether the breaker lets a probe through now.
func (g *gate) probeDue(now time.Time) bool {
	b := g.s.Breaker
	switch b.State {
	case Open:
		return !now.Before(b.ReopensAt())
	case HalfOpen:
		return b.ProbeKey == "" || now.Sub(b.ProbeAt) >= probeTimeout
	}
	return false
}

// check runs a verifying activity (ActivityVerifyReport or
// ActivityVerifyProbe) and returns why what it checked does not hold; ""
// when it holds. One that cannot answer counts as not holding.
func (g *gate) check(ctx workflow.Context, activity string, arg any) string {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 3 * time.Minute, HeartbeatTimeout: 30 * time.Second,
		Summary:     "check against the Delivery's history: " + activity,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second, MaximumAttempts: 3},
	})
	var why string
	if err := workflow.ExecuteActivity(actx, activity, arg).Get(ctx, &why); err != nil {
		return "could not be checked: " + err.Error()
	}
	return why
}

// moves says whether report r would change the breaker's state (open it,
// close it, or reopen it on the probe's failure), under breaker cfg.
func (g *gate) moves(r Report, cfg *contract.Breaker, now time.Time) bool {
	b := g.s.Breaker
	probe := b.State == HalfOpen && r.Key == b.ProbeKey
	switch {
	case cfg == nil:
		return false
	case r.Class.FoundDown():
		failures := b.Failures
		if failures == 0 || now.Sub(b.WindowStart) > cfg.Window.D() {
			failures = 0
		}
		return probe || b.State == Closed && failures+1 >= cfg.Failures
	case r.Class.Answered():
		return probe || b.State == Open
	}
	return false
}

// report moves the breaker on an attempt's class. At a gate from
// versionGateOwn a report that would change the breaker's state counts
// only when its Delivery recorded that class for the attempt it names:
// anyone may signal, only a Courier worker's attempt is in a Delivery's
// history.
func (g *gate) report(ctx workflow.Context, r Report) {
	cfg := r.Breaker
	if g.trusted {
		r.Breaker = nil
		cfg = g.configured(ctx)
	}
	if g.own && g.moves(r, cfg, workflow.Now(ctx)) {
		if why := g.check(ctx, ActivityVerifyReport, r); why != "" {
			g.logger(ctx).Warn("report not counted: its Delivery did not record it", "class", r.Class, "key", r.Key, "why", why)
			return
		}
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
