// The run loop: attempts, what each outcome means under the recorded
// contract, holds at a paused or broken destination, lookups.

package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/internal/text"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/reviewproof"
)

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
	d.first = workflow.Now(ctx) // key retention counts from the first write
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
			held := holdOf(out)
			if err := d.hold(ctx, held); err != nil {
				return DeliveryResult{}, err
			}
			if c := d.recorded(); c != nil && d.sendPastRetention(ctx, *c) {
				d.reason = d.retentionReason(*c)
				if done, res, err := d.review(ctx, c.ReviewReminder, d.retentionEvidence(*c, fmt.Sprintf(
					"the send after attempt %d was held (%s: %s) until now", len(d.res.Attempts), held.State, held.Reason)), nil); done {
					return res, err
				}
				// As after any review: the reviewer's retry starts a fresh budget.
				d.budget, deadline, d.heldFor = len(d.res.Attempts)+c.Retry.MaxAttempts, workflow.Now(ctx).Add(c.Retry.Deadline.D()), 0
			}
			continue
		}
		n := len(d.res.Attempts)
		if out.Class == contract.ClassUnconfigured && d.nothingAppliedBefore() {
			// Nothing was ever sent: the request named a destination the
			// workers do not have, and may be corrected and sent again.
			return d.finish(ctx, StatusRejected, nil, out.Error)
		}
		if out.Terms == nil && out.TermsDigest != "" {
			// Created or replayed end alike under any contract: the attempt
			// named its terms instead of recording them, and nothing is
			// left to decide from them.
			switch out.Class {
			case contract.ClassCreated:
				return d.finish(ctx, StatusCreated, out.Receipt, "")
			case contract.ClassReplayed:
				return d.finish(ctx, StatusDuplicate, out.Receipt, "")
			}
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
			d.budget, deadline = c.Retry.MaxAttempts, d.first.Add(c.Retry.Deadline.D())
		}
		wait := max(c.Retry.Interval(n), out.RetryAfter)
		step, keyExpired := d.next(ctx, *c, out.Class, wait)
		switch step {
		case contract.StepCreated:
			return d.finish(ctx, StatusCreated, out.Receipt, "")
		case contract.StepDuplicate:
			return d.finish(ctx, StatusDuplicate, out.Receipt, "")
		case contract.StepConflict:
			return d.finish(ctx, StatusConflict, nil, out.Error)
		case contract.StepRejected:
			return d.finish(ctx, StatusRejected, nil, out.Error)
		case contract.StepLookup:
			if err := d.settle(ctx, *c); err != nil {
				return DeliveryResult{}, err // canceled
			}
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
			case keyExpired && out.Class.NothingApplied():
				evidence = d.retentionEvidence(*c, fmt.Sprintf("attempt %d: %s (%s)", n, out.Class, out.Error))
			case keyExpired:
				evidence += fmt.Sprintf(" that would arrive after its key retention of %s", c.KeyRetention)
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
		if n >= d.budget || workflow.Now(ctx).Add(wait).After(deadline.Add(d.heldFor)) {
			return d.finish(ctx, StatusAttemptLimit, nil,
				fmt.Sprintf("retry budget spent after %d attempts; last: %s: %s", n, out.Class, out.Error))
		}
		d.event(ctx, n, "retry_scheduled", "in "+wait.String())
		if err := d.retryWait(ctx, wait, backoffSummary(wait, n, out)); err != nil {
			return DeliveryResult{}, err
		}
	}
}

// next is Next's step after an attempt of class cl, and whether it is
// taken because the next send could reach the destination past its key
// retention since the first attempt (Next's keyExpired). Three rules have decided it:
// first whether the retention had passed at the decision; then
// (retention-at-send) whether a retry after an uncertain attempt could
// arrive past it; now (retention-after-uncertain) whether any send could
// arrive past it once an attempt of this run may have applied. Each
// version is asked only where its rule and the one before lead to
// different steps, so the happy path and every other history write no
// marker.
func (d *delivery) next(ctx workflow.Context, c contract.Contract, cl contract.Class, wait time.Duration) (contract.Step, bool) {
	now := workflow.Now(ctx)
	atDecision := c.KeyExpired(d.first, now)
	atArrival := c.KeyExpired(d.first, c.RetryArrival(now, wait))
	// The older rules passed keyExpired to a table that read it only
	// after an attempt that may have applied.
	uncertain := !cl.NothingApplied()
	expired, step := atDecision, c.Next(cl, atDecision && uncertain)
	if s := c.Next(cl, atArrival && uncertain); s != step {
		if workflow.GetVersion(ctx, versionRetentionAtSend, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return step, expired
		}
		expired, step = atArrival, s
	}
	if s := c.Next(cl, atArrival && d.mayHaveApplied()); s != step &&
		workflow.GetVersion(ctx, versionRetentionAfterUncertain, workflow.DefaultVersion, 1) == 1 {
		expired, step = atArrival, s
	}
	return step, expired
}

// sendPastRetention reports whether the send after a hold should park
// instead: an attempt of this run may have applied, and the send could
// reach the destination past its key retention. It asks the
// table as for an attempt that applied nothing, which a hold is.
// Deliveries from before the rule sent; the version is asked only where
// the rule parks.
func (d *delivery) sendPastRetention(ctx workflow.Context, c contract.Contract) bool {
	expired := d.mayHaveApplied() && c.KeyExpired(d.first, c.RetryArrival(workflow.Now(ctx), 0))
	return c.Next(contract.ClassNotSent, expired) == contract.StepReview &&
		workflow.GetVersion(ctx, versionRetentionAfterUncertain, workflow.DefaultVersion, 1) == 1
}

// mayHaveApplied: an attempt since a reviewer last decided retry may have
// taken effect. The reviewer's retry is theirs: they checked the attempts
// before it.
func (d *delivery) mayHaveApplied() bool {
	return !nothingApplied(d.res.Attempts[d.reviewedThrough:])
}

// lastMayHaveApplied is the number of the last attempt that may have
// taken effect.
func (d *delivery) lastMayHaveApplied() int {
	n := 0
	for _, at := range d.res.Attempts {
		if !at.Class.NothingApplied() {
			n = at.Number
		}
	}
	return n
}

// startLatency is what the server's timers and task dispatch may add to
// the start a decision chose; an attempt later than that has waited for
// something else (no worker, a rate-limited task queue).
const startLatency = 5 * time.Second

// startBy is the last moment an attempt may start, once an attempt since a
// reviewer last decided retry may have applied at a key destination that
// declares a key retention: the latest start the decision allowed (its
// request reaching the destination within the retention), plus
// startLatency. Zero where no such limit applies. The bound is a
// schedule-to-start timeout, which adds no command.
func (d *delivery) startBy() time.Time {
	c := d.recorded()
	if c == nil || c.Dedup != contract.DedupKey || c.KeyRetention <= 0 || !d.mayHaveApplied() {
		return time.Time{}
	}
	return d.first.Add(c.KeyRetention.D() - c.Retry.AttemptTimeout.D() + startLatency)
}

// retentionEvidence is the review's evidence when what parks is a send
// after what (which applied nothing), because an earlier attempt may have.
func (d *delivery) retentionEvidence(c contract.Contract, what string) string {
	return fmt.Sprintf("%s; attempt %d may have applied, and destination %q (dedup %s) cannot deduplicate a send that would arrive after its key retention of %s",
		what, d.lastMayHaveApplied(), d.in.Destination, c.Dedup, c.KeyRetention)
}

// retentionReason is the park reason that goes with retentionEvidence.
func (d *delivery) retentionReason(c contract.Contract) string {
	return fmt.Sprintf("attempt %d may have applied it, and the next send would arrive after %s's key retention of %s, "+
		"when it may no longer recognise the key, so it could apply it twice: check the destination",
		d.lastMayHaveApplied(), d.in.Destination, c.KeyRetention)
}

// retryWait waits before the next attempt, in state retry_wait, which it
// publishes for visibility queries while it waits (so an operator can
// count the deliveries retrying at a destination) and takes back after.
func (d *delivery) retryWait(ctx workflow.Context, wait time.Duration, summary string) error {
	d.setState(ctx, StateRetryWait)
	published := workflow.GetVersion(ctx, versionRetryState, workflow.DefaultVersion, 1) == 1
	if published {
		if err := d.upsertState(ctx); err != nil {
			return err
		}
	}
	// Summaries name what the history's timers and activities are for.
	if err := workflow.NewTimerWithOptions(ctx, wait, workflow.TimerOptions{Summary: summary}).Get(ctx, nil); err != nil {
		return err
	}
	if !published {
		return nil
	}
	d.setState(ctx, StateDelivering)
	return d.upsertState(ctx)
}

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

// holdOf is why a held outcome was held.
func holdOf(out activities.Outcome) *activities.Hold {
	if out.Hold == nil {
		return &activities.Hold{State: string(StateCircuitOpen), Reason: "held"}
	}
	return out.Hold
}

// hold waits while the destination is paused or its breaker is open, until
// the gate releases the delivery or it is time to look again. Held outcomes
// come only from workers that have the gate, so no earlier history takes
// this path.
func (d *delivery) hold(ctx workflow.Context, h *activities.Hold) error {
	d.holds++
	d.heldLast = true
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
	summary := fmt.Sprintf("held: %s at %s; look again in %s", strings.ReplaceAll(h.State, "_", " "), text.Markdown(d.in.Destination), wait.Round(time.Second))
	if _, err := AwaitClosingTimer(ctx, wait, summary, func() bool { return d.released }); err != nil {
		return err
	}
	d.heldFor += workflow.Now(ctx).Sub(start)
	d.held = nil
	d.setState(ctx, StateDelivering)
	return d.upsertState(ctx)
}

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
	t, err := ResolveTerms(ctx, d.in.Destination)
	if err != nil {
		return nil, err
	}
	d.terms = &t
	return t.Contract, nil
}

// ResolveTerms records the worker's current terms for a destination in
// history, by a local activity: a marker in the workflow task, no round
// trip to the server.
func ResolveTerms(ctx workflow.Context, destination string) (activities.Terms, error) {
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

// policy is the recorded reviewers' keys and what each may decide; nil
// where they have none (or for a delivery from before terms were
// recorded): decisions then carry no proof.
func (d *delivery) policy() *reviewproof.Policy {
	if d.terms == nil {
		return nil
	}
	return d.terms.Policy
}

// nothingAppliedBefore: no attempt before the last one can have taken effect.
func (d *delivery) nothingAppliedBefore() bool {
	return nothingApplied(d.res.Attempts[:len(d.res.Attempts)-1])
}

// nothingApplied: none of these attempts can have taken effect.
func nothingApplied(attempts []Attempt) bool {
	for _, at := range attempts {
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
		queue, timeout = ActivityTaskQueue(d.in.Destination, dest.RateLimit), dest.Contract.Retry.AttemptTimeout.D()
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
	// The decision counted the wait it chose, not the time until this
	// workflow task ran (a worker down) nor a wait in a rate-limited
	// destination's task queue: an attempt that starts after startBy could
	// reach the destination past its key retention.
	startBy := d.startBy()
	late := fmt.Sprintf("not sent: no worker started it by %s, past which it could reach the destination after its key retention",
		startBy.UTC().Format(time.RFC3339Nano))
	var out activities.Outcome
	var err error
	if !startBy.IsZero() && !started.Before(startBy) && workflow.GetVersion(ctx, versionRetentionAfterUncertain, workflow.DefaultVersion, 1) == 1 {
		out = activities.Outcome{Class: contract.ClassNotSent, Error: late}
	} else {
		if !startBy.IsZero() && started.Before(startBy) {
			ctx = workflow.WithScheduleToStartTimeout(ctx, startBy.Sub(started))
		}
		req := d.request(ctx, n)
		d.released = false
		err = workflow.ExecuteActivity(ctx, a.Attempt, req).Get(ctx, &out)
	}
	d.heldLast = false
	var appErr *temporal.ApplicationError
	var timeoutErr *temporal.TimeoutError
	switch {
	case errors.As(err, &appErr) && appErr.Type() == activities.ErrUnknownDestination:
		out = activities.Outcome{Class: contract.ClassUnconfigured, Error: appErr.Message()}
	case errors.As(err, &timeoutErr) && timeoutErr.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
		out = activities.Outcome{Class: contract.ClassNotSent, Error: late} // no worker took it
	case err != nil:
		out = activities.Outcome{Class: contract.ClassUnknown, Error: "attempt lost: " + err.Error()}
	}
	// The first attempt's terms are recorded; so are those of the first
	// attempt that found the destination after it had gone missing.
	if out.Terms != nil && d.recorded() == nil {
		d.terms = out.Terms
	}
	terms := out.TermsDigest
	if terms == "" && d.terms != nil {
		terms = d.terms.Digest()
	}
	d.earlierRunsChecked = d.earlierRunsChecked || out.EarlierRunsChecked
	if out.Class == contract.ClassHeld {
		return out // not an attempt: the destination never saw it
	}
	d.res.Attempts = append(d.res.Attempts, Attempt{
		Number: n, Started: started, Ended: workflow.Now(ctx),
		Class: out.Class, StatusCode: out.StatusCode, Error: out.Error, Terms: terms,
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
	switch {
	case out.Class == contract.ClassReplayed && out.Receipt != nil && out.Receipt.Source == activities.SourceLookup:
		d.event(ctx, n, "lookup_found", out.Receipt.ResourceID+" (looked up before sending again: nothing sent)")
	case out.Class == contract.ClassCreated || out.Class == contract.ClassReplayed:
		d.event(ctx, n, "receipt_received", fmt.Sprintf("%s, status %d", out.Class, out.StatusCode))
	case out.Class == contract.ClassUnknown || out.Class == contract.ClassServerError:
		d.event(ctx, n, "outcome_uncertain", out.Error)
	default:
		d.event(ctx, n, string(out.Class), out.Error)
	}
	return out
}

func (d *delivery) request(ctx workflow.Context, n int) activities.Request {
	info := workflow.GetInfo(ctx)
	// No key or fingerprint: the worker derives them (Request.Identify).
	return activities.Request{
		Tenant: d.in.Tenant, Destination: d.in.Destination, Operation: d.in.Operation.Operation,
		BusinessID: d.in.BusinessID, Payload: d.in.Payload, Attempt: n,
		Contract: d.recorded(),
		// A reset run copies the checks of the run it was reset from, which
		// is now an earlier run itself: it looks again.
		EarlierRunsChecked: d.earlierRunsChecked && info.OriginalRunID == info.WorkflowExecution.RunID,
		AcknowledgedRuns:   d.acknowledged,
		Released:           d.released,
		MayHaveApplied:     !nothingApplied(d.res.Attempts),
		TermsByDigest:      true,
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

// settle waits until the destination's settle time has passed since the
// last attempt ended, as this delivery recorded it: the latest moment its
// request can have reached the destination. A destination that commits
// from a queue would otherwise answer "not found" for an effect it is
// still making, and the resend would make a second one. Deliveries from
// before the wait look at once, as they did.
func (d *delivery) settle(ctx workflow.Context, c contract.Contract) error {
	last := d.res.Attempts[len(d.res.Attempts)-1]
	wait := last.Ended.Add(c.SettleTime()).Sub(workflow.Now(ctx))
	if wait <= 0 || workflow.GetVersion(ctx, versionSettle, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	d.setState(ctx, StateReconciling)
	d.event(ctx, last.Number, "settle_wait", fmt.Sprintf("%s, the settle time of %s, before the lookup", wait, d.in.Destination))
	return workflow.NewTimerWithOptions(ctx, wait, workflow.TimerOptions{Summary: fmt.Sprintf(
		"settle: give %s %s to show attempt %d's effect before looking it up", text.Markdown(d.in.Destination), wait, last.Number)}).Get(ctx, nil)
}
