package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
)

// A destination's gate: one long-running Destination workflow per
// destination (ID destination-<name>) holds whether attempts may reach it,
// for every worker and across restarts. An operator pauses and resumes it;
// its circuit breaker opens on the failures workers report and lets one
// probe through after a cool-down. Workers read its state from its memo
// (MemoGate) and hold attempts back while it is not closed; deliveries held
// back wait until it releases them. Anyone who can signal may send a report
// or an update, so the breaker's settings and who may pause or resume come
// from the workers' destinations file (ResolveTerms), never from a sender.

// Gate states.
const (
	GateClosed   = "closed"
	GateOpen     = "open"
	GateHalfOpen = "half_open"
	GatePaused   = "paused"
)

// Pause is an operator's pause of a destination.
type Pause struct {
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	Since  time.Time `json:"since"`
	// Until, when set, is when the pause ends by itself.
	Until time.Time `json:"until,omitzero"`
}

// PauseRequest is update pause's argument.
type PauseRequest struct {
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	Until  time.Time `json:"until,omitzero"`
}

// ResumeRequest is update resume's argument.
type ResumeRequest struct {
	By   string `json:"by"`
	Note string `json:"note,omitempty"`
}

// Report is what a worker observed of an attempt, as it tells the
// destination's breaker (signal report).
type Report struct {
	Class contract.Class `json:"class"`
	Key   string         `json:"key,omitempty"`
	Error string         `json:"error,omitempty"`
	// Breaker is read only by gates that started before versionGateTerms,
	// to replay as they ran: workers sent their breaker with each report.
	// Workers send none now, and other gates ignore it.
	Breaker *contract.Breaker `json:"breaker,omitempty"`
	At      time.Time         `json:"at"`
}

// Breaker is a destination's circuit breaker state.
type Breaker struct {
	State       string    `json:"state"`
	Failures    int       `json:"failures,omitempty"`
	WindowStart time.Time `json:"window_start,omitzero"`
	OpenedAt    time.Time `json:"opened_at,omitzero"`
	// ProbeAt is when the probe attempt was let through, in half_open.
	ProbeAt     time.Time `json:"probe_at,omitzero"`
	ProbeKey    string    `json:"probe_key,omitempty"`
	LastFailure string    `json:"last_failure,omitempty"`
	// Config is the destination's breaker in the workers' destinations
	// file, as the gate last resolved it (before versionGateTerms: the
	// latest report's).
	Config *contract.Breaker `json:"config,omitempty"`
}

// ReopensAt is when an open breaker lets a probe through.
func (b Breaker) ReopensAt() time.Time {
	if b.Config == nil {
		return b.OpenedAt
	}
	return b.OpenedAt.Add(b.Config.CoolDown.D())
}

// Transition is one change of a destination's state.
type Transition struct {
	At   time.Time `json:"at"`
	From string    `json:"from"`
	To   string    `json:"to"`
	By   string    `json:"by"`
	Why  string    `json:"why"`
}

// DestinationState is the gate: query state's answer and the memo workers read.
type DestinationState struct {
	Name string `json:"name"`
	// State is the effective one: paused wins over the breaker's.
	State   string    `json:"state"`
	Since   time.Time `json:"since"`
	Paused  *Pause    `json:"paused,omitempty"`
	Breaker Breaker   `json:"breaker"`
	// Recent are the latest reports, newest last.
	Recent      []Report     `json:"recent,omitempty"`
	Transitions []Transition `json:"transitions,omitempty"`
	// Stopped is how the gate's latest run stopped (terminated, canceled,
	// ...), as its readers see it; a running gate never sets it.
	Stopped string `json:"stopped,omitempty"`
}

// Hold says whether an attempt may be sent now: nil and no probe when it
// may; a hold when it must wait; probe when it may go only as the breaker's
// one probe attempt, if the gate grants it (update probe).
func (s DestinationState) Hold(now time.Time) (h *activities.Hold, probe bool) {
	b := s.Breaker
	open := &activities.Hold{State: string(StateCircuitOpen), Since: b.OpenedAt, Until: b.ReopensAt(),
		Reason: fmt.Sprintf("circuit open after %d consecutive failures (last: %s)", b.Failures, b.LastFailure)}
	if s.Stopped != "" && s.State != GateClosed {
		// No gate runs to end the pause, grant a probe or release: held
		// until an operator resumes, looking again on the delivery's timer.
		if s.State == GatePaused && s.Paused != nil {
			return &activities.Hold{State: string(StatePaused), Since: s.Paused.Since,
				Reason: s.Paused.Reason + " (paused by " + s.Paused.By + ")" + s.stoppedNote("paused")}, false
		}
		open.Until, open.Reason = time.Time{}, open.Reason+s.stoppedNote("its breaker was "+s.State)
		return open, false
	}
	switch s.State {
	case GatePaused:
		return &activities.Hold{State: string(StatePaused), Reason: s.Paused.Reason + " (paused by " + s.Paused.By + ")",
			Since: s.Paused.Since, Until: s.Paused.Until}, false
	case GateOpen:
		if now.Before(open.Until) {
			return open, false
		}
		return open, true
	case GateHalfOpen:
		open.Reason, open.Until = "circuit half-open: waiting for the probe attempt's answer", b.ProbeAt.Add(probeTimeout)
		return open, !now.Before(open.Until)
	}
	return nil, false
}

// DestinationInput starts a destination's gate, or carries its state over a
// continue-as-new.
type DestinationInput struct {
	Name  string            `json:"name"`
	State *DestinationState `json:"state,omitempty"`
}

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
	g := &gate{s: DestinationState{Name: in.Name, State: GateClosed, Breaker: Breaker{State: GateClosed}}}
	if in.State != nil {
		g.s = *in.State
	} else {
		g.s.Since = workflow.Now(ctx)
	}
	g.published = g.s.State
	g.trusted = workflow.GetVersion(ctx, versionGateTerms, workflow.DefaultVersion, 1) == 1
	if err := g.setup(ctx); err != nil {
		return DestinationState{}, err
	}
	if g.trusted && in.State != nil && g.s.Breaker.State != GateClosed {
		// Carried over, perhaps from a run that took the reports' breaker.
		if g.s.Breaker.Config = g.configured(ctx); g.s.Breaker.Config == nil {
			g.noBreaker()
			g.dirty = true
		}
	}
	if in.State != nil {
		// A new run's memo starts empty: the workers read it.
		if err := workflow.UpsertMemo(ctx, map[string]any{MemoGate: g.s}); err != nil {
			return DestinationState{}, err
		}
	}
	return g.run(ctx)
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
	if err := workflow.SetQueryHandlerWithOptions(ctx, QueryGate, func() (DestinationState, error) { return g.s, nil },
		workflow.QueryHandlerOptions{Description: "The destination's gate: state, pause, breaker, recent attempts and transitions."}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePause,
		func(ctx workflow.Context, r PauseRequest) (DestinationState, error) {
			if err := g.authorize(ctx, r.By, "pause"); err != nil {
				return g.s, err
			}
			g.s.Paused = &Pause{Reason: r.Reason, By: r.By, Since: workflow.Now(ctx), Until: r.Until}
			g.by, g.why, g.dirty, g.repaused = r.By, r.Reason, true, true
			return g.settle(ctx), nil
		},
		workflow.UpdateHandlerOptions{Description: `Pause the destination: {"reason": "why", "by": "NAME", "until": "RFC 3339 time, optional"}`,
			Validator: func(ctx workflow.Context, r PauseRequest) error {
				var errs []error
				if strings.TrimSpace(r.Reason) == "" || len(r.Reason) > maxPauseReason {
					errs = append(errs, fmt.Errorf("reason: required, at most %d bytes", maxPauseReason))
				}
				if strings.TrimSpace(r.By) == "" || len(r.By) > maxPauseBy {
					errs = append(errs, fmt.Errorf("by: required, who is pausing, at most %d bytes", maxPauseBy))
				}
				if !r.Until.IsZero() && !r.Until.After(workflow.Now(ctx)) {
					errs = append(errs, fmt.Errorf("until: %s is not in the future", r.Until.UTC().Format(time.RFC3339)))
				}
				if err := errors.Join(errs...); err != nil {
					return temporal.NewApplicationError(err.Error(), ErrInvalidGateChange)
				}
				return nil
			}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateResume,
		func(ctx workflow.Context, r ResumeRequest) (DestinationState, error) {
			if err := g.authorize(ctx, r.By, "resume"); err != nil {
				return g.s, err
			}
			g.s.Paused = nil
			g.by, g.why, g.dirty = r.By, "resumed: "+r.Note, true
			if g.trusted && g.s.Breaker.State != GateClosed {
				// An operator's way out of a breaker, whatever its cool-down.
				g.s.Breaker = Breaker{State: GateClosed, Config: g.s.Breaker.Config}
				g.why = "resumed, breaker closed: " + r.Note
			}
			return g.settle(ctx), nil
		},
		workflow.UpdateHandlerOptions{Description: `Resume a paused destination, or close its open breaker: {"by": "NAME", "note": "why"}`,
			Validator: func(_ workflow.Context, r ResumeRequest) error {
				switch {
				case g.s.Paused == nil && g.trusted && g.s.Breaker.State == GateClosed:
					return temporal.NewApplicationError(fmt.Sprintf("destination %s is not paused and its breaker is closed (state %s)", g.s.Name, g.s.State), ErrInvalidGateChange)
				case g.s.Paused == nil && !g.trusted:
					return temporal.NewApplicationError(fmt.Sprintf("destination %s is not paused (state %s)", g.s.Name, g.s.State), ErrInvalidGateChange)
				case strings.TrimSpace(r.By) == "" || len(r.By) > maxPauseBy:
					return temporal.NewApplicationError(fmt.Sprintf("by: required, who is resuming, at most %d bytes", maxPauseBy), ErrInvalidGateChange)
				}
				return nil
			}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateProbe,
		func(ctx workflow.Context, key string) (bool, error) { return g.probe(ctx, key), nil },
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
			g.reporting = true
			g.report(ctx, r)
			g.reporting = false
		}
	})
	return nil
}

// resolve records the workers' current terms for the destination.
func (g *gate) resolve(ctx workflow.Context) error {
	t, err := resolveTerms(ctx, g.s.Name)
	if err != nil {
		return err
	}
	g.terms, g.termsAt = t, workflow.Now(ctx)
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

// authorize refuses a pause or resume by a name the workers' reviewers do
// not list (none listed: anyone), as a review is refused: Temporal does not
// tell the gate who sent an update.
func (g *gate) authorize(ctx workflow.Context, by, what string) error {
	if !g.trusted {
		return nil
	}
	if err := g.resolve(ctx); err != nil {
		return err
	}
	if allowed := g.terms.Reviewers; len(allowed) > 0 && !slices.Contains(allowed, by) {
		return temporal.NewApplicationError(fmt.Sprintf("by: %q may not %s destinations; allowed: %s",
			by, what, strings.Join(allowed, ", ")), ErrInvalidGateChange)
	}
	return nil
}

// noBreaker closes the breaker of a destination that has none.
func (g *gate) noBreaker() {
	if g.s.Breaker.State != GateClosed {
		g.s.Breaker = Breaker{State: GateClosed}
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
	case b.State == GateClosed:
		return true
	}
	if b.State == GateOpen && now.Before(b.ReopensAt()) {
		return false
	}
	if b.State == GateHalfOpen && b.ProbeKey != "" && now.Sub(b.ProbeAt) < probeTimeout {
		return false
	}
	b.State, b.ProbeKey, b.ProbeAt = GateHalfOpen, key, now
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
		case GateClosed:
			if b.Failures == 0 || now.Sub(b.WindowStart) > cfg.Window.D() {
				b.Failures, b.WindowStart = 0, now
			}
			b.Failures++
			if b.Failures >= cfg.Failures {
				b.State, b.OpenedAt = GateOpen, now
				g.by, g.why = "breaker", fmt.Sprintf("%d consecutive failures within %s (last: %s)", b.Failures, cfg.Window, b.LastFailure)
			}
		case GateHalfOpen:
			if r.Key == b.ProbeKey {
				b.State, b.OpenedAt, b.ProbeKey = GateOpen, now, ""
				g.by, g.why = "breaker", "the probe failed: "+b.LastFailure
			}
		}
	case r.Class.Answered():
		if b.State == GateHalfOpen && r.Key != b.ProbeKey {
			break // a straggler from before the breaker opened
		}
		if b.State != GateClosed {
			g.by, g.why = "breaker", fmt.Sprintf("the destination answered (%s)", r.Class)
		}
		*b = Breaker{State: GateClosed, Config: cfg}
	}
	g.dirty = true
	g.settle(ctx)
}

// settle computes the effective state and records a transition.
func (g *gate) settle(ctx workflow.Context) DestinationState {
	state := g.s.Breaker.State
	if g.s.Paused != nil {
		state = GatePaused
	}
	if state != g.s.State {
		now := workflow.Now(ctx)
		g.s.Transitions = append(g.s.Transitions, Transition{At: now, From: g.s.State, To: state, By: g.by, Why: g.why})
		if n := len(g.s.Transitions); n > maxTransitions {
			g.s.Transitions = g.s.Transitions[n-maxTransitions:]
		}
		g.s.State, g.s.Since = state, now
	}
	return g.s
}

func (g *gate) run(ctx workflow.Context) (DestinationState, error) {
	for {
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
			if _, err := awaitClosingTimer(ctx, wait, "gate: "+g.s.State+" until "+next.UTC().Format(time.RFC3339), wake); err != nil {
				return g.s, err
			}
		}
		now := workflow.Now(ctx)
		if p := g.s.Paused; p != nil && !p.Until.IsZero() && !now.Before(p.Until) {
			g.s.Paused = nil
			g.by, g.why = "courier", "the pause's until passed"
		}
		g.dirty = false
		from := g.published
		s := g.settle(ctx)
		switch {
		case s.State != from:
			if err := g.publish(ctx, from); err != nil {
				return g.s, err
			}
		case g.repaused:
			if err := workflow.UpsertMemo(ctx, map[string]any{MemoGate: g.s}); err != nil {
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
			return g.s, workflow.NewContinueAsNewError(ctx, DestinationWorkflowType, DestinationInput{Name: g.s.Name, State: &g.s})
		}
	}
}

// publish tells the workers (the memo they read), the log, the metrics, the
// notifier (when the breaker opens) and, when attempts may go again, the
// deliveries waiting on it.
func (g *gate) publish(ctx workflow.Context, from string) error {
	g.published = g.s.State
	if err := workflow.UpsertMemo(ctx, map[string]any{MemoGate: g.s}); err != nil {
		return fmt.Errorf("upsert the gate's memo: %w", err)
	}
	t := g.s.Transitions[len(g.s.Transitions)-1]
	g.logger(ctx).Warn("destination gate changed", "from", from, "to", g.s.State, "by", t.By, "why", t.Why)
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"destination": g.s.Name, "state": g.s.State}).
		Counter(MetricGateTransitions).Inc(1)
	switch {
	case g.s.State == GateOpen:
		// Told beside the gate's work: a notifier that is down holds nothing back.
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 30 * time.Second, Summary: "notify: breaker open at " + g.s.Name,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, MaximumInterval: time.Minute, MaximumAttempts: 5},
		})
		workflow.ExecuteActivity(actx, a.NotifyGate, activities.GateNotice{Destination: g.s.Name, State: g.s.State, Since: g.s.Since, Why: t.Why})
	case g.s.State == GateClosed || from == GatePaused:
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
