// Package activities does all of Courier's I/O: one attempt at a destination,
// a lookup by key, a review reminder. Destination adapters live beneath it.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/contract"
)

// Error types the workflow can tell apart.
const (
	// ErrUnknownDestination: the worker has no adapter for the destination.
	ErrUnknownDestination = "UnknownDestination"
	// ErrLookupUnreadable: a lookup's answer could not be read as the
	// destination declares, so it says neither found nor not found.
	ErrLookupUnreadable = "LookupUnreadable"
)

// ErrUnreadable marks an adapter's error for an answer it could not read
// as the destination declares: not a failure that passes, but a reading
// that does not fit the destination.
var ErrUnreadable = errors.New("the answer cannot be read as the destinations file declares")

// Where a receipt came from.
const (
	// SourceCreated: the attempt's own answer, which made the effect.
	SourceCreated = "created"
	// SourceReplayed: the destination recognised the key and named the
	// original effect.
	SourceReplayed = "replayed"
	// SourceLookup: a lookup found the original effect.
	SourceLookup = "lookup"
	// SourceReview: a reviewer found the effect and named it.
	SourceReview = "review"
)

// Request is one attempt's input. It carries the payload and the derived key,
// never a credential.
type Request struct {
	Key         string          `json:"key"`
	Fingerprint string          `json:"fingerprint"`
	Tenant      string          `json:"tenant,omitempty"`
	Destination string          `json:"destination"`
	Operation   string          `json:"operation"`
	BusinessID  string          `json:"business_id"`
	Payload     json.RawMessage `json:"payload"`
	Attempt     int             `json:"attempt"`
	// Contract is the one the delivery recorded with its first attempt.
	// The first attempt leaves it out and runs under the worker's current
	// contract, which its Outcome then carries into history.
	Contract *contract.Contract `json:"contract,omitempty"`
	// EarlierRunsChecked: an earlier attempt of this run (not a reset)
	// found no earlier run that stops it, so this one need not look again.
	// The workflow derives it from its recorded outcomes, never from what
	// a caller set.
	EarlierRunsChecked bool `json:"earlier_runs_checked,omitempty"`
	// AcknowledgedRuns are earlier runs a reviewer has seen and, deciding
	// retry, allowed this run to send past.
	AcknowledgedRuns []string `json:"acknowledged_runs,omitempty"`
	// Released: the destination's gate has just released the delivery, so
	// the attempt reads the gate afresh rather than from a worker's copy.
	Released bool `json:"released,omitempty"`
}

// ContractOr is the contract the request runs under: the recorded one, or
// def (the adapter's configured one) for a request that carries none.
func (r Request) ContractOr(def contract.Contract) contract.Contract {
	if r.Contract != nil {
		return *r.Contract
	}
	return def
}

// Receipt is what the destination returned for the effect: for a
// duplicate, the original effect as the destination's replay, a lookup or
// a reviewer named it (Source).
type Receipt struct {
	ResourceID string          `json:"resource_id"`
	Status     string          `json:"status,omitempty"`
	StatusCode int             `json:"status_code,omitempty"`
	Replayed   bool            `json:"replayed"`
	Source     string          `json:"source,omitempty"`
	Body       json.RawMessage `json:"body,omitempty"`
}

// Read is a value an adapter read at a declared place in an answer. The
// probe shows them; they are never recorded.
type Read struct {
	// Field is the destinations file's field that declared the place, e.g.
	// "rules[0].receipt.id" or "lookup.items".
	Field   string `json:"field"`
	Pointer string `json:"pointer,omitempty"`
	// Value is what was there, as text; "(absent)" when nothing was.
	Value string `json:"value"`
}

// Outcome is one attempt's classified result. An adapter always returns one:
// transport failures are facts to classify, not activity errors.
type Outcome struct {
	Class      contract.Class `json:"class"`
	StatusCode int            `json:"status_code,omitempty"`
	Receipt    *Receipt       `json:"receipt,omitempty"`
	Error      string         `json:"error,omitempty"`
	// RetryAfter is the destination's own pacing (Retry-After), if any.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Terms are what the attempt ran under, when the request carried no
	// contract: the delivery records them with its first attempt and
	// decides from them.
	Terms *Terms `json:"terms,omitempty"`
	// EarlierRuns, with class earlier_run, are the runs that stopped it.
	EarlierRuns []EarlierRun `json:"earlier_runs,omitempty"`
	// EarlierRunsChecked: the attempt looked at the workflow ID's earlier
	// runs and none stopped it.
	EarlierRunsChecked bool `json:"earlier_runs_checked,omitempty"`
	// Hold, with class held, is why nothing was sent.
	Hold *Hold `json:"hold,omitempty"`
	// Reads show how the answer was read, for the probe.
	Reads []Read `json:"-"`
}

// Hold is why an attempt was not sent: its destination is paused or its
// breaker open.
type Hold struct {
	State  string    `json:"state"` // paused or circuit_open, the delivery's state while held
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	// Until is when to look again; zero: when released.
	Until time.Time `json:"until,omitzero"`
}

// Gate holds attempts back while a destination is paused or its breaker is
// open, across every worker; the worker implements it over Temporal.
type Gate interface {
	// Admit returns nil when an attempt with this key may be sent now;
	// probe, when it goes as the breaker's one probe attempt. fresh reads
	// the gate itself, not a copy.
	Admit(ctx context.Context, destination, key string, fresh bool) (hold *Hold, probe bool, err error)
	// Report tells the destination's breaker what an attempt found.
	Report(ctx context.Context, destination, key string, out Outcome)
	// Release tells the deliveries held at the destination to look again.
	Release(ctx context.Context, destination string) error
}

// GateNotice tells the notifier that a destination's gate changed.
type GateNotice struct {
	Destination string    `json:"destination"`
	State       string    `json:"state"`
	Since       time.Time `json:"since"`
	Why         string    `json:"why"`
}

// Terms are what a delivery takes from the worker's destinations file once,
// records in its history and decides from ever after: its destination's
// contract and who may review it.
type Terms struct {
	// Contract is nil when the worker has no such destination.
	Contract  *contract.Contract `json:"contract,omitempty"`
	Reviewers []string           `json:"reviewers,omitempty"`
}

// EarlierRun is a finished run of the same workflow ID as the current one.
type EarlierRun struct {
	RunID  string    `json:"run_id"`
	Status string    `json:"status"` // the delivery's final status, or how the run closed
	Closed time.Time `json:"closed"`
	// FirstAttempt is when the run first wrote to the destination (zero if it
	// never did): a key destination remembers the key from then on.
	FirstAttempt time.Time `json:"first_attempt,omitzero"`
	// NothingApplied: the run provably left no effect (contract.RunLeftNoEffect).
	NothingApplied bool `json:"nothing_applied"`
}

func (r EarlierRun) String() string {
	return fmt.Sprintf("run %s (%s, closed %s)", r.RunID, r.Status, r.Closed.UTC().Format(time.RFC3339))
}

// Runs reads the earlier runs of a workflow ID; the worker implements it
// with its Temporal client.
type Runs interface {
	Earlier(ctx context.Context, workflowID, runID string) ([]EarlierRun, error)
}

// Found is a lookup's answer. Found is true only when the answer names the
// effect: its Receipt then carries the effect's resource id.
type Found struct {
	Found   bool     `json:"found"`
	Receipt *Receipt `json:"receipt,omitempty"`
	// Reads show how the answer was read, and Listed how many records a
	// list answer held, for the probe.
	Reads  []Read `json:"-"`
	Listed int    `json:"-"`
}

// Reminder asks reviewers again about a parked delivery.
type Reminder struct {
	Key         string `json:"key"`
	Destination string `json:"destination"`
	// Number is 0 when the delivery has just parked, then 1, 2, ... for
	// each reminder.
	Number     int    `json:"number,omitempty"`
	Tenant     string `json:"tenant,omitempty"`
	Operation  string `json:"operation,omitempty"`
	BusinessID string `json:"business_id,omitempty"`
	WorkflowID string `json:"workflow_id,omitempty"`
	// Namespace is filled in by the activity.
	Namespace string    `json:"namespace,omitempty"`
	Since     time.Time `json:"since"`
	// Reason is why it waits, in one line; Evidence, in full.
	Reason   string `json:"reason,omitempty"`
	Evidence string `json:"evidence"`
}

// Adapter delivers to one destination.
type Adapter interface {
	// Deliver makes one attempt and classifies what happened.
	Deliver(ctx context.Context, req Request) Outcome
	// Lookup finds an effect by key, for dedup lookup destinations.
	Lookup(ctx context.Context, req Request) (Found, error)
}

// Activities holds the worker's adapters, one per configured destination.
type Activities struct {
	Adapters map[string]Adapter
	// Contracts are the worker's current contracts, by destination, and
	// Reviewers who may review: a delivery's first attempt runs under and
	// records them.
	Contracts map[string]contract.Contract
	Reviewers []string
	// Runs reads earlier runs before an attempt that a repeat would
	// duplicate; without it such an attempt is not sent.
	Runs Runs
	// StopGrace, when set, is how long an attempt may go on once its worker
	// is stopping; then it is cut short and reports what it knows (sent or
	// not) before the worker exits. Keep it under the worker's stop timeout.
	StopGrace time.Duration
	// Notifiers are told of parked deliveries, by destination; a
	// destination without one is only logged.
	Notifiers map[string]Notifier
	// Gate, when set, holds attempts back at paused or broken destinations.
	Gate Gate
	// OnReminder, when set, is told about each review reminder (metrics, paging).
	OnReminder func(Reminder)
}

// Notifier tells people that a delivery waits for their review, or that a
// destination's breaker opened.
type Notifier interface {
	Notify(ctx context.Context, r Reminder) error
	NotifyGate(ctx context.Context, n GateNotice) error
}

// HeartbeatTimeout is how soon Temporal declares an attempt lost when its
// worker stops heartbeating (crashed, killed, cut off), whatever the
// attempt's own timeout.
const HeartbeatTimeout = 10 * time.Second

// heartbeatEvery paces the attempt's heartbeats. The first comes only after
// this long, so an attempt that answers sooner costs the server nothing; the
// SDK throttles the later ones to about 80% of HeartbeatTimeout.
const heartbeatEvery = 2 * time.Second

func (a *Activities) adapter(name string) (Adapter, error) {
	ad, ok := a.Adapters[name]
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("destination %q is not configured on the workers", name), ErrUnknownDestination, nil)
	}
	return ad, nil
}

// terms are the worker's current terms for a destination; their contract
// is nil when the worker has no such destination.
func (a *Activities) terms(destination string) Terms {
	t := Terms{Reviewers: a.Reviewers}
	if c, ok := a.Contracts[destination]; ok {
		t.Contract = &c
	}
	return t
}

// prepare finds the adapter and fills in the contract the request runs
// under: the recorded one, else the worker's current one, whose terms it
// returns to be recorded. Then it starts heartbeating until stop.
func (a *Activities) prepare(ctx context.Context, req *Request) (_ Adapter, current *Terms, stop func(), _ error) {
	ad, err := a.adapter(req.Destination)
	if err != nil {
		return nil, nil, nil, err
	}
	if req.Contract == nil {
		t := a.terms(req.Destination)
		if t.Contract == nil {
			return nil, nil, nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("destination %q has no contract on this worker", req.Destination), ErrUnknownDestination, nil)
		}
		req.Contract, current = t.Contract, &t
	}
	return ad, current, heartbeat(ctx), nil
}

// Attempt makes one attempt at the destination. Its result is recorded in
// history, so the workflow's decision replays exactly.
func (a *Activities) Attempt(ctx context.Context, req Request) (Outcome, error) {
	ad, current, stop, err := a.prepare(ctx, &req)
	if err != nil {
		return Outcome{}, err
	}
	defer stop()
	var probe bool
	if a.Gate != nil {
		var hold *Hold
		var err error
		hold, probe, err = a.Gate.Admit(ctx, req.Destination, req.Key, req.Released)
		if err != nil {
			// Not knowing is not a reason to send: look again soon.
			hold = &Hold{State: "circuit_open", Reason: "the destination's gate could not be read: " + err.Error(), Until: time.Now().Add(10 * time.Second)}
		}
		if hold != nil {
			return held(ctx, req, hold, current), nil
		}
	}
	ctx, cancel := a.cutShortOnStop(ctx)
	defer cancel()
	out, checked := a.guard(ctx, req)
	if checked {
		looked := out.EarlierRunsChecked
		out = nameTheOriginal(ad.Deliver(ctx, req))
		out.EarlierRunsChecked = looked
		if a.Gate != nil {
			a.Gate.Report(ctx, req.Destination, req.Key, out)
		}
		if probe && out.Class.FoundDown() && out.Class.NothingApplied() {
			// The breaker's probe, not the delivery's attempt: it found the
			// destination still down and applied nothing, so the delivery
			// spends nothing on it. Anything else it found counts.
			h := &Hold{State: "circuit_open", Since: time.Now(), Reason: "the breaker's probe found it still down: " + out.Error}
			if b := a.Contracts[req.Destination].Breaker; b != nil {
				h.Until = h.Since.Add(b.CoolDown.D()) // the breaker's next probe
			}
			return held(ctx, req, h, current), nil
		}
	}
	out.Terms = current
	activity.GetLogger(ctx).Info("attempt finished",
		"key", req.Key, "destination", req.Destination, "attempt", req.Attempt,
		"class", out.Class, "status_code", out.StatusCode, "error", out.Error)
	return out, nil
}

// nameTheOriginal holds a replay to what a duplicate promises: the
// original effect's id. An answer read as a replay that names none says the
// effect exists without saying which it is, so it is an unknown outcome
// (retried under the same key, or reviewed), never a duplicate.
func nameTheOriginal(out Outcome) Outcome {
	switch {
	case out.Class == contract.ClassReplayed && (out.Receipt == nil || out.Receipt.ResourceID == ""):
		out.Class = contract.ClassUnknown
		out.Error = fmt.Sprintf("HTTP %d was read as a replay but names no resource id%s: Courier cannot name the original effect; "+
			"declare where the replay's id is (receipt.id, or the rule's receipt.id)", out.StatusCode, readsText(out.Reads))
		out.Receipt = nil
	case out.Receipt != nil && out.Class == contract.ClassReplayed:
		out.Receipt.Source = SourceReplayed
	case out.Receipt != nil && out.Class == contract.ClassCreated:
		out.Receipt.Source = SourceCreated
	}
	return out
}

// readsText lists what was read where, for an error: " (read receipt.id
// /id: (absent))".
func readsText(reads []Read) string {
	if len(reads) == 0 {
		return ""
	}
	parts := make([]string, len(reads))
	for i, r := range reads {
		parts[i] = strings.TrimSpace(r.Field + " " + r.Pointer + ": " + r.Value)
	}
	return " (read " + strings.Join(parts, "; ") + ")"
}

// held is the outcome of an attempt the gate held back.
func held(ctx context.Context, req Request, h *Hold, current *Terms) Outcome {
	activity.GetLogger(ctx).Info("attempt held", "key", req.Key, "destination", req.Destination, "state", h.State, "reason", h.Reason)
	return Outcome{Class: contract.ClassHeld, Hold: h, Error: "not sent: " + h.Reason, Terms: current}
}

// maxEarlierRunsNamed bounds the runs an earlier_run outcome names.
const maxEarlierRunsNamed = 5

// guard refuses to send when an earlier run of this workflow ID may have
// applied the effect and the destination would not recognise a repeat of
// it. ok is true when the attempt may send. Whether there are earlier runs
// is read from the server, whatever the run's memo or input say (any
// client may set those); a destination that remembers keys for ever costs
// nothing here, and a run reads its earlier runs once.
func (a *Activities) guard(ctx context.Context, req Request) (_ Outcome, ok bool) {
	c := req.Contract
	if c.DeduplicatesForever() || req.EarlierRunsChecked {
		return Outcome{}, true
	}
	if a.Runs == nil {
		return Outcome{Class: contract.ClassNotSent, Error: "not sent: this worker cannot read earlier runs"}, false
	}
	info := activity.GetInfo(ctx)
	runs, err := a.Runs.Earlier(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
	if err != nil {
		return Outcome{Class: contract.ClassNotSent, Error: fmt.Sprintf("not sent: reading earlier runs failed: %v", err)}, false
	}
	var blocking []EarlierRun
	for _, r := range runs {
		if r.NothingApplied || slices.Contains(req.AcknowledgedRuns, r.RunID) ||
			(!r.FirstAttempt.IsZero() && c.DeduplicatesRepeat(time.Since(r.FirstAttempt))) {
			continue
		}
		if len(blocking) < maxEarlierRunsNamed {
			blocking = append(blocking, r)
		}
	}
	if len(blocking) == 0 {
		return Outcome{EarlierRunsChecked: true}, true
	}
	names := make([]string, len(blocking))
	for i, r := range blocking {
		names[i] = r.String()
	}
	return Outcome{
		Class:       contract.ClassEarlierRun,
		EarlierRuns: blocking,
		Error: fmt.Sprintf("not sent: this is not the operation's first run, and %s may have applied it: "+
			"dedup %s would not recognise a repeat", strings.Join(names, "; "), c.Dedup),
	}, false
}

// cutShortOnStop cancels ctx StopGrace after the worker starts stopping, so
// that an attempt still running reports its outcome while the worker can
// still send it, instead of being found lost at its heartbeat timeout.
func (a *Activities) cutShortOnStop(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if a.StopGrace <= 0 {
		return ctx, cancel
	}
	stopping := activity.GetWorkerStopChannel(ctx)
	go func() {
		select {
		case <-stopping:
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(a.StopGrace)
		defer t.Stop()
		select {
		case <-t.C:
			activity.GetLogger(ctx).Warn("worker stopping: attempt cut short")
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// heartbeat tells Temporal the attempt's worker is alive until stop is
// called, so a lost worker is noticed within HeartbeatTimeout.
func heartbeat(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Lookup asks a lookup destination whether the effect exists. Unlike an
// attempt it is a read, so Temporal may retry it freely.
func (a *Activities) Lookup(ctx context.Context, req Request) (Found, error) {
	ad, _, stop, err := a.prepare(ctx, &req)
	if err != nil {
		return Found{}, err
	}
	defer stop()
	f, err := ad.Lookup(ctx, req)
	if err == nil && f.Found && (f.Receipt == nil || f.Receipt.ResourceID == "") {
		// Found means the answer names the effect (see Found).
		err = fmt.Errorf("found, but the answer names no resource id%s: %w", readsText(f.Reads), ErrUnreadable)
	}
	if errors.Is(err, ErrUnreadable) {
		// Asking again soon gets the same answer: the delivery parks with it.
		return Found{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("lookup %s at %s: %v", req.Key, req.Destination, err), ErrLookupUnreadable, nil)
	}
	if err != nil {
		return Found{}, fmt.Errorf("lookup %s at %s: %w", req.Key, req.Destination, err)
	}
	if f.Receipt != nil {
		f.Receipt.Source = SourceLookup
	}
	activity.GetLogger(ctx).Info("lookup finished",
		"key", req.Key, "destination", req.Destination, "attempt", req.Attempt, "found", f.Found)
	return f, nil
}

// ResolveTerms returns the worker's current terms for a destination, for a
// delivery that has none recorded yet (its first attempt was lost before it
// could report them). Run as a local activity: its answer is recorded.
func (a *Activities) ResolveTerms(_ context.Context, destination string) (Terms, error) {
	return a.terms(destination), nil
}

// RemindReview tells operators that a delivery waits for a decision: it
// logs, and tells the destination's notifier, if any.
func (a *Activities) RemindReview(ctx context.Context, r Reminder) error {
	activity.GetLogger(ctx).Warn("delivery awaiting review",
		"key", r.Key, "destination", r.Destination, "reminder", r.Number, "since", r.Since, "evidence", r.Evidence)
	if a.OnReminder != nil {
		a.OnReminder(r)
	}
	n, ok := a.Notifiers[r.Destination]
	if !ok {
		return nil
	}
	r.Namespace = activity.GetInfo(ctx).WorkflowNamespace
	return n.Notify(ctx, r)
}

// NotifyGate tells the destination's notifier, if any, that its gate
// changed (its breaker opened).
func (a *Activities) NotifyGate(ctx context.Context, n GateNotice) error {
	activity.GetLogger(ctx).Warn("destination gate changed", "destination", n.Destination, "state", n.State, "why", n.Why)
	if nt, ok := a.Notifiers[n.Destination]; ok {
		return nt.NotifyGate(ctx, n)
	}
	return nil
}

// ReleaseHeld tells the deliveries held at a destination to look again.
func (a *Activities) ReleaseHeld(ctx context.Context, destination string) error {
	if a.Gate == nil {
		return nil
	}
	return a.Gate.Release(ctx, destination)
}
