// Package gate is a destination's gate: one long-running workflow per
// destination (ID destination-<name>) that holds whether attempts may reach
// it, for every worker and across restarts. An operator pauses and resumes
// it; its circuit breaker opens on the failures workers report and lets one
// probe through after a cool-down. Workers read its state from its memo
// (Memo) and hold attempts back while it is not closed; deliveries held
// back wait until it releases them. Anyone who can signal may send a report
// or an update, so the breaker's settings and who may pause or resume come
// from the workers' destinations file (ResolveTerms), never from a sender,
// and a report or probe that moves the breaker is checked against the
// Delivery it names. Anyone may start a run too: its state is the gate's
// own (carried over its own continue-as-new, else recovered from what its
// earlier runs published), and each memo it publishes names its run.
//
// This package is the workflow, its types and names, all deterministic;
// package gateclient is its readers, starters and the workers' cache. The
// worker registers it; the starter and the commands import its types.
package gate

import (
	"fmt"
	"time"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/workflows"
)

// Gate states.
const (
	Closed   = "closed"
	Open     = "open"
	HalfOpen = "half_open"
	Paused   = "paused"
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
	// Proof is required where the destination's reviewers have keys (see
	// reviewproof.SignGate); By is then the verified principal's.
	Proof string `json:"proof,omitempty"`
}

// ResumeRequest is update resume's argument.
type ResumeRequest struct {
	By    string `json:"by"`
	Note  string `json:"note,omitempty"`
	Proof string `json:"proof,omitempty"`
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
	// Attempt is the attempt reported, as the worker's activity info names
	// it: a gate from versionGateOwn on counts a report that moves its
	// breaker only when that attempt's Delivery recorded the class
	// reported (activity VerifyReport).
	Attempt *AttemptRef `json:"attempt,omitempty"`
}

// AttemptRef names one Attempt activity of a Delivery run.
type AttemptRef struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	ActivityID string `json:"activity_id"`
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
	// Principal is who a verified proof says made the change (By then
	// names it too), and Policy the rule of the destination's reviewers
	// that allowed it; both empty when no proof was required.
	Principal string `json:"principal,omitempty"`
	Policy    string `json:"policy,omitempty"`
}

// DestinationState is the gate: the memo every reader reads, and query
// state's answer (for the web UI).
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
	// Signed: the destination's reviewers have keys, so a pause or resume
	// carries a proof (as of the terms the gate last resolved).
	Signed bool `json:"signed,omitempty"`
	// Run is the run of the gate that published this state (gates from
	// versionGateOwn on): a starter cannot know a run's ID before it
	// starts, so a memo that names its own run was written by that run's
	// gate, not set by whoever started it (see Genuine).
	Run string `json:"run,omitempty"`
}

// Valid says whether s is a state a gate publishes: a known state, paused
// exactly when it holds a pause, its breaker in a breaker's state. Readers
// take anything else as no state at all.
func (s DestinationState) Valid() bool {
	switch s.Breaker.State {
	case Closed, Open, HalfOpen:
	default:
		return false
	}
	switch s.State {
	case Paused:
		return s.Paused != nil
	case Closed, Open, HalfOpen:
		return s.Paused == nil && s.State == s.Breaker.State
	}
	return false
}

// Hold says whether an attempt may be sent now: nil and no probe when it
// may; a hold when it must wait; probe when it may go only as the breaker's
// one probe attempt, if the gate grants it (update probe).
func (s DestinationState) Hold(now time.Time) (h *activities.Hold, probe bool) {
	if !s.Valid() {
		// Not a state a gate publishes: it holds nothing (readers never
		// pass one; this keeps an attempt from failing on one).
		return nil, false
	}
	b := s.Breaker
	open := &activities.Hold{State: string(workflows.StateCircuitOpen), Since: b.OpenedAt, Until: b.ReopensAt(),
		Reason: fmt.Sprintf("circuit open after %d consecutive failures (last: %s)", b.Failures, b.LastFailure)}
	if s.Stopped != "" && s.State != Closed {
		// No gate runs to end the pause, grant a probe or release: held
		// until an operator resumes, looking again on the delivery's timer.
		if s.State == Paused && s.Paused != nil {
			return &activities.Hold{State: string(workflows.StatePaused), Since: s.Paused.Since,
				Reason: s.Paused.Reason + " (paused by " + s.Paused.By + ")" + s.stoppedNote("paused")}, false
		}
		open.Until, open.Reason = time.Time{}, open.Reason+s.stoppedNote("its breaker was "+s.State)
		return open, false
	}
	switch s.State {
	case Paused:
		return &activities.Hold{State: string(workflows.StatePaused), Reason: s.Paused.Reason + " (paused by " + s.Paused.By + ")",
			Since: s.Paused.Since, Until: s.Paused.Until}, false
	case Open:
		if now.Before(open.Until) {
			return open, false
		}
		return open, true
	case HalfOpen:
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
