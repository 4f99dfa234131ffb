package gateclient

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/workflows"
)

// Anyone who may signal a gate can send it a report or ask it for the
// probe. What a Courier worker's attempt did is in its Delivery's history,
// which no signal writes: a gate checks the reports that would move its
// breaker, and the probes it would grant, against that record.

// VerifyReport is activity gate.ActivityVerifyReport: "" when the Delivery
// the report names recorded, for the Attempt it names at the asking gate's
// destination and key, the class reported (waiting for the attempt to end:
// a worker reports before its attempt returns); else why not.
func (g *Cache) VerifyReport(ctx context.Context, r gate.Report) (string, error) {
	dest, err := askingGate(ctx)
	if err != nil {
		return "", err
	}
	ref := r.Attempt
	switch {
	case ref == nil:
		return "it names no attempt", nil
	case ref.WorkflowID != workflows.WorkflowID(r.Key):
		return fmt.Sprintf("its attempt's workflow %s is not the delivery of key %s", ref.WorkflowID, r.Key), nil
	}
	for {
		a, why, err := g.attempt(ctx, *ref, dest, r.Key)
		if err != nil || why != "" {
			return why, err
		}
		if a.ended {
			switch {
			case a.outcome == nil:
				return "the attempt ended without an outcome (failed or timed out)", nil
			case a.outcome.Class == r.Class,
				// The breaker's probe that found it still down is recorded
				// as held: it spent nothing of its delivery's.
				r.Class.FoundDown() && a.outcome.Class == contract.ClassHeld:
				return "", nil
			}
			return fmt.Sprintf("the attempt recorded %s, not %s", a.outcome.Class, r.Class), nil
		}
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// VerifyProbe is activity gate.ActivityVerifyProbe: "" when the delivery
// of key has an Attempt at the asking gate's destination under way now,
// as the server records it; else why not.
func (g *Cache) VerifyProbe(ctx context.Context, key string) (string, error) {
	dest, err := askingGate(ctx)
	if err != nil {
		return "", err
	}
	desc, err := g.c.DescribeWorkflowExecution(ctx, workflows.WorkflowID(key), "")
	if err != nil {
		return "no delivery of key " + key + ": " + err.Error(), nil
	}
	run := desc.GetWorkflowExecutionInfo().GetExecution()
	for _, p := range desc.GetPendingActivities() {
		if p.GetActivityType().GetName() != workflows.ActivityAttempt {
			continue
		}
		a, why, err := g.attempt(ctx, gate.AttemptRef{WorkflowID: run.GetWorkflowId(), RunID: run.GetRunId(), ActivityID: p.GetActivityId()}, dest, key)
		if err != nil || why != "" {
			return why, err
		}
		if !a.ended {
			return "", nil
		}
	}
	return "the delivery of key " + key + " has no attempt under way", nil
}

// askingGate is the destination of the gate that scheduled the activity.
func askingGate(ctx context.Context) (string, error) {
	id := activity.GetInfo(ctx).WorkflowExecution.ID
	dest, ok := strings.CutPrefix(id, gate.IDPrefix)
	if !ok {
		return "", fmt.Errorf("workflow %s is not a destination's gate", id)
	}
	return dest, nil
}

// recordedAttempt is one Attempt activity as its Delivery's history has it.
type recordedAttempt struct {
	ended   bool
	outcome *activities.Outcome
}

// attempt reads Attempt ref from its Delivery's history; why says how it
// is not an attempt of the delivery of key at dest.
func (g *Cache) attempt(ctx context.Context, ref gate.AttemptRef, dest, key string) (recordedAttempt, string, error) {
	var a recordedAttempt
	desc, err := g.c.DescribeWorkflowExecution(ctx, ref.WorkflowID, ref.RunID)
	if err != nil {
		return a, "no such delivery run: " + err.Error(), nil
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != workflows.WorkflowType || info.GetTaskQueue() != workflows.TaskQueue {
		return a, fmt.Sprintf("workflow %s is a %q on %q, not a Delivery", ref.WorkflowID, info.GetType().GetName(), info.GetTaskQueue()), nil
	}
	var scheduled int64
	it := g.c.GetWorkflowHistory(ctx, ref.WorkflowID, ref.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return a, "", fmt.Errorf("read the history of %s: %w", ref.WorkflowID, err)
		}
		if s := e.GetActivityTaskScheduledEventAttributes(); s != nil && s.GetActivityId() == ref.ActivityID {
			if s.GetActivityType().GetName() != workflows.ActivityAttempt {
				return a, "activity " + ref.ActivityID + " is not an Attempt", nil
			}
			var req activities.Request
			if err := g.dc.FromPayloads(s.GetInput(), &req); err != nil {
				return a, "", fmt.Errorf("decode attempt %s of %s: %w", ref.ActivityID, ref.WorkflowID, err)
			}
			if err := req.Identify(); err != nil {
				return a, fmt.Sprintf("attempt %s is not its delivery's: %v", ref.ActivityID, err), nil
			}
			if req.Destination != dest || req.Key != key {
				return a, fmt.Sprintf("attempt %s is at %s for key %s", ref.ActivityID, req.Destination, req.Key), nil
			}
			scheduled = e.GetEventId()
			continue
		}
		if scheduled == 0 {
			continue
		}
		switch {
		case e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId() == scheduled:
			var out activities.Outcome
			if err := g.dc.FromPayloads(e.GetActivityTaskCompletedEventAttributes().GetResult(), &out); err != nil {
				return a, "", fmt.Errorf("decode the outcome of attempt %s of %s: %w", ref.ActivityID, ref.WorkflowID, err)
			}
			a.ended, a.outcome = true, &out
		case e.GetActivityTaskFailedEventAttributes().GetScheduledEventId() == scheduled,
			e.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId() == scheduled,
			e.GetActivityTaskCanceledEventAttributes().GetScheduledEventId() == scheduled:
			a.ended = true
		}
	}
	if scheduled == 0 {
		return a, "the delivery scheduled no attempt " + ref.ActivityID, nil
	}
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && !a.ended {
		a.ended = true
	}
	return a, "", nil
}
