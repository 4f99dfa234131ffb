package testsuite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
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
		"another workflow type":             {ID: workflows.WorkflowID(req.Key), TaskQueue: queue},
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

// TestGuardReadsEveryEarlierRun: a delivery created at a destination
// without dedup, then 55 runs of its workflow ID started by hand with
// another operation's input (each refuses itself), then the real request
// again, on a worker with no outcome ledger: the guard reads past the 55 to
// the run that applied it, and nothing is sent a second time.
func TestGuardReadsEveryEarlierRun(t *testing.T) {
	ctx, rl, env := realTest(t, 3*time.Minute)
	c := rl.Temporal.Client()
	ws := worker.New(c, env.Config, worker.NewActivities(c, env.Config, env.Adapters), sdkworker.Options{})
	for _, w := range ws {
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}
	st := starter.New(c)
	id := "hidden-" + rl.RunID
	in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Call the customer back"))
	first := deliverSettled(ctx, t, st, in)
	require.Equal(t, workflows.StatusCreated, first.Status, first.Error)
	desc, err := c.DescribeWorkflowExecution(ctx, workflows.WorkflowID(first.Key), "")
	require.NoError(t, err)
	firstRun := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()

	other := lab.Input(lab.DestLegacy, "other-"+id, lab.Ticket("other-"+id, "Not this one"))
	for range 55 {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: workflows.WorkflowID(first.Key), TaskQueue: workflows.TaskQueue,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, workflows.WorkflowType, other)
		require.NoError(t, err)
		_ = run.Get(ctx, nil) // it refuses itself: another operation's input
	}

	again := deliverSettled(ctx, t, st, in)
	require.Equal(t, workflows.StateAwaitingReview, again.State, "status %s: %s", again.Status, again.Error)
	require.Contains(t, again.Review.Evidence, firstRun, "the evidence names the run that applied it")
	require.Equal(t, 1, effects(t, env, lab.DestLegacy, id), "nothing sent a second time")
	_, err = st.Review(ctx, again.Key, workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "ops", Note: "guard test"})
	require.NoError(t, err)
}

// TestTenantsReachOnlyTheirDestinations: a destination that names its
// tenants refuses another tenant's delivery before anything is sent, and
// serves its own.
func TestTenantsReachOnlyTheirDestinations(t *testing.T) {
	ctx, rl, env := realTest(t, 2*time.Minute)
	d := env.Config.Destinations[lab.DestLegacy]
	d.Tenants = []string{"acme"}
	env.Config.Destinations[lab.DestLegacy] = d
	rl.withWorker(t, env)
	st := starter.New(rl.Temporal.Client())

	id := "tenants-" + rl.RunID
	other := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Globex's ticket"))
	other.Tenant = "globex"
	res := deliverSettled(ctx, t, st, other)
	require.Equal(t, workflows.StatusRejected, res.Status)
	require.Contains(t, res.Error, `tenant "globex" may not use destination "legacy"`)
	require.Equal(t, 0, effects(t, env, lab.DestLegacy, id), "nothing sent with acme's credentials")

	own := deliverSettled(ctx, t, st, lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Acme's ticket")))
	require.Equal(t, workflows.StatusCreated, own.Status, own.Error)
}

// forgedRecord schedules Courier's RecordOutcome as if a review had
// decided delivered: a row that would answer every repeat of the
// operation with a receipt nobody delivered.
func forgedRecord(ctx workflow.Context, d activities.Decided) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: workflows.TaskQueue, StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	return workflow.ExecuteActivity(ctx, workflows.ActivityRecordOutcome, d).Get(ctx, nil)
}

// TestLedgerWritesOnlyForTheirDelivery: a workflow that is not the
// operation's Delivery cannot make Courier's worker write the outcome
// ledger, so it cannot make a later request answer a receipt nobody
// delivered: refused NotGenuine, no row, and the real request is sent.
func TestLedgerWritesOnlyForTheirDelivery(t *testing.T) {
	ctx, rl, env := realTest(t, 2*time.Minute)
	rl.withWorker(t, env)
	c := rl.Temporal.Client()
	w := sdkworker.New(c, "not-courier-ledger", sdkworker.Options{})
	w.RegisterWorkflowWithOptions(forgedRecord, workflow.RegisterOptions{Name: "ForgedRecord"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	id := "forged-record-" + rl.RunID
	in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Really send it"))
	fp, err := opkey.Fingerprint(in.Payload)
	require.NoError(t, err)
	key := opkey.Key(in.Operation)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "forger-" + id, TaskQueue: "not-courier-ledger"}, "ForgedRecord",
		activities.Decided{Key: key, Fingerprint: fp, Destination: lab.DestLegacy, Status: string(workflows.StatusDeliveredByReview),
			Receipt: &activities.Receipt{ResourceID: "ticket-that-never-was"}})
	require.NoError(t, err)
	_, ok := workflows.Failure(run.Get(ctx, nil), worker.ErrNotGenuine)
	require.True(t, ok, "refused as not genuine")
	_, found, err := env.Outcomes.Get(ctx, key)
	require.NoError(t, err)
	require.False(t, found, "nothing written")

	res := deliverSettled(ctx, t, starter.New(c), in)
	require.Equal(t, workflows.StatusCreated, res.Status, res.Error)
	require.Equal(t, 1, effects(t, env, lab.DestLegacy, id))
}
