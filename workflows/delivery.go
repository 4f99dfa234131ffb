// Package workflows holds Courier's deterministic orchestration: the Delivery
// workflow, the key and fingerprint it is built on, and the shared names.
package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/opkey"
)

// a names the activities; the worker registers a real *Activities.
var a *activities.Activities

const (
	// attemptGrace lets an attempt report its own per-attempt timeout before
	// Temporal declares the attempt lost (a crashed worker).
	attemptGrace = 5 * time.Second
	// defaultAttemptTimeout bounds an attempt routed to no configured
	// destination: the worker answers at once that it has none.
	defaultAttemptTimeout = 30 * time.Second
)

// Deliveries runs Delivery workflows for the destinations configured on the
// worker. A delivery decides only from its own history: the contract its
// first attempt ran under is recorded there, so a later edit or removal of
// the destination reaches new deliveries only. The workflow reads the
// worker's file just to route an attempt (task queue, first timeout), which
// replay does not check.
type Deliveries struct {
	destinations map[string]contract.Destination
	reviewers    []string
}

// NewDeliveries returns the Delivery workflow for these destinations.
func NewDeliveries(cfg contract.Config) *Deliveries {
	return &Deliveries{destinations: cfg.Destinations, reviewers: cfg.Reviewers}
}

// ActivityTaskQueue is where a destination's attempts run: a queue of its
// own when it has a rate limit, so the server enforces the limit across all
// workers.
func ActivityTaskQueue(name string, d contract.Destination) string {
	if d.RateLimit > 0 {
		return TaskQueue + "-" + name
	}
	return TaskQueue
}

// Delivery delivers one business operation exactly once in effect, or stops
// for a human decision when the destination cannot tell.
func (ds *Deliveries) Delivery(ctx workflow.Context, in DeliveryInput) (DeliveryResult, error) {
	d := &delivery{in: in, state: StateDelivering, configReviewers: ds.reviewers, destinations: ds.destinations}
	if err := d.setup(ctx); err != nil {
		return DeliveryResult{}, err
	}
	res, err := d.run(ctx)
	if ctx.Err() != nil && !d.closed && d.cancelEnds(ctx) {
		return d.canceled(ctx)
	}
	return res, err
}

// versionCancelEnds marks deliveries that end a cancel request in a final
// status of their own (canceled), recorded as any other end is. Asked only
// once a cancel request has come, so no other history carries it.
const versionCancelEnds = "cancel-ends"

func (d *delivery) cancelEnds(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionCancelEnds, workflow.DefaultVersion, 1) == 1
}

// canceled ends a canceled delivery: its final bookkeeping runs on a
// context the cancel does not reach. A delivery that had settled on its
// own keeps its status.
func (d *delivery) canceled(ctx workflow.Context) (DeliveryResult, error) {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	if d.res.Status != "" {
		return d.close(ctx, d.res.Status, d.res.Error)
	}
	cause := "canceled on request before anything was sent"
	if !d.res.LeftNoEffectIf(StatusCanceled) {
		cause = fmt.Sprintf("canceled on request after %d attempt(s), which may have applied (an attempt in flight is an unknown outcome): "+
			"check the destination; delivering the operation again parks for review wherever a repeat could apply it twice",
			len(d.res.Attempts))
	} else if len(d.res.Attempts) > 0 {
		cause = fmt.Sprintf("canceled on request after %d attempt(s), none of which applied", len(d.res.Attempts))
	}
	return d.finish(ctx, StatusCanceled, nil, cause)
}

// delivery is one workflow's state; handlers read it, run changes it.
type delivery struct {
	in    DeliveryInput
	state State
	res   DeliveryResult
	// starter is the Caller of the first deliver update: the one that came
	// with the start.
	starter     string
	deliverSeen bool
	// decision is an accepted review decision not yet acted on.
	decision *ReviewDecision
	// terms are the recorded contract and reviewers every decision uses;
	// nil until the first attempt reports them.
	terms *activities.Terms
	// earlierRunsChecked: an attempt of this run found no earlier run of
	// the workflow ID that stops it; runs closed before this one began
	// cannot change, so later attempts need not look again.
	earlierRunsChecked bool
	// acknowledged are earlier runs of the workflow ID that a reviewer
	// allowed this run to send past.
	acknowledged []string
	// destinations route attempts (see route); they decide nothing.
	// configReviewers are only for deliveries from before terms were
	// recorded.
	destinations    map[string]contract.Destination
	configReviewers []string
	// budget is the attempt number the retry budget ends at; it grows when
	// a reviewer decides retry.
	budget int
	// reason is why the delivery is parked, in one line; namespace is for
	// links in the details.
	reason    string
	namespace string
	// held is why the delivery waits at a paused or broken destination;
	// released is set by the gate's release signal; heldFor is the time
	// spent held, which the deadline does not count.
	held *activities.Hold
	// released stays set until the next attempt has carried it.
	released bool
	heldFor  time.Duration
	holds    int
	// closed: finish has run to its end; a cancel after it changes nothing.
	closed bool
}

func (d *delivery) setup(ctx workflow.Context) error {
	// Derived here, not trusted from the caller: a pure function of the input.
	d.res.Key = opkey.Key(d.in.Operation)
	d.res.Fingerprint, _ = opkey.Fingerprint(d.in.Payload) // an invalid payload is rejected in run
	d.res.Attempts = []Attempt{}
	d.res.Events = []Event{}
	d.namespace = workflow.GetInfo(ctx).Namespace

	if err := workflow.SetQueryHandlerWithOptions(ctx, QueryStatus, func() (DeliveryStatus, error) {
		return d.status(), nil
	}, workflow.QueryHandlerOptions{Description: describeStatus}); err != nil {
		return fmt.Errorf("register query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateReview,
		func(ctx workflow.Context, rd ReviewDecision) (ReviewRecord, error) {
			return d.receiveReview(ctx, rd, "update"), nil
		},
		workflow.UpdateHandlerOptions{Description: describeReviewUpdate, Validator: func(_ workflow.Context, rd ReviewDecision) error {
			if err := d.checkReview(rd); err != nil {
				// A named type, so callers in any SDK can tell a refusal apart.
				return temporal.NewApplicationError(err.Error(), ErrInvalidReview)
			}
			return nil
		}},
	); err != nil {
		return fmt.Errorf("register update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateDeliver,
		func(ctx workflow.Context, r DeliverRequest) (Settled, error) {
			// Callers of one payload share one update ID, so the first
			// deliver update is the one that came with the start (or, for a
			// delivery started otherwise, the first join).
			if !d.deliverSeen {
				d.deliverSeen, d.starter = true, r.Caller
			}
			if err := workflow.Await(ctx, d.settled); err != nil {
				if ctx.Err() == nil || !d.cancelEnds(ctx) {
					return Settled{}, err
				}
				// Canceled: the delivery still ends (canceled), and that
				// end is this caller's answer.
				dctx, _ := workflow.NewDisconnectedContext(ctx)
				if err := workflow.Await(dctx, d.settled); err != nil {
					return Settled{}, err
				}
			}
			return Settled{DeliveryStatus: d.status(), Starter: d.starter}, nil
		},
		workflow.UpdateHandlerOptions{Description: describeDeliver, Validator: func(_ workflow.Context, r DeliverRequest) error {
			return d.checkDeliver(r)
		}},
	); err != nil {
		return fmt.Errorf("register update: %w", err)
	}
	release := workflow.GetSignalChannelWithOptions(ctx, SignalRelease, workflow.SignalChannelOptions{Description: describeRelease})
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			release.Receive(ctx, nil)
			d.released = d.held != nil
		}
	})
	ch := workflow.GetSignalChannelWithOptions(ctx, SignalReview, workflow.SignalChannelOptions{Description: describeReviewSignal})
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			// The payload as sent, decoded here: the SDK would drop one that
			// is not JSON before any handler saw it, and it must be counted.
			var raw converter.RawValue
			ch.Receive(ctx, &raw)
			var rd ReviewDecision
			if err := converter.GetDefaultDataConverter().FromPayload(raw.Payload(), &rd); err != nil {
				d.record(ctx, ReviewRecord{Via: "signal", Reason: excerpt("not a review decision: "+err.Error(), maxReasonLen)})
				continue
			}
			d.receiveReview(ctx, rd, "signal")
		}
	})
	return nil
}

// checkDeliver refuses a deliver update for another payload than the
// delivery's, before anything is recorded. The payload, when the request
// carries it, is fingerprinted here as the workflow's own input is: a
// caller whose SDK re-encodes the payload (1e2 as 100.0, say) re-encodes
// both alike, so its own start is never its own conflict. A delivery whose
// payload is invalid conflicts with nothing: it ends rejected, and that is
// every caller's answer.
func (d *delivery) checkDeliver(r DeliverRequest) error {
	if d.res.Fingerprint == "" {
		return nil
	}
	fp := r.Fingerprint
	if len(r.Payload) > 0 {
		var err error
		if fp, err = opkey.Fingerprint(r.Payload); err != nil {
			return temporal.NewApplicationError(fmt.Sprintf("this request's payload is invalid (%v): nothing was sent", err), ErrInvalidRequest)
		}
	}
	if fp == "" {
		return temporal.NewApplicationError(`a deliver request carries its payload ("payload") or its fingerprint ("fingerprint"): nothing was sent`, ErrInvalidRequest)
	}
	if fp != d.res.Fingerprint {
		return temporal.NewApplicationError(fmt.Sprintf(
			"delivery %s carries a payload with fingerprint %s; this request's is %s: nothing was sent",
			d.res.Key, d.res.Fingerprint, fp), ErrConflict, d.res.Fingerprint, fp)
	}
	return nil
}

func (d *delivery) status() DeliveryStatus {
	st := DeliveryStatus{State: d.state, Operation: d.in.Operation, DeliveryResult: d.res, Hold: d.held}
	if d.res.Status != "" {
		st.State = State(d.res.Status)
	}
	return st
}

// settled: final, or parked waiting for a decision.
func (d *delivery) settled() bool {
	return d.res.Status != "" || (d.state == StateAwaitingReview && d.decision == nil)
}

func (d *delivery) run(ctx workflow.Context) (DeliveryResult, error) {
	if err := d.in.Validate(); err != nil && refuses(ctx, err) {
		return d.finish(ctx, StatusRejected, nil, err.Error())
	}
	if _, err := opkey.Fingerprint(d.in.Payload); err != nil {
		return d.finish(ctx, StatusRejected, nil, err.Error())
	}
	// One workflow per operation is what makes a second start join the
	// first; a hand-made ID would let a second delivery run beside it.
	if id := workflow.GetInfo(ctx).WorkflowExecution.ID; id != WorkflowID(d.res.Key) {
		return d.finish(ctx, StatusRejected, nil, fmt.Sprintf(
			"workflow ID %q does not match the operation: start it as %q", id, WorkflowID(d.res.Key)))
	}
	if err := d.ensureSearchAttributes(ctx); err != nil {
		return DeliveryResult{}, err
	}
	first := workflow.Now(ctx) // key retention counts from the first write
	var deadline time.Time

	for {
		out := d.attempt(ctx)
		if ctx.Err() != nil && d.cancelEnds(ctx) {
			// Canceled: the attempt is recorded (unknown, if it was in
			// flight) and nothing more is decided or sent.
			return DeliveryResult{}, ctx.Err()
		}
		if out.Class == contract.ClassHeld {
			// Nothing was sent: no attempt, no budget, no deadline spent.
			if err := d.hold(ctx, out.Hold); err != nil {
				return DeliveryResult{}, err
			}
			continue
		}
		n := len(d.res.Attempts)
		if out.Class == contract.ClassUnconfigured && d.nothingAppliedBefore() {
			// Nothing was ever sent: the request named a destination the
			// workers do not have, and may be corrected and sent again.
			return d.finish(ctx, StatusRejected, nil, out.Error)
		}
		c, err := d.recordedContract(ctx)
		if err != nil {
			return DeliveryResult{}, err
		}
		if out.Class == contract.ClassUnconfigured && workflow.GetVersion(ctx, versionRecordedContract, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return d.finish(ctx, StatusRejected, nil, out.Error) // as deliveries before it did
		}
		if c == nil {
			// Attempted before, and no worker has the destination now: only
			// a person can tell what happened.
			d.reason = fmt.Sprintf("destination %s is not configured on the workers, so its contract is unknown: "+
				"restore it, or check the destination", d.in.Destination)
			if done, res, err := d.review(ctx, 0, fmt.Sprintf(
				"attempt %d: %s (%s); destination %q is not configured on the workers, so its contract is unknown: "+
					"restore it in the destinations file and decide retry, or find the effect",
				n, out.Class, out.Error, d.in.Destination), nil); done {
				return res, err
			}
			continue
		}
		if d.budget == 0 {
			d.budget, deadline = c.Retry.MaxAttempts, first.Add(c.Retry.Deadline.D())
		}
		keyExpired := c.KeyRetention > 0 && workflow.Now(ctx).Sub(first) > c.KeyRetention.D()
		switch c.Next(out.Class, keyExpired) {
		case contract.StepCreated:
			return d.finish(ctx, StatusCreated, out.Receipt, "")
		case contract.StepDuplicate:
			return d.finish(ctx, StatusDuplicate, out.Receipt, "")
		case contract.StepConflict:
			return d.finish(ctx, StatusConflict, nil, out.Error)
		case contract.StepRejected:
			return d.finish(ctx, StatusRejected, nil, out.Error)
		case contract.StepLookup:
			found, err := d.lookup(ctx, *c)
			if err != nil {
				failed := "failed"
				var appErr *temporal.ApplicationError
				if errors.As(err, &appErr) && appErr.Type() == activities.ErrLookupUnreadable {
					failed = "answered in a way its declared reading cannot read"
				}
				d.reason = fmt.Sprintf("attempt %d's outcome is unknown and the lookup at %s %s, so Courier cannot tell whether it applied: check the destination",
					n, d.in.Destination, failed)
				if done, res, err := d.review(ctx, c.ReviewReminder, fmt.Sprintf(
					"attempt %d: %s (%s); the lookup that should tell whether it took effect failed: %v",
					n, out.Class, out.Error, err), nil); done {
					return res, err
				}
				d.budget, deadline, d.heldFor = n+c.Retry.MaxAttempts, workflow.Now(ctx).Add(c.Retry.Deadline.D()), 0
				continue
			}
			if found.Found {
				return d.finish(ctx, StatusDuplicate, found.Receipt, "")
			}
		case contract.StepReview:
			evidence := fmt.Sprintf("attempt %d: %s (%s); destination %q (dedup %s) cannot deduplicate a retry",
				n, out.Class, out.Error, d.in.Destination, c.Dedup)
			switch {
			case out.Class == contract.ClassEarlierRun:
				evidence = fmt.Sprintf("attempt %d: %s; decide retry only if none of those runs took effect", n, out.Error)
			case out.Class == contract.ClassUnconfigured:
				evidence = fmt.Sprintf("attempt %d: %s; restore the destination in the workers' destinations file and decide retry, or find the effect", n, out.Error)
			case keyExpired:
				evidence += fmt.Sprintf(" after its key retention of %s", c.KeyRetention)
			}
			d.reason = d.parkReason(out, *c, keyExpired)
			if done, res, err := d.review(ctx, c.ReviewReminder, evidence, out.EarlierRuns); done {
				return res, err
			}
			// A reviewer's retry starts a fresh budget: they checked first.
			d.budget, deadline, d.heldFor = n+c.Retry.MaxAttempts, workflow.Now(ctx).Add(c.Retry.Deadline.D()), 0
			continue
		}

		// StepRetry, or a lookup that found nothing.
		wait := max(c.Retry.Interval(n), out.RetryAfter)
		if n >= d.budget || workflow.Now(ctx).Add(wait).After(deadline.Add(d.heldFor)) {
			return d.finish(ctx, StatusAttemptLimit, nil,
				fmt.Sprintf("retry budget spent after %d attempts; last: %s: %s", n, out.Class, out.Error))
		}
		d.event(ctx, n, "retry_scheduled", "in "+wait.String())
		d.setState(ctx, StateRetryWait)
		// Summaries name what the history's timers and activities are for.
		retry := workflow.TimerOptions{Summary: backoffSummary(wait, n, out)}
		if err := workflow.NewTimerWithOptions(ctx, wait, retry).Get(ctx, nil); err != nil {
			return DeliveryResult{}, err
		}
	}
}

// versionPlainIdentifiers marks deliveries that refuse an identifier with a
// control or bidirectional formatting character (opkey.CharacterError);
// those started before the rule delivered it. Asked only for such an
// identifier, so no other history carries it.
const versionPlainIdentifiers = "plain-identifiers"

// refuses reports whether the invalid input err ends the delivery. Validate
// reports a character only once every older check has passed, so a
// delivery started before the rule went on from here; its history has no
// marker, and on replay it goes on again.
func refuses(ctx workflow.Context, err error) bool {
	var ce *opkey.CharacterError
	return !errors.As(err, &ce) || workflow.GetVersion(ctx, versionPlainIdentifiers, workflow.DefaultVersion, 1) == 1
}

const (
	// holdLookAgain bounds a hold's wait: a held delivery looks at its
	// destination's gate again after this long even if no release came.
	holdLookAgain = 5 * time.Minute
	// holdLookSoonest keeps a hold from being a busy loop.
	holdLookSoonest = 5 * time.Second
	// holdSpread spreads the deliveries held until one time (an open
	// breaker's cool-down) over this long, by key.
	holdSpread = 10 * time.Second
)

// hold waits while the destination is paused or its breaker is open, until
// the gate releases the delivery or it is time to look again. Held outcomes
// come only from workers that have the gate, so no earlier history takes
// this path.
func (d *delivery) hold(ctx workflow.Context, h *activities.Hold) error {
	if h == nil {
		h = &activities.Hold{State: string(StateCircuitOpen), Reason: "held"}
	}
	d.holds++
	if d.holds <= MaxIgnoredRecords {
		d.event(ctx, len(d.res.Attempts), "held", h.State+": "+h.Reason)
	}
	d.held, d.released = h, false
	d.setState(ctx, State(h.State))
	if err := d.upsertState(ctx); err != nil {
		return err
	}
	start := workflow.Now(ctx)
	wait := holdLookAgain
	if !h.Until.IsZero() {
		var spread time.Duration
		for _, b := range []byte(d.res.Key) {
			spread = (spread*31 + time.Duration(b)) % holdSpread
		}
		wait = min(max(h.Until.Sub(start), holdLookSoonest)+spread, holdLookAgain)
	}
	summary := fmt.Sprintf("held: %s at %s; look again in %s", strings.ReplaceAll(h.State, "_", " "), d.in.Destination, wait.Round(time.Second))
	if _, err := awaitClosingTimer(ctx, wait, summary, func() bool { return d.released }); err != nil {
		return err
	}
	d.heldFor += workflow.Now(ctx).Sub(start)
	d.held = nil
	d.setState(ctx, StateDelivering)
	return d.upsertState(ctx)
}

// versionRecordedContract marks deliveries that decide from the terms in
// their history. Asked only where a delivery has none recorded, so the
// happy path (whose first attempt records them) writes no version marker.
const versionRecordedContract = "recorded-contract"

// recordedContract is the contract every decision of this delivery uses:
// the one its first attempt ran under and reported, recorded in history.
// When the first attempt was lost before reporting, the worker's current
// terms are recorded instead, by a local activity. nil: no worker had the
// destination when they were recorded.
func (d *delivery) recordedContract(ctx workflow.Context) (*contract.Contract, error) {
	if d.terms != nil {
		return d.terms.Contract, nil
	}
	if workflow.GetVersion(ctx, versionRecordedContract, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		// A delivery that started before terms were recorded decides, as
		// it always did, from the worker's destinations file.
		if dest, ok := d.destinations[d.in.Destination]; ok {
			return &dest.Contract, nil
		}
		return nil, nil
	}
	t, err := resolveTerms(ctx, d.in.Destination)
	if err != nil {
		return nil, err
	}
	d.terms = &t
	return t.Contract, nil
}

// resolveTerms records the worker's current terms for a destination in
// history, by a local activity: a marker in the workflow task, no round
// trip to the server.
func resolveTerms(ctx workflow.Context, destination string) (activities.Terms, error) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var t activities.Terms
	if err := workflow.ExecuteLocalActivity(lctx, a.ResolveTerms, destination).Get(ctx, &t); err != nil {
		return t, fmt.Errorf("record the terms of %q: %w", destination, err)
	}
	return t, nil
}

// recorded is the recorded contract, nil before the first attempt reports it.
func (d *delivery) recorded() *contract.Contract {
	if d.terms == nil {
		return nil
	}
	return d.terms.Contract
}

// reviewers may decide this delivery's reviews: the recorded ones, or for a
// delivery from before terms were recorded, the worker's.
func (d *delivery) reviewers() []string {
	if d.terms != nil {
		return d.terms.Reviewers
	}
	return d.configReviewers
}

// nothingAppliedBefore: no attempt before the last one can have taken effect.
func (d *delivery) nothingAppliedBefore() bool {
	for _, at := range d.res.Attempts[:len(d.res.Attempts)-1] {
		if !at.Class.NothingApplied() {
			return false
		}
	}
	return true
}

// route is where the next attempt runs and how long Temporal gives it.
// Neither is a decision that replay checks: a rate limit is the worker's to
// change, and an attempt's own timeout comes from the recorded contract the
// adapter applies. Before a contract is recorded the worker's file gives the
// first attempt's timeout.
func (d *delivery) route() (queue string, timeout time.Duration) {
	dest, ok := d.destinations[d.in.Destination]
	queue, timeout = TaskQueue, defaultAttemptTimeout
	if ok {
		queue, timeout = ActivityTaskQueue(d.in.Destination, dest), dest.Contract.Retry.AttemptTimeout.D()
	}
	if c := d.recorded(); c != nil {
		timeout = c.Retry.AttemptTimeout.D()
	}
	return queue, timeout + attemptGrace
}

// atDestination is ctx with the options of an activity at the destination:
// routed to its task queue, bounded by its attempt timeout, heartbeating.
func (d *delivery) atDestination(ctx workflow.Context, retry *temporal.RetryPolicy, summary string) workflow.Context {
	queue, timeout := d.route()
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: queue, StartToCloseTimeout: timeout, HeartbeatTimeout: activities.HeartbeatTimeout,
		RetryPolicy: retry, Summary: summary,
	})
}

// attempt runs one attempt and records it. An activity failure (the worker
// crashed, the attempt outlived its timeout) is an unknown outcome: the
// request may have been written.
func (d *delivery) attempt(ctx workflow.Context) activities.Outcome {
	n := len(d.res.Attempts) + 1
	d.setState(ctx, StateDelivering)
	// One execution per attempt: the workflow decides about every retry,
	// because what is safe depends on the result and the contract.
	ctx = d.atDestination(ctx, &temporal.RetryPolicy{MaximumAttempts: 1}, d.attemptSummary(n))
	started := workflow.Now(ctx)
	var out activities.Outcome
	req := d.request(ctx, n)
	d.released = false
	err := workflow.ExecuteActivity(ctx, a.Attempt, req).Get(ctx, &out)
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && appErr.Type() == activities.ErrUnknownDestination:
		out = activities.Outcome{Class: contract.ClassUnconfigured, Error: appErr.Message()}
	case err != nil:
		out = activities.Outcome{Class: contract.ClassUnknown, Error: "attempt lost: " + err.Error()}
	}
	// The first attempt's terms are recorded; so are those of the first
	// attempt that found the destination after it had gone missing.
	if out.Terms != nil && d.recorded() == nil {
		d.terms = out.Terms
	}
	d.earlierRunsChecked = d.earlierRunsChecked || out.EarlierRunsChecked
	if out.Class == contract.ClassHeld {
		return out // not an attempt: the destination never saw it
	}
	d.res.Attempts = append(d.res.Attempts, Attempt{
		Number: n, Started: started, Ended: workflow.Now(ctx),
		Class: out.Class, StatusCode: out.StatusCode, Error: out.Error,
	})
	// The one place an attempt is classified: counted and logged here.
	h := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"destination": d.in.Destination})
	h.WithTags(map[string]string{"class": string(out.Class)}).Counter(MetricAttempts).Inc(1)
	if out.Class == contract.ClassUnknown || out.Class == contract.ClassServerError {
		h.Counter(MetricUnknownOutcomes).Inc(1)
		d.logger(ctx).Warn("attempt outcome unknown", "class", out.Class, "error", out.Error)
	} else {
		d.logger(ctx).Debug("attempt classified", "class", out.Class)
	}
	switch out.Class {
	case contract.ClassCreated, contract.ClassReplayed:
		d.event(ctx, n, "receipt_received", fmt.Sprintf("%s, status %d", out.Class, out.StatusCode))
	case contract.ClassUnknown, contract.ClassServerError:
		d.event(ctx, n, "outcome_uncertain", out.Error)
	default:
		d.event(ctx, n, string(out.Class), out.Error)
	}
	return out
}

func (d *delivery) request(ctx workflow.Context, n int) activities.Request {
	info := workflow.GetInfo(ctx)
	return activities.Request{
		Key: d.res.Key, Fingerprint: d.res.Fingerprint,
		Tenant: d.in.Tenant, Destination: d.in.Destination, Operation: d.in.Operation.Operation,
		BusinessID: d.in.BusinessID, Payload: d.in.Payload, Attempt: n,
		Contract: d.recorded(),
		// A reset run copies the checks of the run it was reset from, which
		// is now an earlier run itself: it looks again.
		EarlierRunsChecked: d.earlierRunsChecked && info.OriginalRunID == info.WorkflowExecution.RunID,
		AcknowledgedRuns:   d.acknowledged,
		Released:           d.released,
	}
}

// lookup asks a lookup destination whether the last attempt took effect.
func (d *delivery) lookup(ctx workflow.Context, c contract.Contract) (activities.Found, error) {
	d.setState(ctx, StateReconciling)
	// A read: retrying it is always safe.
	ctx = d.atDestination(ctx, &temporal.RetryPolicy{
		MaximumAttempts:        5,
		InitialInterval:        c.Retry.InitialInterval.D(),
		NonRetryableErrorTypes: []string{activities.ErrUnknownDestination},
	}, fmt.Sprintf("lookup key %s at %s: did attempt %d take effect?", d.res.Key, d.in.Destination, len(d.res.Attempts)))
	var f activities.Found
	n := len(d.res.Attempts)
	if err := workflow.ExecuteActivity(ctx, a.Lookup, d.request(ctx, n)).Get(ctx, &f); err != nil {
		d.event(ctx, n, "lookup_failed", err.Error())
		return f, err
	}
	if f.Found {
		d.event(ctx, n, "lookup_found", f.Receipt.ResourceID)
	} else {
		d.event(ctx, n, "lookup_not_found", "")
	}
	return f, nil
}

// review parks the delivery until a valid decision arrives. It never guesses:
// the optional reminder only asks again. done is false for a retry decision.
func (d *delivery) review(ctx workflow.Context, reminder contract.Duration, evidence string, earlier []activities.EarlierRun) (done bool, res DeliveryResult, err error) {
	if d.res.Review == nil {
		d.res.Review = &Review{}
	}
	d.res.Review.Evidence = evidence
	d.res.Review.Requested = workflow.Now(ctx)
	d.event(ctx, len(d.res.Attempts), "review_requested", evidence)
	d.setState(ctx, StateAwaitingReview)
	if err := d.upsertState(ctx); err != nil {
		return true, DeliveryResult{}, err
	}
	d.logger(ctx).Warn("delivery awaiting review: a person must decide (courier review)", "evidence", evidence)
	desk := d.desk(ctx)
	if desk {
		d.notify(ctx, 0)
	}
	decided := func() bool { return d.decision != nil }
	for !decided() {
		if reminder <= 0 {
			if err := workflow.Await(ctx, decided); err != nil {
				return true, DeliveryResult{}, err
			}
			break
		}
		summary := fmt.Sprintf("waiting for a review; reminder in %s", reminder)
		var ok bool
		var err error
		if desk {
			ok, err = awaitClosingTimer(ctx, reminder.D(), summary, decided)
		} else {
			ok, err = workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{
				Timeout: reminder.D(), TimerOptions: workflow.TimerOptions{Summary: summary},
			}, decided)
		}
		if err != nil {
			return true, DeliveryResult{}, err
		}
		if !ok {
			d.remind(ctx, desk)
		}
	}
	rd := *d.decision
	d.decision = nil
	switch rd.Decision {
	case DecisionDelivered:
		res, err := d.finish(ctx, StatusDeliveredByReview,
			&activities.Receipt{ResourceID: rd.ResourceID, Status: "delivered_by_review", Source: activities.SourceReview}, "")
		return true, res, err
	case DecisionAbandon:
		res, err := d.finish(ctx, StatusAbandoned, nil, "abandoned by "+rd.Reviewer+": "+rd.Note)
		return true, res, err
	}
	// The reviewer saw the earlier runs named in the evidence.
	for _, r := range earlier {
		d.acknowledged = append(d.acknowledged, r.RunID)
	}
	return false, DeliveryResult{}, nil
}

func (d *delivery) remind(ctx workflow.Context, desk bool) {
	d.res.Review.Reminders++
	if desk {
		d.notify(ctx, d.res.Review.Reminders)
		return
	}
	// As deliveries before the notifier did: the wait resumes after the
	// reminder has been sent.
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
		Summary:             fmt.Sprintf("review reminder %d", d.res.Review.Reminders),
	})
	detail := fmt.Sprintf("reminder %d", d.res.Review.Reminders)
	if err := workflow.ExecuteActivity(ctx, a.RemindReview, d.reminder(d.res.Review.Reminders)).Get(ctx, nil); err != nil {
		detail += ": " + err.Error() // a failed reminder never ends the wait
	}
	d.recordReminder(ctx, d.res.Review.Reminders, detail)
}

// awaitClosingTimer is workflow.AwaitWithOptions whose timer is canceled
// when the condition comes first, so nothing in the history looks pending.
func awaitClosingTimer(ctx workflow.Context, timeout time.Duration, summary string, cond func() bool) (bool, error) {
	tctx, cancel := workflow.WithCancel(ctx)
	ok, err := workflow.AwaitWithOptions(tctx, workflow.AwaitOptions{
		Timeout: timeout, TimerOptions: workflow.TimerOptions{Summary: summary},
	}, cond)
	if ok && err == nil {
		cancel()
	}
	return ok, err
}

// versionReviewDesk marks deliveries that tell someone when they park,
// never hold a decision back for a reminder, close the review timer when a
// decision comes, and end as failed when nothing was delivered. Asked only
// when a delivery parks or ends without an effect, so the happy path writes
// no marker.
const versionReviewDesk = "review-desk"

func (d *delivery) desk(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionReviewDesk, workflow.DefaultVersion, 1) == 1
}

// notify sends notice n (0: the delivery has parked; then each reminder) to
// the notifier, beside the wait: a notifier that is down never holds back a
// decision or the delivery.
func (d *delivery) notify(ctx workflow.Context, n int) {
	summary := fmt.Sprintf("notify: parked at %s, waiting for a review", d.in.Destination)
	detail := "parked: notifier told"
	if n > 0 {
		summary = fmt.Sprintf("notify: review reminder %d", n)
		detail = fmt.Sprintf("reminder %d", n)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 2 * time.Second, MaximumInterval: time.Minute, MaximumAttempts: 5,
		},
		Summary: summary,
	})
	f := workflow.ExecuteActivity(actx, a.RemindReview, d.reminder(n))
	workflow.Go(ctx, func(ctx workflow.Context) {
		if err := f.Get(ctx, nil); err != nil {
			detail += ": " + err.Error()
		}
		d.recordReminder(ctx, n, detail)
	})
}

// recordReminder records what became of a notice. A delivery may wait for
// weeks: past the first few, reminders are only counted.
func (d *delivery) recordReminder(ctx workflow.Context, n int, detail string) {
	if n <= MaxIgnoredRecords {
		d.event(ctx, len(d.res.Attempts), "review_reminder", detail)
	}
}

func (d *delivery) reminder(n int) activities.Reminder {
	return activities.Reminder{
		Key: d.res.Key, Destination: d.in.Destination, Number: n,
		Tenant: d.in.Tenant, Operation: d.in.Operation.Operation, BusinessID: d.in.BusinessID,
		WorkflowID: WorkflowID(d.res.Key), Since: d.res.Review.Requested, Reason: d.reason, Evidence: d.res.Review.Evidence,
	}
}

// checkReview is the update validator and the signal's filter: a decision is
// acted on only when it is well formed and the delivery is waiting for one.
func (d *delivery) checkReview(rd ReviewDecision) error {
	if err := rd.Validate(); err != nil {
		return err
	}
	if allowed := d.reviewers(); len(allowed) > 0 && !slices.Contains(allowed, rd.Reviewer) {
		return fmt.Errorf("reviewer: %q may not review deliveries; allowed: %s", rd.Reviewer, strings.Join(allowed, ", "))
	}
	if d.state != StateAwaitingReview || d.decision != nil {
		return fmt.Errorf("delivery %s is not awaiting review (state %s)", d.res.Key, d.stateName())
	}
	return nil
}

// versionBatchRepeats marks deliveries that take a batch job's decision
// once. Asked only when one arrives again, so no other history carries it.
const versionBatchRepeats = "batch-repeats"

func (d *delivery) receiveReview(ctx workflow.Context, rd ReviewDecision, via string) ReviewRecord {
	// A batch job's decision arrives again when the job's activity retries
	// or the job is sent again: acting on it twice would retry twice.
	if r := d.res.Review; r != nil && rd.BatchJob != "" {
		for i := range r.Decisions {
			first := &r.Decisions[i]
			if !first.Accepted || first.BatchJob != rd.BatchJob ||
				workflow.GetVersion(ctx, versionBatchRepeats, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
				continue
			}
			if first.Repeats++; first.Repeats <= MaxIgnoredRecords {
				d.event(ctx, len(d.res.Attempts), "review_repeated",
					fmt.Sprintf("batch job %s sent its decision again; counted once", first.BatchJob))
			}
			return *first
		}
	}
	rec := ReviewRecord{ReviewDecision: rd.Excerpt(), Via: via}
	if err := d.checkReview(rd); err != nil {
		rec.Reason = excerpt(err.Error(), maxReasonLen)
	} else {
		rec.Accepted = true
		d.decision = &rd
	}
	return d.record(ctx, rec)
}

func (d *delivery) record(ctx workflow.Context, rec ReviewRecord) ReviewRecord {
	defer func() { workflow.SetCurrentDetails(ctx, d.details()) }()
	rec.Received = workflow.Now(ctx)
	if d.res.Review == nil {
		d.res.Review = &Review{}
	}
	r := d.res.Review
	if rec.Accepted {
		r.Decisions = append(r.Decisions, rec)
		detail := fmt.Sprintf("%s by %s: %s", rec.Decision, rec.Reviewer, rec.Note)
		if rec.BatchJob != "" {
			detail += " (batch job " + rec.BatchJob + ")"
		}
		d.event(ctx, len(d.res.Attempts), "review_decision", detail)
		return rec
	}
	r.Ignored++
	if r.Ignored > MaxIgnoredRecords {
		r.Dropped++
		return rec
	}
	r.Decisions = append(r.Decisions, rec)
	d.event(ctx, len(d.res.Attempts), "review_ignored", rec.Reason)
	return rec
}

// maxReasonLen bounds why an ignored decision was ignored; the reason may
// quote what was sent.
const maxReasonLen = 512

// excerpt cuts s to at most n bytes (and "…"), on a rune boundary.
func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// logger is the workflow's logger (silent on replay) with the delivery's
// key, destination and current attempt on every line.
func (d *delivery) logger(ctx workflow.Context) log.Logger {
	return log.With(workflow.GetLogger(ctx), "key", d.res.Key, "destination", d.in.Destination, "attempt", len(d.res.Attempts))
}

func (d *delivery) event(ctx workflow.Context, attempt int, name, detail string) {
	d.res.Events = append(d.res.Events, Event{Time: workflow.Now(ctx), Attempt: attempt, Event: name, Detail: detail})
}

func (d *delivery) stateName() string {
	if d.res.Status != "" {
		return string(d.res.Status)
	}
	return string(d.state)
}

// setState changes the state and what the web UI shows; it writes no history.
func (d *delivery) setState(ctx workflow.Context, s State) {
	d.state = s
	workflow.SetCurrentDetails(ctx, d.details())
}

// upsertState publishes the state for visibility queries. Only parking and
// finishing do it, to keep the happy path's history one event over a bare
// one-activity workflow.
func (d *delivery) upsertState(ctx workflow.Context) error {
	if err := workflow.UpsertTypedSearchAttributes(ctx, SAState.ValueSet(d.stateName())); err != nil {
		return fmt.Errorf("upsert %s: %w", SAState.GetName(), err)
	}
	return nil
}

// ensureSearchAttributes sets the operation's attributes when the caller did
// not (a start from another SDK or the temporal CLI), or set others than
// its input derives: any client may set them, and listings and bulk
// reviews select by them. The Go starter sets them right in the start
// options, so they cost no event.
func (d *delivery) ensureSearchAttributes(ctx workflow.Context) error {
	if key, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(SAKey); ok {
		if d.attributesDerived(workflow.GetTypedSearchAttributes(ctx), key) ||
			workflow.GetVersion(ctx, versionDerivedAttributes, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return nil
		}
		workflow.GetLogger(ctx).Warn("search attributes set at start differ from the delivery's own; replaced",
			"destination", d.in.Destination, "business_id", d.in.BusinessID)
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, OperationSearchAttributes(d.in.Operation, d.res.Key, StateDelivering)...); err != nil {
		return fmt.Errorf("upsert search attributes: %w", err)
	}
	return nil
}

// versionDerivedAttributes marks deliveries that replace search
// attributes a caller set at start when they differ from the input's.
const versionDerivedAttributes = "derived-attributes"

// attributesDerived reports whether the attributes set at start are the
// ones the input derives (key is the CourierKey set).
func (d *delivery) attributesDerived(sa temporal.SearchAttributes, key string) bool {
	get := func(k temporal.SearchAttributeKeyKeyword) string { v, _ := sa.GetKeyword(k); return v }
	return key == d.res.Key && get(SADestination) == d.in.Destination && get(SAOperation) == d.in.Operation.Operation &&
		get(SABusinessID) == d.in.BusinessID && get(SAState) == string(StateDelivering)
}

// OperationSearchAttributes are a delivery's visibility attributes.
func OperationSearchAttributes(op opkey.Operation, key string, state State) []temporal.SearchAttributeUpdate {
	return []temporal.SearchAttributeUpdate{
		SAKey.ValueSet(key),
		SADestination.ValueSet(op.Destination),
		SAOperation.ValueSet(op.Operation),
		SABusinessID.ValueSet(op.BusinessID),
		SAState.ValueSet(string(state)),
	}
}

func (d *delivery) finish(ctx workflow.Context, st Status, receipt *activities.Receipt, cause string) (DeliveryResult, error) {
	d.res.Status, d.res.Receipt, d.res.Error = st, receipt, cause
	// A rejected or conflicting attempt has told the story already.
	if n := len(d.res.Events); n == 0 || d.res.Events[n-1].Event != string(st) {
		d.event(ctx, len(d.res.Attempts), string(st), cause)
	}
	workflow.SetCurrentDetails(ctx, d.details())
	if err := d.upsertState(ctx); err != nil {
		return DeliveryResult{}, err
	}
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{
		"destination": d.in.Destination, "status": string(st),
	}).Counter(MetricDeliveries).Inc(1)
	kv := []any{"status", st, "attempts", len(d.res.Attempts)}
	if receipt != nil {
		kv = append(kv, "resource_id", receipt.ResourceID)
	}
	if cause != "" {
		kv = append(kv, "cause", cause)
	}
	d.logger(ctx).Info("delivery finished", kv...)
	return d.close(ctx, st, cause)
}

// close ends the run of a finished delivery.
func (d *delivery) close(ctx workflow.Context, st Status, cause string) (DeliveryResult, error) {
	// Deliver updates waiting for this end answer before the run closes.
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return DeliveryResult{}, err
	}
	d.closed = true
	if !st.Delivered() && d.desk(ctx) {
		// Failed in the web UI's list, where Completed reads as delivered;
		// the result travels in the failure (see NotDeliveredResult).
		return d.res, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("%s: %s", st, cause), ErrNotDelivered,
			temporal.ApplicationErrorOptions{
				NonRetryable: true, Details: []any{d.res}, Category: temporal.ApplicationErrorCategoryBenign,
			})
	}
	return d.res, nil
}
