// Reviews: parking for a person, reminders and notices, and the
// decisions that arrive by signal, update or batch job.

package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/internal/text"
	"github.com/abde64c9/courier/reviewproof"
)

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
			ok, err = AwaitClosingTimer(ctx, reminder.D(), summary, decided)
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
		receipt := &activities.Receipt{ResourceID: rd.ResourceID, Status: "delivered_by_review", Source: activities.SourceReview}
		if err := d.recordOutcome(ctx, StatusDeliveredByReview, receipt); err != nil {
			return d.review(ctx, reminder, unrecorded(evidence, err), earlier)
		}
		res, err := d.finish(ctx, StatusDeliveredByReview, receipt, "")
		return true, res, err
	case DecisionAbandon:
		if err := d.recordOutcome(ctx, StatusAbandoned, nil); err != nil {
			return d.review(ctx, reminder, unrecorded(evidence, err), earlier)
		}
		res, err := d.finish(ctx, StatusAbandoned, nil, "abandoned by "+d.decidedBy+": "+rd.Note)
		return true, res, err
	}
	// The reviewer saw the earlier runs named in the evidence, and the
	// attempts so far.
	for _, r := range earlier {
		d.acknowledged = append(d.acknowledged, r.RunID)
	}
	d.reviewedThrough = len(d.res.Attempts)
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

// AwaitClosingTimer is workflow.AwaitWithOptions whose timer is canceled
// when the condition comes first, so nothing in the history looks pending.
func AwaitClosingTimer(ctx workflow.Context, timeout time.Duration, summary string, cond func() bool) (bool, error) {
	tctx, cancel := workflow.WithCancel(ctx)
	ok, err := workflow.AwaitWithOptions(tctx, workflow.AwaitOptions{
		Timeout: timeout, TimerOptions: workflow.TimerOptions{Summary: summary},
	}, cond)
	if ok && err == nil {
		cancel()
	}
	return ok, err
}

func (d *delivery) desk(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionReviewDesk, workflow.DefaultVersion, 1) == 1
}

// notify sends notice n (0: the delivery has parked; then each reminder) to
// the notifier, beside the wait: a notifier that is down never holds back a
// decision or the delivery.
func (d *delivery) notify(ctx workflow.Context, n int) {
	summary := fmt.Sprintf("notify: parked at %s, waiting for a review", text.Markdown(d.in.Destination))
	detail := "parked"
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
		var done string
		err := f.Get(ctx, &done)
		switch {
		case err != nil:
			detail += ": " + err.Error()
		case done != "":
			detail += ": " + done
		case n == 0:
			// Recorded before the activity said what it did.
			detail += ": " + activities.NoticeSent
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
// acted on only when it is well formed, the delivery is waiting for one and,
// where its recorded reviewers have keys, its proof verifies.
func (d *delivery) checkReview(ctx workflow.Context, rd ReviewDecision) error {
	_, err := d.check(ctx, rd, true)
	return err
}

// check is checkReview; placeholders false leaves a pasted placeholder as
// it was decided before they were refused. It returns what a proof proved.
func (d *delivery) check(ctx workflow.Context, rd ReviewDecision, placeholders bool) (reviewproof.Verified, error) {
	if err := rd.validate(placeholders); err != nil {
		return reviewproof.Verified{}, err
	}
	p := d.policy()
	if allowed := d.reviewers(); p == nil && len(allowed) > 0 && !slices.Contains(allowed, rd.Reviewer) {
		return reviewproof.Verified{}, fmt.Errorf("reviewer: %q may not review deliveries; allowed: %s", rd.Reviewer, strings.Join(allowed, ", "))
	}
	if err := d.awaiting(); err != nil {
		return reviewproof.Verified{}, err
	}
	if p == nil {
		return reviewproof.Verified{}, nil
	}
	// Pure computation over the recorded keys and the workflow's clock:
	// replay verifies alike. A batch job's decision carries the job's
	// proof, which each delivery checks against itself.
	var v reviewproof.Verified
	var err error
	if rd.BatchJob != "" {
		v, err = reviewproof.VerifyJob(rd.Proof, d.jobDelivery(rd), *p, workflow.Now(ctx))
	} else {
		v, err = reviewproof.Verify(rd.Proof, d.proofDecision(rd), *p, workflow.Now(ctx))
	}
	if err != nil {
		return v, fmt.Errorf("proof: %w", err)
	}
	return v, nil
}

// revoked refuses a verified decision whose signer the workers' current
// destinations file no longer lets decide it: the recorded policy says
// who could decide when the delivery parked, the file says who still
// may. The proof is pure computation; the file is read by a local
// activity, whose answer is recorded. An update's validator cannot run
// one, so its handler refuses such a decision (see setup).
func (d *delivery) revoked(ctx workflow.Context, rd ReviewDecision, v reviewproof.Verified) error {
	if v.Principal == "" || workflow.GetVersion(ctx, versionRevocation, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var why string
	if err := workflow.ExecuteLocalActivity(lctx, a.CheckSigner, activities.Signer{
		Key: d.res.Key, Destination: d.in.Destination, Reviewer: v.Principal, PublicKey: v.Key, Decision: rd.Decision,
	}).Get(ctx, &why); err != nil {
		return fmt.Errorf("the key of reviewer %s could not be checked against the workers' destinations file (%v): send the decision again", v.Principal, err)
	}
	if why != "" {
		return errors.New(why)
	}
	// Another decision may have been accepted while the file was read.
	return d.awaiting()
}

// awaiting refuses a decision when the delivery is not waiting for one.
func (d *delivery) awaiting() error {
	if d.state != StateAwaitingReview || d.decision != nil {
		return fmt.Errorf("delivery %s is not awaiting review (state %s)", d.res.Key, d.stateName())
	}
	return nil
}

// proofDecision is what a proof for rd must have signed here.
func (d *delivery) proofDecision(rd ReviewDecision) reviewproof.Decision {
	return reviewproof.Decision{
		Key: d.res.Key, Destination: d.in.Destination, Parked: d.res.Review.Requested,
		Decision: rd.Decision, ResourceID: rd.ResourceID, Note: rd.Note,
	}
}

// jobDelivery is this delivery as a job proof's filter sees it.
func (d *delivery) jobDelivery(rd ReviewDecision) reviewproof.JobDelivery {
	return reviewproof.JobDelivery{
		Destination: d.in.Destination, Tenant: d.in.Tenant, Operation: d.in.Operation.Operation,
		Parked: d.res.Review.Requested, BatchJob: rd.BatchJob, Decision: rd.Decision, Note: rd.Note,
	}
}

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
	// Asked only of a decision holding a placeholder: one recorded before
	// they were refused is decided again as it was.
	refuse := rd.Placeholders() == nil ||
		workflow.GetVersion(ctx, versionPlaceholders, workflow.DefaultVersion, 1) == 1
	v, err := d.check(ctx, rd, refuse)
	if err == nil {
		err = d.revoked(ctx, rd, v)
	}
	if err != nil {
		rec.Reason = text.Excerpt(err.Error(), maxReasonLen)
	} else {
		rec.Accepted, rec.Principal, rec.Policy = true, v.Principal, v.Policy
		rec.SignedJob = v.Principal != "" && rd.BatchJob != ""
		d.decision = &rd
		d.decidedBy = rd.Reviewer
		if v.Principal != "" {
			d.decidedBy = v.Principal + " (verified)"
		}
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
		if rec.Principal != "" {
			detail = fmt.Sprintf("%s by %s, verified (%s): %s", rec.Decision, rec.Principal, rec.Policy, rec.Note)
		}
		switch {
		case rec.SignedJob:
			detail += " (signed batch job " + rec.BatchJob + ")"
		case rec.BatchJob != "":
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

// recordOutcome writes the outcome a review decided into the workers'
// outcome ledger before the delivery reports it, so that a repeat after
// this run is gone answers it too (an abandoned one: parks again). The
// attempts write their own outcomes; only a decision made without one
// costs this step.
func (d *delivery) recordOutcome(ctx workflow.Context, st Status, receipt *activities.Receipt) error {
	if workflow.GetVersion(ctx, versionLedger, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	rec, _ := lastDecision(d.res.Review, true)
	// Decided, not yet reported: no longer waiting for a person, so a
	// caller waiting on the delivery waits for its end.
	d.setState(ctx, StateDelivering)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		// A ledger that is down is waited for a few minutes; then the
		// delivery parks again and says why.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
		Summary:     fmt.Sprintf("record %s of key %s in the outcome ledger", st, d.res.Key),
	})
	err := workflow.ExecuteActivity(ctx, a.RecordOutcome, activities.Decided{
		Key: d.res.Key, Fingerprint: d.res.Fingerprint, Destination: d.in.Destination,
		Status: string(st), Receipt: receipt, Principal: rec.Principal,
	}).Get(ctx, nil)
	if err != nil {
		d.event(ctx, len(d.res.Attempts), "ledger_unavailable", err.Error())
		d.logger(ctx).Error("a review's decision could not be recorded in the outcome ledger; parked again", "error", err)
	}
	return err
}

// unrecordedNote heads the evidence of a delivery parked again because its
// decision could not be recorded.
const unrecordedNote = "The last decision could not be recorded in the outcome ledger"

// unrecorded is that evidence: the note once, however often it happens, and
// the evidence the delivery first parked with.
func unrecorded(evidence string, err error) string {
	const sep = " Evidence: "
	if strings.HasPrefix(evidence, unrecordedNote) {
		if _, first, ok := strings.Cut(evidence, sep); ok {
			evidence = first
		}
	}
	return fmt.Sprintf("%s (%s): send it again once the ledger is back.%s%s", unrecordedNote, text.Excerpt(err.Error(), 200), sep, evidence)
}
