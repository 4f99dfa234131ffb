package gate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/workflows"
)

// a names the activities; the worker registers a real *Activities.
var a *activities.Activities

const (
	// maxRecent and maxTransitions bound what the gate keeps.
	maxRecent      = 10
	maxTransitions = 20
	// probeTimeout lets another probe through when one was granted and never
	// reported (its worker died).
	probeTimeout = 2 * time.Minute
	// gateHistoryLimit is when the gate continues as new: reports arrive on
	// every failed attempt during an outage.
	gateHistoryLimit = 2000
	// maxPauseReason and maxPauseBy bound a pause's reason and who paused.
	maxPauseReason = 512
	maxPauseBy     = 64
	// termsFresh is how long a report is decided from the terms the gate
	// last resolved: an outage's burst of reports costs one marker.
	termsFresh = time.Minute
)

// Destination is a destination's gate workflow.
func Destination(ctx workflow.Context, in DestinationInput) (DestinationState, error) {
	info := workflow.GetInfo(ctx)
	own := workflow.GetVersion(ctx, versionGateOwn, workflow.DefaultVersion, 1) == 1
	if own && info.WorkflowExecution.ID != WorkflowID(in.Name) {
		// Refused before it publishes anything: a gate holds only the
		// destination its workflow ID names.
		return DestinationState{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"gate refused: its name %q is not the one its workflow ID %s carries; it holds nothing. "+
				"A destination's gate is %s<name> with that name (courier destination pause starts it)",
			in.Name, info.WorkflowExecution.ID, IDPrefix), ErrWrongName, nil)
	}
	g := &gate{s: DestinationState{Name: in.Name, State: Closed, Breaker: Breaker{State: Closed}}, own: own}
	// Input state is a gate's own only when one of its runs continued as
	// new into this one (the server records it); whoever else starts a
	// run, the gate recovers its state itself.
	carried := in.State != nil && (!own || info.ContinuedExecutionRunID != "")
	if carried {
		g.s = *in.State
	} else {
		g.s.Since = workflow.Now(ctx)
	}
	g.recovering = own && !carried
	g.trusted = workflow.GetVersion(ctx, versionGateTerms, workflow.DefaultVersion, 1) == 1
	g.memoAll = workflow.GetVersion(ctx, versionGateMemo, workflow.DefaultVersion, 1) == 1
	g.proved = workflow.GetVersion(ctx, versionGateProof, workflow.DefaultVersion, 1) == 1
	if err := g.setup(ctx); err != nil {
		return DestinationState{}, err
	}
	recovered := false
	if g.recovering {
		st, err := g.recoverState(ctx)
		if err != nil {
			return DestinationState{}, err
		}
		if recovered = st != nil; recovered {
			g.s = *st
			g.s.Name, g.s.Stopped, g.s.Run = in.Name, "", ""
		}
		g.recovering = false
	}
	g.published = g.s.State
	if g.trusted && (carried || recovered) && g.s.Breaker.State != Closed {
		// Carried over, perhaps from a run that took the reports' breaker.
		if g.s.Breaker.Config = g.configured(ctx); g.s.Breaker.Config == nil {
			g.noBreaker()
			g.dirty = true
		}
	}
	if in.State != nil || g.memoAll {
		// A new run's memo starts empty: the workers read it.
		if err := g.upsertMemo(ctx); err != nil {
			return DestinationState{}, err
		}
	}
	return g.run(ctx)
}

// recoverState is what the gate's earlier runs last published, as the
// worker reads their server-recorded memos (nil: none, a closed gate); a
// pause that a stopped run held stays until an operator ends it.
func (g *gate) recoverState(ctx workflow.Context) (*DestinationState, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, Summary: "recover the gate's state from its earlier runs",
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute, MaximumAttempts: 20},
	})
	var st *DestinationState
	if err := workflow.ExecuteActivity(actx, ActivityRecover).Get(ctx, &st); err != nil {
		// Readers then read the runs before this one, as this run would have.
		return nil, fmt.Errorf("the gate could not recover its state from its earlier runs, which still decide it: %w", err)
	}
	if st != nil && !st.Valid() {
		return nil, nil
	}
	return st, nil
}

type gate struct {
	s DestinationState
	// published is the state last written to the memo and acted on.
	published string
	// by and why explain the next transition.
	by, why string
	dirty   bool
	// repaused: a pause changed its reason or end without a transition.
	repaused bool
	// trusted: this run is at versionGateTerms.
	trusted bool
	// own: this run is at versionGateOwn; recovering: it has not yet its
	// state, and no update or report decides until it has.
	own, recovering bool
	// memoAll: this run is at versionGateMemo.
	memoAll bool
	// proved: this run is at versionGateProof; principal and policy are
	// the verified proof behind the next transition.
	proved            bool
	principal, policy string
	// terms are the workers' terms for the destination, resolved at termsAt.
	terms   activities.Terms
	termsAt time.Time
	// reports are the workers' reports; reporting: one is being decided.
	reports   workflow.ReceiveChannel
	reporting bool
}

func (g *gate) logger(ctx workflow.Context) log.Logger {
	return log.With(workflow.GetLogger(ctx), "destination", g.s.Name)
}

func (g *gate) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, QueryState, func() (DestinationState, error) { return g.s, nil },
		workflow.QueryHandlerOptions{Description: "The destination's gate: state, pause, breaker, recent attempts and transitions."}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePause,
		func(ctx workflow.Context, r PauseRequest) (DestinationState, error) {
			if err := g.ready(ctx); err != nil {
				return g.s, err
			}
			by, err := g.authorize(ctx, r.By, r.Proof, reviewproof.GateChange{Action: reviewproof.ActionPause, Reason: r.Reason, Until: r.Until})
			if err != nil {
				return g.s, err
			}
			g.s.Paused = &Pause{Reason: r.Reason, By: by, Since: workflow.Now(ctx), Until: r.Until}
			g.by, g.why, g.dirty, g.repaused = by, r.Reason, true, true
			return g.settle(ctx), nil
		},
		workflow.UpdateHandlerOptions{Description: `Pause the destination: {"reason": "why", "by": "NAME", "until": "RFC 3339 time, optional"}; ` +
			`where its reviewers have keys, paste what courier destination pause ... --key FILE --print prints`,
			Validator: func(ctx workflow.Context, r PauseRequest) error {
				var errs []error
				if strings.TrimSpace(r.Reason) == "" || len(r.Reason) > maxPauseReason {
					errs = append(errs, fmt.Errorf("reason: required, at most %d bytes", maxPauseReason))
				}
				if strings.TrimSpace(r.By) == "" || len(r.By) > maxPauseBy {
					errs = append(errs, fmt.Errorf("by: required, who is pausing, at most %d bytes", maxPauseBy))
				} else if workflows.IsPlaceholder(r.By) {
					errs = append(errs, placeholderBy(r.By))
				}
				if !r.Until.IsZero() && !r.Until.After(workflow.Now(ctx)) {
					errs = append(errs, fmt.Errorf("until: %s is not in the future", r.Until.UTC().Format(time.RFC3339)))
				}
				if err := errors.Join(errs...); err != nil {
					return temporal.NewApplicationError(err.Error(), ErrInvalidChange)
				}
				return nil
			}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateResume,
		func(ctx workflow.Context, r ResumeRequest) (DestinationState, error) {
			if err := g.ready(ctx); err != nil {
				return g.s, err
			}
			if g.own {
				// Its validator ran before the gate had its state, perhaps.
				if err := g.resumable(); err != nil {
					return g.s, err
				}
			}
			by, err := g.authorize(ctx, r.By, r.Proof, reviewproof.GateChange{Action: reviewproof.ActionResume, Reason: r.Note})
			if err != nil {
				return g.s, err
			}
			g.s.Paused = nil
			g.by, g.why, g.dirty = by, "resumed: "+r.Note, true
			if g.trusted && g.s.Breaker.State != Closed {
				// An operator's way out of a breaker, whatever its cool-down.
				g.s.Breaker = Breaker{State: Closed, Config: g.s.Breaker.Config}
				g.why = "resumed, breaker closed: " + r.Note
			}
			return g.settle(ctx), nil
		},
		workflow.UpdateHandlerOptions{Description: `Resume a paused destination, or close its open breaker: {"by": "NAME", "note": "why"}; ` +
			`where its reviewers have keys, paste what courier destination resume ... --key FILE --print prints`,
			Validator: func(_ workflow.Context, r ResumeRequest) error {
				if !g.recovering {
					if err := g.resumable(); err != nil {
						return err
					}
				}
				switch {
				case strings.TrimSpace(r.By) == "" || len(r.By) > maxPauseBy:
					return temporal.NewApplicationError(fmt.Sprintf("by: required, who is resuming, at most %d bytes", maxPauseBy), ErrInvalidChange)
				case workflows.IsPlaceholder(r.By):
					return temporal.NewApplicationError(placeholderBy(r.By).Error(), ErrInvalidChange)
				}
				return nil
			}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateProbe,
		func(ctx workflow.Context, key string) (bool, error) {
			if err := g.ready(ctx); err != nil {
				return false, err
			}
			return g.probe(ctx, key), nil
		},
		workflow.UpdateHandlerOptions{Description: "A worker asks to send the one probe attempt of a half-open breaker."}); err != nil {
		return err
	}
	g.reports = workflow.GetSignalChannelWithOptions(ctx, SignalReport, workflow.SignalChannelOptions{
		Description: "A worker reports an attempt's class to the breaker.",
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var r Report
			g.reports.Receive(ctx, &r)
			if g.ready(ctx) != nil {
				return
			}
			g.reporting = true
			g.report(ctx, r)
			g.reporting = false
		}
	})
	return nil
}

// ready waits until the gate has its state: a run that recovers it decides
// nothing before.
func (g *gate) ready(ctx workflow.Context) error {
	if !g.recovering {
		return nil
	}
	return workflow.Await(ctx, func() bool { return !g.recovering })
}

// resumable says why there is nothing to resume; nil when there is.
func (g *gate) resumable() error {
	switch {
	case g.s.Paused == nil && g.trusted && g.s.Breaker.State == Closed:
		return temporal.NewApplicationError(fmt.Sprintf("destination %s is not paused and its breaker is closed (state %s)", g.s.Name, g.s.State), ErrInvalidChange)
	case g.s.Paused == nil && !g.trusted:
		return temporal.NewApplicationError(fmt.Sprintf("destination %s is not paused (state %s)", g.s.Name, g.s.State), ErrInvalidChange)
	}
	return nil
}

// placeholderBy refuses a command's placeholder pasted as who changes the
// gate. Validators run only on new updates, so no history changes.
func placeholderBy(by string) error {
	return fmt.Errorf("by: %q is the command's placeholder: put your own name", by)
}

// settle computes the effective state and records a transition.
func (g *gate) settle(ctx workflow.Context) DestinationState {
	state := g.s.Breaker.State
	if g.s.Paused != nil {
		state = Paused
	}
	if state != g.s.State {
		now := workflow.Now(ctx)
		g.s.Transitions = append(g.s.Transitions, Transition{At: now, From: g.s.State, To: state, By: g.by, Why: g.why,
			Principal: g.principal, Policy: g.policy})
		if n := len(g.s.Transitions); n > maxTransitions {
			g.s.Transitions = g.s.Transitions[n-maxTransitions:]
		}
		g.s.State, g.s.Since = state, now
	}
	// A proof explains the change it was sent with, and no later one.
	g.principal, g.policy = "", ""
	return g.s
}

func (g *gate) run(ctx workflow.Context) (DestinationState, error) {
	for {
		// For the web UI; no command. Every change wakes this loop.
		workflow.SetCurrentDetails(ctx, details(g.s, workflow.GetInfo(ctx).Namespace))
		// The one timer is a pause's end. An open breaker needs none: the
		// first worker to look after its cool-down asks for the probe.
		var next time.Time
		if p := g.s.Paused; p != nil && !p.Until.IsZero() {
			next = p.Until
		}
		wake := func() bool { return g.dirty || workflow.GetInfo(ctx).GetContinueAsNewSuggested() }
		wait := next.Sub(workflow.Now(ctx))
		switch {
		case next.IsZero():
			if err := workflow.Await(ctx, wake); err != nil {
				return g.s, err
			}
		case wait > 0:
			if _, err := workflows.AwaitClosingTimer(ctx, wait, "gate: "+g.s.State+" until "+next.UTC().Format(time.RFC3339), wake); err != nil {
				return g.s, err
			}
		}
		now := workflow.Now(ctx)
		if p := g.s.Paused; p != nil && !p.Until.IsZero() && !now.Before(p.Until) {
			g.s.Paused = nil
			g.by, g.why = "courier", "the pause's until passed"
		}
		changed := g.dirty
		g.dirty = false
		from := g.published
		s := g.settle(ctx)
		switch {
		case s.State != from:
			if err := g.publish(ctx, from); err != nil {
				return g.s, err
			}
		case g.repaused || g.memoAll && changed:
			if err := g.upsertMemo(ctx); err != nil {
				return g.s, err
			}
		}
		g.repaused = false
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() || workflow.GetInfo(ctx).GetCurrentHistoryLength() > gateHistoryLimit {
			// A report being decided, or not yet received, would be lost.
			if err := workflow.Await(ctx, func() bool {
				return workflow.AllHandlersFinished(ctx) && !g.reporting && g.reports.Len() == 0
			}); err != nil {
				return g.s, err
			}
			return g.s, workflow.NewContinueAsNewError(ctx, WorkflowType, DestinationInput{Name: g.s.Name, State: &g.s})
		}
	}
}

// upsertMemo writes the gate to the memo, which is all its readers read.
func (g *gate) upsertMemo(ctx workflow.Context) error {
	if g.own {
		g.s.Run = workflow.GetInfo(ctx).WorkflowExecution.RunID
	}
	return workflow.UpsertMemo(ctx, map[string]any{Memo: g.s})
}

// publish tells the workers (the memo they read), the log, the metrics, the
// notifier (when the breaker opens) and, when attempts may go again, the
// deliveries waiting on it.
func (g *gate) publish(ctx workflow.Context, from string) error {
	g.published = g.s.State
	if err := g.upsertMemo(ctx); err != nil {
		return fmt.Errorf("upsert the gate's memo: %w", err)
	}
	t := g.s.Transitions[len(g.s.Transitions)-1]
	g.logger(ctx).Warn("destination gate changed", "from", from, "to", g.s.State, "by", t.By, "why", t.Why)
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"destination": g.s.Name, "state": g.s.State}).
		Counter(MetricTransitions).Inc(1)
	switch {
	case g.s.State == Open:
		// Told beside the gate's work: a notifier that is down holds nothing back.
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 30 * time.Second, Summary: "notify: breaker open at " + g.s.Name,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, MaximumInterval: time.Minute, MaximumAttempts: 5},
		})
		workflow.ExecuteActivity(actx, a.NotifyGate, activities.GateNotice{Destination: g.s.Name, State: g.s.State, Since: g.s.Since, Why: t.Why})
	case g.s.State == Closed || from == Paused:
		// One batch signal; the attempts it lets go then run at the
		// destination's rate limit (its task queue's). Those still held (an
		// open breaker) are told so at their next look.
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute, Summary: "release the deliveries held at " + g.s.Name,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, MaximumInterval: time.Minute, MaximumAttempts: 10},
		})
		if err := workflow.ExecuteActivity(actx, a.ReleaseHeld, g.s.Name).Get(ctx, nil); err != nil {
			// The held deliveries look again on their own timers.
			g.logger(ctx).Error("releasing held deliveries failed", "error", err)
		}
	}
	return nil
}
