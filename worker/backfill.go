package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/activities/ledger"
	"github.com/abde64c9/courier/internal/visibility"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// BackfillReport counts what a backfill did.
type BackfillReport struct {
	Runs    int `json:"runs"`    // closed Delivery runs read
	Written int `json:"written"` // rows written
	Kept    int `json:"kept"`    // keys the ledger already held: left as they were
	Skipped int `json:"skipped"` // runs that provably applied nothing, or whose key another run of the listing already wrote
}

// Backfill fills the outcome ledger from the closed Delivery runs the
// namespace still holds, so that a deployment that adds a ledger gains its
// memory without waiting: a run that recorded an effect writes it with its
// receipt, one that may have applied it (abandoned, terminated, timed out,
// failed otherwise) writes it as not known. A key the ledger already holds
// is left alone: the workers' own record is newer than anything here.
func Backfill(ctx context.Context, c client.Client, l ledger.Store, dc converter.DataConverter) (BackfillReport, error) {
	var rep BackfillReport
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	req := &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = %q AND ExecutionStatus != \"Running\"", workflows.WorkflowType),
	}
	done := map[string]bool{}
	for e, err := range visibility.Executions(ctx, c, req) {
		if err != nil {
			return rep, fmt.Errorf("list closed deliveries: %w", err)
		}
		rep.Runs++
		wid, rid := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
		entry, ok, err := backfillEntry(ctx, c, dc, wid, rid, e.GetCloseTime().AsTime())
		if err != nil {
			return rep, err
		}
		if !ok || done[entry.Key] {
			rep.Skipped++
			continue
		}
		if _, held, err := l.Get(ctx, entry.Key); err != nil {
			return rep, fmt.Errorf("read %s from the outcome ledger: %w", entry.Key, err)
		} else if held {
			rep.Kept++
			done[entry.Key] = true
			continue
		}
		if err := l.Put(ctx, entry); err != nil {
			return rep, fmt.Errorf("write %s to the outcome ledger: %w", entry.Key, err)
		}
		rep.Written++
		done[entry.Key] = true
	}
	return rep, nil
}

// backfillEntry is the ledger row a closed run stands for; ok is false for
// a run that provably applied nothing.
// Key, fingerprint and destination come from the run's own input, as the
// workflow derives them; the visibility attributes are labels any client
// may set.
func backfillEntry(ctx context.Context, c client.Client, dc converter.DataConverter, wid, rid string, closed time.Time) (ledger.Entry, bool, error) {
	in, err := runInput(ctx, c, dc, wid, rid)
	if err != nil {
		return ledger.Entry{}, false, err
	}
	fp, err := opkey.Fingerprint(in.Payload)
	if err != nil {
		return ledger.Entry{}, false, nil // refused at its start: it sent nothing
	}
	e := ledger.Entry{Key: opkey.Key(in.Operation), Fingerprint: fp, Status: ledger.StatusPending,
		Destination: in.Destination, WorkflowID: wid, RunID: rid, Recorded: closed}
	var res workflows.DeliveryResult
	err = c.GetWorkflow(ctx, wid, rid).Get(ctx, &res)
	if nd, ok := workflows.UndeliveredResult(err); ok {
		res, err = nd, nil
	}
	var failed *temporal.WorkflowExecutionError
	switch {
	case errors.As(err, &failed):
		// Stopped from outside (terminated, timed out) or failed otherwise:
		// it may have applied the operation.
		return e, true, nil
	case err != nil:
		return ledger.Entry{}, false, fmt.Errorf("read run %s of %s: %w", rid, wid, err)
	}
	if res.LeftNoEffect() {
		return ledger.Entry{}, false, nil
	}
	e.FirstAttempt = res.FirstApplying()
	switch res.Status {
	case workflows.StatusCreated, workflows.StatusDuplicate, workflows.StatusDeliveredByReview:
		if res.Receipt == nil {
			break // no receipt to answer with: not known
		}
		b, err := activities.EncodeReceipt(dc, res.Receipt)
		if err != nil {
			return ledger.Entry{}, false, err
		}
		e.Status, e.Receipt = string(res.Status), b
		if rec, ok := lastReviewPrincipal(res); ok {
			e.Principal = rec
		}
	case workflows.StatusAbandoned:
		e.Status = string(res.Status)
	}
	return e, true, nil
}

// lastReviewPrincipal is the verified principal of the decision that ended
// a delivery by review, if it carried a proof.
func lastReviewPrincipal(res workflows.DeliveryResult) (string, bool) {
	if res.Review == nil || len(res.Review.Decisions) == 0 {
		return "", false
	}
	p := res.Review.Decisions[len(res.Review.Decisions)-1].Principal
	return p, p != ""
}

// runInput is the input a run was started with, from its first event.
func runInput(ctx context.Context, c client.Client, dc converter.DataConverter, wid, rid string) (workflows.DeliveryInput, error) {
	var in workflows.DeliveryInput
	it := c.GetWorkflowHistory(ctx, wid, rid, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("run %s of %s has no history", rid, wid)
	}
	ev, err := it.Next()
	if err != nil {
		return in, fmt.Errorf("read the history of run %s of %s: %w", rid, wid, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return in, fmt.Errorf("run %s of %s: its first event is not its start", rid, wid)
	}
	if err := dc.FromPayloads(attrs.GetInput(), &in); err != nil {
		return in, fmt.Errorf("read the input of run %s of %s: %w", rid, wid, err)
	}
	return in, nil
}
