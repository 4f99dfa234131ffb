package bench

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// The ceiling: a bare workflow with one no-op activity, on a task queue of
// its own so it never competes with deliveries for a poller.
const (
	BareTaskQueue    = "courier-bench-bare"
	BareWorkflowType = "CourierBenchBare"
	NoopActivityType = "CourierBenchNoop"
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
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start the bare workflow's worker: %w", err)
	}
	return w, nil
}
