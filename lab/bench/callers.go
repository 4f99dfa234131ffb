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
	SideNexus = "courier-nexus"
	SideChild = "courier-child"

	benchTenant      = "bench"
	NexusCallerType  = "CourierBenchNexusCaller"
	ChildCallerType  = "CourierBenchChildCaller"
	nexusCallerIDTag = "bench-nexus-caller-"
	childCallerIDTag = "bench-child-caller-"
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

// callerSides are measured in the history phase only: what a delivery
// from workflow code costs against a plain Deliver. Each workflow's count
// is the caller's history and the delivery's.
func (r *runner) callerSides() []side {
	callerID := func(tag string) func(int64) string {
		return func(seq int64) string { return fmt.Sprintf("%s%s-%d", tag, r.runID, seq) }
	}
	return []side{
		{name: SideNexus, do: r.callFromWorkflow(SideNexus, callerID(nexusCallerIDTag)), id: callerID(nexusCallerIDTag),
			delivery: r.deliveryID(DestKey, SideNexus)},
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
		if side == SideNexus {
			run, err = r.st.client().ExecuteWorkflow(ctx, opts, NexusCallerType, r.st.endpoint, in)
		} else {
			run, err = r.st.client().ExecuteWorkflow(ctx, opts, ChildCallerType, in)
		}
		if err != nil {
			return fmt.Errorf("start %s caller: %w", side, err)
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
