package worker

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/workflows"
)

// ErrNotGenuine is the failure of an activity scheduled by a workflow that
// is not the one Courier would have scheduled it from: nothing was done.
const ErrNotGenuine = "NotGenuine"

// genuine makes Courier's activities act only for the runs the server says
// scheduled them: an attempt, a lookup or a ledger write only for a
// Delivery run whose workflow ID is the one the request's own operation
// derives (key and fingerprint recomputed, never taken from the request);
// a gate's activities only for that destination's gate. Anyone who may
// start workflows in the namespace can schedule an activity on Courier's
// task queues; what the server reports of the scheduler is what they
// cannot set.
type genuine struct {
	interceptor.WorkerInterceptorBase
}

func (*genuine) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &genuineActivity{}
	i.Next = next
	return i
}

type genuineActivity struct {
	interceptor.ActivityInboundInterceptorBase
}

func (g *genuineActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	if err := checkScheduler(info, in.Args); err != nil {
		activity.GetLogger(ctx).Warn("activity refused: its scheduler is not the workflow Courier schedules it from; nothing was done",
			"activity", info.ActivityType.Name, "workflow_type", info.WorkflowType.Name,
			"workflow_id", info.WorkflowExecution.ID, "run_id", info.WorkflowExecution.RunID, "why", err)
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s refused: %v; nothing was done", info.ActivityType.Name, err), ErrNotGenuine, nil)
	}
	return g.Next.ExecuteActivity(ctx, in)
}

// checkScheduler says why the run that scheduled this activity is not one
// Courier schedules it from; nil when it is.
func checkScheduler(info activity.Info, args []any) error {
	var wt string
	if info.WorkflowType != nil {
		wt = info.WorkflowType.Name
	}
	wid := info.WorkflowExecution.ID
	delivery := func(key string) error {
		if wt != workflows.WorkflowType {
			return fmt.Errorf("scheduled by a %q workflow, not a %s", wt, workflows.WorkflowType)
		}
		if wid != workflows.WorkflowID(key) {
			return fmt.Errorf("scheduled by workflow %s, not by the delivery of key %s", wid, key)
		}
		return nil
	}
	switch info.ActivityType.Name {
	case workflows.ActivityAttempt, workflows.ActivityLookup:
		req, ok := arg[activities.Request](args)
		if !ok {
			return fmt.Errorf("no request")
		}
		if err := req.Identify(); err != nil {
			return err
		}
		return delivery(req.Key)
	case workflows.ActivityRecordOutcome:
		d, ok := arg[activities.Decided](args)
		if !ok {
			return fmt.Errorf("no outcome")
		}
		return delivery(d.Key)
	case workflows.ActivityRemindReview:
		r, ok := arg[activities.Reminder](args)
		if !ok {
			return fmt.Errorf("no reminder")
		}
		return delivery(r.Key)
	case activityResolveTerms:
		// A local activity: only the worker running the workflow's task
		// runs it, and it only reads this worker's terms.
		if wt != workflows.WorkflowType && wt != gate.WorkflowType {
			return fmt.Errorf("scheduled by a %q workflow, not a %s or its gate", wt, workflows.WorkflowType)
		}
		return nil
	case activityCheckSigner:
		// A local activity too; it answers only for the delivery it names.
		sg, ok := arg[activities.Signer](args)
		if !ok {
			return fmt.Errorf("no signer")
		}
		return delivery(sg.Key)
	case activityNotifyGate, activityReleaseHeld:
		dest, ok := gateDestination(args)
		if !ok {
			return fmt.Errorf("no destination")
		}
		if wt != gate.WorkflowType || wid != gate.WorkflowID(dest) {
			return fmt.Errorf("scheduled by %s (%q), not by the gate of %q", wid, wt, dest)
		}
		return nil
	case gate.ActivityRecover, gate.ActivityVerifyReport, gate.ActivityVerifyProbe:
		// Each reads which gate asks from this same record.
		if wt != gate.WorkflowType || !strings.HasPrefix(wid, gate.IDPrefix) {
			return fmt.Errorf("scheduled by %s (%q), not by a destination's gate", wid, wt)
		}
		return nil
	case workflows.ActivityJoinDelivery:
		// Any workflow may ask for a delivery, as any service may: the join
		// starts or joins it through the workflow's own checks.
		return nil
	}
	return fmt.Errorf("not an activity Courier schedules")
}

// The names of the activities registered from activities.Activities that
// workflows.names does not list, as the SDK names them: the method's name.
const (
	activityResolveTerms = "ResolveTerms"
	activityCheckSigner  = "CheckSigner"
	activityNotifyGate   = "NotifyGate"
	activityReleaseHeld  = "ReleaseHeld"
)

// arg is the activity's one argument as T.
func arg[T any](args []any) (T, bool) {
	var zero T
	if len(args) != 1 {
		return zero, false
	}
	switch v := args[0].(type) {
	case T:
		return v, true
	case *T:
		if v != nil {
			return *v, true
		}
	}
	return zero, false
}

// gateDestination is the destination a gate's activity names.
func gateDestination(args []any) (string, bool) {
	if n, ok := arg[activities.GateNotice](args); ok {
		return n.Destination, true
	}
	return arg[string](args)
}
