// Package workflows holds Courier's deterministic orchestration: the Delivery
// workflow, the key and fingerprint it is built on, and the shared names.
package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
)

// a names the activities; the worker registers a real *Activities.
var a *activities.Activities

const (
	// attemptGrace lets an attempt report its own per-attempt timeout before
	// Temporal declares the attempt lost (a crashed worker).
	attemptGrace = 5 * time.Second
	// maxReviewRecords bounds how many review decisions one delivery keeps.
	maxReviewRecords = 100
)

// Deliveries runs Delivery workflows against the destinations configured on
// the worker. A destination's contract is part of the worker's deployment:
// it decides the retry budget and timeouts, and the attempt results it leads
// to are recorded in history, so replay never depends on it changing.
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
	d := &delivery{in: in, state: StateDelivering, reviewers: ds.reviewers}
	if err := d.setup(ctx); err != nil {
		return DeliveryResult{}, err
	}
	return d.run(ctx, ds.destinations)
}

// delivery is one workflow's state; handlers read it, run changes it.
type delivery struct {
	in    DeliveryInput
	state State
	res   DeliveryResult
	// decision is an accepted review decision not yet acted on.
	decision  *ReviewDecision
	reviewers []string
}

func (d *delivery) setup(ctx workflow.Context) error {
	// Derived here, not trusted from the caller: a pure function of the input.
	d.res.Key = Key(d.in.Operation)
	d.res.Fingerprint, _ = Fingerprint(d.in.Payload) // an invalid payload is rejected in run
	d.res.Attempts = []Attempt{}
	d.res.Events = []Event{}

	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (DeliveryStatus, error) {
		return DeliveryStatus{State: d.state, Operation: d.in.Operation, DeliveryResult: d.res}, nil
	}); err != nil {
		return fmt.Errorf("register query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateReview,
		func(ctx workflow.Context, rd ReviewDecision) (ReviewRecord, error) {
			return d.receiveReview(ctx, rd, "update"), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, rd ReviewDecision) error {
			if err := d.checkReview(rd); err != nil {
				// A named type, so callers in any SDK can tell a refusal apart.
				return temporal.NewApplicationError(err.Error(), ErrInvalidReview)
			}
			return nil
		}},
	); err != nil {
		return fmt.Errorf("register update: %w", err)
	}
	ch := workflow.GetSignalChannel(ctx, SignalReview)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			// Raw JSON so a malformed signal is recorded and ignored instead
			// of failing the workflow task.
			var raw json.RawMessage
			ch.Receive(ctx, &raw)
			var rd ReviewDecision
			// encoding/json is deterministic; workflowcheck only sees its reflection.
			//workflowcheck:ignore
			if err := json.Unmarshal(raw, &rd); err != nil {
				d.record(ctx, ReviewRecord{Via: "signal", Reason: "not a review decision: " + err.Error()})
				continue
			}
			d.receiveReview(ctx, rd, "signal")
		}
	})
	return nil
}

func (d *delivery) run(ctx workflow.Context, destinations map[string]contract.Destination) (DeliveryResult, error) {
	if err := d.in.Validate(); err != nil {
		return d.finish(ctx, StatusRejected, nil, err.Error())
	}
	if _, err := Fingerprint(d.in.Payload); err != nil {
		return d.finish(ctx, StatusRejected, nil, err.Error())
	}
	// One workflow per operation is what makes a second start join the
	// first; a hand-made ID would let a second delivery run beside it.
	if id := workflow.GetInfo(ctx).WorkflowExecution.ID; id != WorkflowID(d.res.Key) {
		return d.finish(ctx, StatusRejected, nil, fmt.Sprintf(
			"workflow ID %q does not match the operation: start it as %q", id, WorkflowID(d.res.Key)))
	}
	dest, ok := destinations[d.in.Destination]
	if !ok {
		return d.finish(ctx, StatusRejected, nil,
			fmt.Sprintf("destination %q is not configured on the workers", d.in.Destination))
	}
	if err := d.ensureSearchAttributes(ctx); err != nil {
		return DeliveryResult{}, err
	}
	c := dest.Contract
	queue := ActivityTaskQueue(d.in.Destination, dest)
	first := workflow.Now(ctx) // key retention counts from the first write
	deadline := first.Add(c.Retry.Deadline.D())
	budget := c.Retry.MaxAttempts

	for {
		out := d.attempt(ctx, c, queue)
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
			found, err := d.lookup(ctx, c, queue)
			if err != nil {
				if done, res, err := d.review(ctx, c, fmt.Sprintf(
					"attempt %d: %s (%s); the lookup that should tell whether it took effect failed: %v",
					len(d.res.Attempts), out.Class, out.Error, err)); done {
					return res, err
				}
				budget, deadline = len(d.res.Attempts)+c.Retry.MaxAttempts, workflow.Now(ctx).Add(c.Retry.Deadline.D())
				continue
			}
			if found.Found {
				return d.finish(ctx, StatusDuplicate, found.Receipt, "")
			}
		case contract.StepReview:
			evidence := fmt.Sprintf("attempt %d: %s (%s); destination %q (dedup %s) cannot deduplicate a retry",
				len(d.res.Attempts), out.Class, out.Error, d.in.Destination, c.Dedup)
			if keyExpired {
				evidence += fmt.Sprintf(" after its key retention of %s", c.KeyRetention)
			}
			if done, res, err := d.review(ctx, c, evidence); done {
				return res, err
			}
			// A reviewer's retry starts a fresh budget: they checked first.
			budget, deadline = len(d.res.Attempts)+c.Retry.MaxAttempts, workflow.Now(ctx).Add(c.Retry.Deadline.D())
			continue
		}

		// StepRetry, or a lookup that found nothing.
		n := len(d.res.Attempts)
		wait := max(c.Retry.Interval(n), out.RetryAfter)
		if n >= budget || workflow.Now(ctx).Add(wait).After(deadline) {
			return d.finish(ctx, StatusAttemptLimit, nil,
				fmt.Sprintf("retry budget spent after %d attempts; last: %s: %s", n, out.Class, out.Error))
		}
		d.event(ctx, n, "retry_scheduled", "in "+wait.String())
		d.setState(ctx, StateRetryWait)
		if err := workflow.Sleep(ctx, wait); err != nil {
			return DeliveryResult{}, err
		}
	}
}

// attempt runs one attempt and records it. An activity failure (the worker
// crashed, the attempt outlived its timeout) is an unknown outcome: the
// request may have been written.
func (d *delivery) attempt(ctx workflow.Context, c contract.Contract, queue string) activities.Outcome {
	n := len(d.res.Attempts) + 1
	d.setState(ctx, StateDelivering)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           queue,
		StartToCloseTimeout: c.Retry.AttemptTimeout.D() + attemptGrace,
		// One execution per attempt: the workflow decides about every retry,
		// because what is safe depends on the result and the contract.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	started := workflow.Now(ctx)
	var out activities.Outcome
	err := workflow.ExecuteActivity(ctx, a.Attempt, d.request(n)).Get(ctx, &out)
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && appErr.Type() == activities.ErrUnknownDestination:
		out = activities.Outcome{Class: contract.ClassRejected, Error: appErr.Message()}
	case err != nil:
		out = activities.Outcome{Class: contract.ClassUnknown, Error: "attempt lost: " + err.Error()}
	}
	d.res.Attempts = append(d.res.Attempts, Attempt{
		Number: n, Started: started, Ended: workflow.Now(ctx),
		Class: out.Class, StatusCode: out.StatusCode, Error: out.Error,
	})
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

func (d *delivery) request(n int) activities.Request {
	return activities.Request{
		Key: d.res.Key, Fingerprint: d.res.Fingerprint,
		Tenant: d.in.Tenant, Destination: d.in.Destination, Operation: d.in.Operation.Operation,
		BusinessID: d.in.BusinessID, Payload: d.in.Payload, Attempt: n,
	}
}

// lookup asks a lookup destination whether the last attempt took effect.
func (d *delivery) lookup(ctx workflow.Context, c contract.Contract, queue string) (activities.Found, error) {
	d.setState(ctx, StateReconciling)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           queue,
		StartToCloseTimeout: c.Retry.AttemptTimeout.D() + attemptGrace,
		// A read: retrying it is always safe.
		RetryPolicy: &temporal.RetryPolicy{
			MaximumAttempts:        5,
			InitialInterval:        c.Retry.InitialInterval.D(),
			NonRetryableErrorTypes: []string{activities.ErrUnknownDestination},
		},
	})
	var f activities.Found
	n := len(d.res.Attempts)
	if err := workflow.ExecuteActivity(ctx, a.Lookup, d.request(n)).Get(ctx, &f); err != nil {
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
func (d *delivery) review(ctx workflow.Context, c contract.Contract, evidence string) (done bool, res DeliveryResult, err error) {
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
	decided := func() bool { return d.decision != nil }
	for !decided() {
		if c.ReviewReminder <= 0 {
			if err := workflow.Await(ctx, decided); err != nil {
				return true, DeliveryResult{}, err
			}
			break
		}
		ok, err := workflow.AwaitWithTimeout(ctx, c.ReviewReminder.D(), decided)
		if err != nil {
			return true, DeliveryResult{}, err
		}
		if !ok {
			d.remind(ctx)
		}
	}
	rd := *d.decision
	d.decision = nil
	switch rd.Decision {
	case DecisionDelivered:
		res, err := d.finish(ctx, StatusDeliveredByReview,
			&activities.Receipt{ResourceID: rd.ResourceID, Status: "delivered_by_review"}, "")
		return true, res, err
	case DecisionAbandon:
		res, err := d.finish(ctx, StatusAbandoned, nil, "abandoned by "+rd.Reviewer+": "+rd.Note)
		return true, res, err
	}
	return false, DeliveryResult{}, nil
}

func (d *delivery) remind(ctx workflow.Context) {
	d.res.Review.Reminders++
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	r := activities.Reminder{
		Key: d.res.Key, Destination: d.in.Destination,
		Since: d.res.Review.Requested, Evidence: d.res.Review.Evidence,
	}
	detail := fmt.Sprintf("reminder %d", d.res.Review.Reminders)
	if err := workflow.ExecuteActivity(ctx, a.RemindReview, r).Get(ctx, nil); err != nil {
		detail += ": " + err.Error() // a failed reminder never ends the wait
	}
	d.event(ctx, len(d.res.Attempts), "review_reminder", detail)
}

// checkReview is the update validator and the signal's filter: a decision is
// acted on only when it is well formed and the delivery is waiting for one.
func (d *delivery) checkReview(rd ReviewDecision) error {
	if err := rd.Validate(); err != nil {
		return err
	}
	if len(d.reviewers) > 0 && !slices.Contains(d.reviewers, rd.Reviewer) {
		return fmt.Errorf("reviewer: %q may not review deliveries; allowed: %s", rd.Reviewer, strings.Join(d.reviewers, ", "))
	}
	if d.state != StateAwaitingReview || d.decision != nil {
		return fmt.Errorf("delivery %s is not awaiting review (state %s)", d.res.Key, d.stateName())
	}
	return nil
}

func (d *delivery) receiveReview(ctx workflow.Context, rd ReviewDecision, via string) ReviewRecord {
	rec := ReviewRecord{ReviewDecision: rd, Via: via}
	if err := d.checkReview(rd); err != nil {
		rec.Reason = err.Error()
	} else {
		rec.Accepted = true
		d.decision = &rd
	}
	return d.record(ctx, rec)
}

func (d *delivery) record(ctx workflow.Context, rec ReviewRecord) ReviewRecord {
	rec.Received = workflow.Now(ctx)
	if d.res.Review == nil {
		d.res.Review = &Review{}
	}
	if len(d.res.Review.Decisions) < maxReviewRecords {
		d.res.Review.Decisions = append(d.res.Review.Decisions, rec)
	}
	if rec.Accepted {
		d.event(ctx, len(d.res.Attempts), "review_decision",
			fmt.Sprintf("%s by %s: %s", rec.Decision, rec.Reviewer, rec.Note))
	} else {
		d.event(ctx, len(d.res.Attempts), "review_ignored", rec.Reason)
	}
	return rec
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

func (d *delivery) details() string {
	s := fmt.Sprintf("**%s** · %s → %s", d.stateName(), d.in.Operation.Operation, d.in.Destination)
	if n := len(d.res.Attempts); n > 0 {
		last := d.res.Attempts[n-1]
		s += fmt.Sprintf("\n\nattempt %d: %s", n, last.Class)
		if last.Error != "" {
			s += " (" + last.Error + ")"
		}
	}
	if d.state == StateAwaitingReview && d.res.Status == "" {
		s += fmt.Sprintf("\n\nwaiting for a review decision: `courier review %s --decision retry|delivered|abandon --reviewer NAME`", d.res.Key)
	}
	if d.res.Error != "" {
		s += "\n\n" + d.res.Error
	}
	return s
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
// not (a start from another SDK or the temporal CLI); the Go starter sets
// them in the start options so they cost no event.
func (d *delivery) ensureSearchAttributes(ctx workflow.Context) error {
	if _, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(SAKey); ok {
		return nil
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, OperationSearchAttributes(d.in.Operation, d.res.Key, StateDelivering)...); err != nil {
		return fmt.Errorf("upsert search attributes: %w", err)
	}
	return nil
}

// OperationSearchAttributes are a delivery's visibility attributes.
func OperationSearchAttributes(op Operation, key string, state State) []temporal.SearchAttributeUpdate {
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
	return d.res, nil
}
