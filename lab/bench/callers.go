package bench

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/courierwf"
	"github.com/abde64c9/courier/workflows"
)

// Deliveries from workflow code: a caller workflow per delivery, through
// the Nexus endpoint (the bench's tenant) or as a child. Both run on the
// bare workflow's worker, in Courier's namespace, so that the server's
// counters of one namespace hold the caller's work and the delivery's: a
// caller in a namespace of its own costs the server the same.
const (
	SideNexus     = "courier-nexus"
	SideChild     = "courier-child"
	SideBareNexus = "bare-nexus"
	SideBareChild = "bare-child"

	benchTenant      = "bench"
	NexusCallerType  = "CourierBenchNexusCaller"
	ChildCallerType  = "CourierBenchChildCaller"
	nexusCallerIDTag = "bench-nexus-caller-"
	childCallerIDTag = "bench-child-caller-"

	BareNexusCallerType  = "CourierBenchBareNexusCaller"
	BareChildCallerType  = "CourierBenchBareChildCaller"
	bareNexusCallerIDTag = "bench-bare-nexus-caller-"
	bareChildCallerIDTag = "bench-bare-child-caller-"
)

// NexusCaller delivers in through endpoint, which fixes the tenant.
func NexusCaller(ctx workflow.Context, endpoint string, in workflows.DeliveryInput) (workflows.DeliveryResult, error) {
	return courierwf.NexusDeliver(ctx, endpoint, courierwf.NexusInput{
		Destination: in.Destination, Operation: in.Operation.Operation, BusinessID: in.BusinessID, Payload: in.Payload,
	}, workflow.NexusOperationOptions{CancellationType: workflow.NexusOperationCancellationTypeAbandon})
}

// ChildCaller delivers in as a child.
func ChildCaller(ctx workflow.Context, in workflows.DeliveryInput) (workflows.DeliveryResult, error) {
	return courierwf.Deliver(ctx, in)
}

// BareNexusCaller runs the bare workflow through the bare Nexus endpoint:
// the ceiling of NexusCaller.
func BareNexusCaller(ctx workflow.Context, in workflows.DeliveryInput) (string, error) {
	var out string
	err := workflow.NewNexusClient(BareEndpoint, bareNexusService).
		ExecuteOperation(ctx, bareNexusOperaton, in, workflow.NexusOperationOptions{}).Get(ctx, &out)
	return out, err
}

// BareChildCaller runs the bare workflow as a child: the ceiling of
// ChildCaller.
func BareChildCaller(ctx workflow.Context, in workflows.DeliveryInput) (string, error) {
	ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: bareCallID(in)})
	var out string
	err := workflow.ExecuteChildWorkflow(ctx, BareWorkflowType, in).Get(ctx, &out)
	return out, err
}

// callerSides are measured in the history phase only: what a delivery
// from workflow code costs against a plain Deliver. Each workflow's count
// is the caller's history and the delivery's.
func (r *runner) callerSides() []side {
	callerID := func(tag string) func(int64) string {
		return func(seq int64) string { return fmt.Sprintf("%s%s-%d", tag, r.runID, seq) }
	}
	bareCall := func(side string) func(int64) string {
		return func(seq int64) string { return bareCallID(r.input(DestKey, side, seq)) }
	}
	return []side{
		{name: SideBareNexus, do: r.callFromWorkflow(SideBareNexus, callerID(bareNexusCallerIDTag)), id: callerID(bareNexusCallerIDTag),
			delivery: bareCall(SideBareNexus)},
		{name: SideNexus, do: r.callFromWorkflow(SideNexus, callerID(nexusCallerIDTag)), id: callerID(nexusCallerIDTag),
			delivery: r.deliveryID(DestKey, SideNexus)},
		{name: SideBareChild, do: r.callFromWorkflow(SideBareChild, callerID(bareChildCallerIDTag)), id: callerID(bareChildCallerIDTag),
			delivery: bareCall(SideBareChild)},
		{name: SideChild, do: r.callFromWorkflow(SideChild, callerID(childCallerIDTag)), id: callerID(childCallerIDTag),
			delivery: r.deliveryID(DestKey, SideChild)},
	}
}

// callFromWorkflow starts the caller workflow of side for operation seq
// and waits for its answer.
func (r *runner) callFromWorkflow(side string, id func(int64) string) op {
	return func(ctx context.Context, seq int64) error {
		in := r.input(DestKey, side, seq)
		opts := client.StartWorkflowOptions{ID: id(seq), TaskQueue: BareTaskQueue}
		var run client.WorkflowRun
		var err error
		switch side {
		case SideNexus:
			run, err = r.st.client().ExecuteWorkflow(ctx, opts, NexusCallerType, r.st.endpoint, in)
		case SideChild:
			run, err = r.st.client().ExecuteWorkflow(ctx, opts, ChildCallerType, in)
		case SideBareNexus:
			run, err = r.st.client().ExecuteWorkflow(ctx, opts, BareNexusCallerType, in)
		default:
			run, err = r.st.client().ExecuteWorkflow(ctx, opts, BareChildCallerType, in)
		}
		if err != nil {
			return fmt.Errorf("start %s caller: %w", side, err)
		}
		if side == SideBareNexus || side == SideBareChild {
			var out string
			if err := run.Get(ctx, &out); err != nil {
				return fmt.Errorf("%s caller: %w", side, err)
			}
			return nil
		}
		var res workflows.DeliveryResult
		if err := run.Get(ctx, &res); err != nil {
			return fmt.Errorf("%s caller: %w", side, err)
		}
		if res.Status != workflows.StatusCreated {
			return fmt.Errorf("%s caller: delivery %s: status %s, want created", side, res.Key, res.Status)
		}
		return nil
	}
}
