package bench

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/temporalnexus"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
	"github.com/nexus-rpc/sdk-go/nexus"
)

// The ceiling: a bare workflow with one no-op activity, on a task queue of
// its own so it never competes with deliveries for a poller.
const (
	BareTaskQueue    = "courier-bench-bare"
	BareWorkflowType = "CourierBenchBare"
	NoopActivityType = "CourierBenchNoop"
)

// The ceiling of a call from workflow code: a Nexus operation that runs
// the bare workflow, served on the bare workflow's task queue.
const (
	BareEndpoint      = "courier-bench-bare"
	bareNexusService  = "courier-bench-bare"
	bareNexusOperaton = "run"
)

// BareWorkflow runs one no-op activity with the delivery's input, so both
// sides carry the same payload through history.
func BareWorkflow(ctx workflow.Context, in workflows.DeliveryInput) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var out string
	err := workflow.ExecuteActivity(ctx, NoopActivityType, in).Get(ctx, &out)
	return out, err
}

// bareNexus serves the bare Nexus operation: it starts the bare workflow
// under the ID its caller's input names, as Courier's handler starts a
// delivery under its key's.
func bareNexus() *nexus.Service {
	svc := nexus.NewService(bareNexusService)
	svc.MustRegister(temporalnexus.NewWorkflowRunOperation(bareNexusOperaton, BareWorkflow,
		func(_ context.Context, in workflows.DeliveryInput, _ nexus.StartOperationOptions) (client.StartWorkflowOptions, error) {
			return client.StartWorkflowOptions{ID: bareCallID(in)}, nil
		}))
	return svc
}

// bareCallID is the ID of the bare workflow a caller workflow runs for in.
func bareCallID(in workflows.DeliveryInput) string { return "bench-bare-call-" + in.BusinessID }

// Noop is the bare workflow's activity.
func Noop(context.Context, workflows.DeliveryInput) (string, error) { return "ok", nil }

// startBare starts the bare workflow's worker in this process. `courier
// worker` runs Courier's workflows only, so the ceiling's worker lives
// here, on the lab's client, with the options `courier worker` gives its
// own (the SDK's, with worker.WithDefaultPollers). What the comparison
// rests on is counted per workflow (frontend calls, database requests,
// events) or timed by the callers, over the same loopback server; the bare
// side's worker CPU shows under the bench's process, not the worker's.
func startBare(c client.Client) (sdkworker.Worker, error) {
	w := sdkworker.New(c, BareTaskQueue, worker.WithDefaultPollers(sdkworker.Options{}))
	w.RegisterWorkflowWithOptions(BareWorkflow, workflow.RegisterOptions{Name: BareWorkflowType})
	w.RegisterActivityWithOptions(Noop, activity.RegisterOptions{Name: NoopActivityType})
	w.RegisterWorkflowWithOptions(NexusCaller, workflow.RegisterOptions{Name: NexusCallerType})
	w.RegisterWorkflowWithOptions(ChildCaller, workflow.RegisterOptions{Name: ChildCallerType})
	w.RegisterWorkflowWithOptions(BareNexusCaller, workflow.RegisterOptions{Name: BareNexusCallerType})
	w.RegisterWorkflowWithOptions(BareChildCaller, workflow.RegisterOptions{Name: BareChildCallerType})
	w.RegisterNexusService(bareNexus())
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start the bare workflow's worker: %w", err)
	}
	return w, nil
}
