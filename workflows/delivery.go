// Package workflows holds Courier's deterministic orchestration: the Delivery
// workflow, what the web UI shows of it, and the names (task queue, signals,
// queries, updates, search attributes) every other package uses; the key
// and fingerprint it is built on are package opkey's. The worker registers
// it; the starter, the gates and callers' code import its types and names.
package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/internal/text"
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
	destinations map[string]Route
	reviewers    []string
}

// Route is what the workflow reads of a destination in the worker's file:
// its rate limit, for the task queue, and its contract, for the first
// attempt's timeout and for deliveries from before terms were recorded.
// The file itself (package destinations) stays out of the workflow.
type Route struct {
	RateLimit float64
	Contract  contract.Contract
}

// NewDeliveries returns the Delivery workflow for these destinations (by
// name) and reviewers.
func NewDeliveries(destinations map[string]Route, reviewers []string) *Deliveries {
	return &Deliveries{destinations: destinations, reviewers: reviewers}
}

// ActivityTaskQueue is where a destination's attempts run: a queue of its
// own when it has a rate limit, so the server enforces the limit across all
// workers.
func ActivityTaskQueue(name string, rateLimit float64) string {
	if rateLimit > 0 {
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
	// decision is an accepted review decision not yet acted on; decidedBy
	// names who made it, verified where a proof said so.
	decision  *ReviewDecision
	decidedBy string
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
	destinations    map[string]Route
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
	// first is when the run began, before its first attempt could write:
	// key retention counts from it.
	first time.Time
	// reviewedThrough is how many attempts there were when a reviewer
	// last decided retry: those before it are the reviewer's to judge.
	reviewedThrough int
	// heldLast: the last Attempt activity was held, so the next one looks
	// at the gate before anything is sent.
	heldLast bool
	// closed: finish has run to its end; a cancel after it changes nothing.
	closed bool
	// stateShown: CourierState has been published, by the start or by the
	// run, so its end publishes it too.
	stateShown bool
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
			rec := d.receiveReview(ctx, rd, "update")
			if !rec.Accepted {
				// Refused past the validator (a revoked key, or another
				// decision came first): recorded, and the caller is told.
				return rec, temporal.NewApplicationError(rec.Reason, ErrInvalidReview)
			}
			return rec, nil
		},
		workflow.UpdateHandlerOptions{Description: describeReviewUpdate, Validator: func(ctx workflow.Context, rd ReviewDecision) error {
			if err := d.checkReview(ctx, rd); err != nil {
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
			if r.Brief && d.res.Status != "" {
				st := DeliveryStatus{State: d.res.StateOr(d.state), DeliveryResult: DeliveryResult{Status: d.res.Status}}
				return Settled{DeliveryStatus: st, Starter: d.starter, Brief: true}, nil
			}
			return Settled{DeliveryStatus: d.status(), Starter: d.starter}, nil
		},
		workflow.UpdateHandlerOptions{Description: describeDeliver, Validator: func(ctx workflow.Context, r DeliverRequest) error {
			return d.checkDeliver(r, workflow.GetCurrentUpdateInfo(ctx).ID)
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
				d.record(ctx, ReviewRecord{Via: "signal", Reason: text.Excerpt("not a review decision: "+err.Error(), maxReasonLen)})
				continue
			}
			d.receiveReview(ctx, rd, "signal")
		}
	})
	return nil
}

// checkDeliver refuses a deliver update (of this ID) for another payload
// than the delivery's, before anything is recorded. The payload, when the
// request carries it, is fingerprinted here as the workflow's own input is: a
// caller whose SDK re-encodes the payload (1e2 as 100.0, say) re-encodes
// both alike, so its own start is never its own conflict. A delivery whose
// payload is invalid conflicts with nothing: it ends rejected, and that is
// every caller's answer.
func (d *delivery) checkDeliver(r DeliverRequest, updateID string) error {
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
	if named, ok := briefFingerprint(updateID); fp == "" && r.Brief && ok {
		// A brief request names its payload by the digits in its ID.
		if named != d.res.Fingerprint[:BriefFingerprintDigits] {
			return temporal.NewApplicationError(fmt.Sprintf(
				"delivery %s carries a payload with fingerprint %s; this request's begins %s: nothing was sent",
				d.res.Key, d.res.Fingerprint, named), ErrConflict, d.res.Fingerprint, named)
		}
		return nil
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
	st := DeliveryStatus{State: d.res.StateOr(d.state), Operation: d.in.Operation, DeliveryResult: d.res, Hold: d.held}
	if p := d.policy(); p != nil {
		st.KeyedReviewers = p.Source
	}
	return st
}

// settled: final, or parked waiting for a decision.
func (d *delivery) settled() bool {
	return d.res.Status != "" || (d.state == StateAwaitingReview && d.decision == nil)
}
