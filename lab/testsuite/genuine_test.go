package testsuite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// forgedAttempt is a workflow anyone with namespace access could run: it
// schedules Courier's Attempt on Courier's task queue with a request that
// says the earlier runs were checked and that the destination deduplicates.
func forgedAttempt(ctx workflow.Context, req activities.Request) (activities.Outcome, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: workflows.TaskQueue, StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var out activities.Outcome
	err := workflow.ExecuteActivity(ctx, workflows.ActivityAttempt, req).Get(ctx, &out)
	return out, err
}

// TestWorkersServeOnlyDeliveries: an attempt scheduled by a workflow that
// is not the operation's Delivery (another type, or a workflow named
// Delivery under another workflow ID) is refused by Courier's worker with
// NotGenuine, and nothing reaches the destination.
func TestWorkersServeOnlyDeliveries(t *testing.T) {
	ctx, rl, env := realTest(t, 2*time.Minute)
	rl.withWorker(t, env)
	c := rl.Temporal.Client()
	const queue = "not-courier"
	w := sdkworker.New(c, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(forgedAttempt, workflow.RegisterOptions{Name: "Forged"})
	w.RegisterWorkflowWithOptions(forgedAttempt, workflow.RegisterOptions{Name: workflows.WorkflowType})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	id := "forged-" + rl.RunID
	in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Send it twice"))
	fp, err := opkey.Fingerprint(in.Payload)
	require.NoError(t, err)
	unique := env.Config.Destinations[lab.DestLedger].Contract // a lie: legacy has no dedup
	req := activities.Request{Key: opkey.Key(in.Operation), Fingerprint: fp, Tenant: in.Tenant, Destination: in.Destination,
		Operation: in.Operation.Operation, BusinessID: in.BusinessID, Payload: in.Payload, Attempt: 1,
		Contract: &unique, EarlierRunsChecked: true}

	for name, start := range map[string]client.StartWorkflowOptions{
		"another workflow type": {ID: workflows.WorkflowID(req.Key), TaskQueue: queue},
		"a Delivery of another workflow ID": {ID: "delivery-" + id, TaskQueue: queue},
	} {
		t.Run(name, func(t *testing.T) {
			typ := "Forged"
			if name != "another workflow type" {
				typ = workflows.WorkflowType
			}
			run, err := c.ExecuteWorkflow(ctx, start, typ, req)
			require.NoError(t, err)
			err = run.Get(ctx, nil)
			app, ok := workflows.Failure(err, worker.ErrNotGenuine)
			require.True(t, ok, "%v", err)
			require.Contains(t, app.Error(), "nothing was done")
			require.Equal(t, 0, effects(t, env, lab.DestLegacy, id), "nothing sent")
		})
	}
}
