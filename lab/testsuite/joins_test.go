package testsuite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/courierwf"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// joinCaller delivers in from workflow code, as any caller does.
func joinCaller(ctx workflow.Context, in workflows.DeliveryInput) (workflows.DeliveryResult, error) {
	return courierwf.Deliver(ctx, in)
}

// earlierJoinCaller joins as callers built before the join's own task
// queue do: on the courier task queue, an hour per attempt.
func earlierJoinCaller(ctx workflow.Context, in workflows.DeliveryInput) (workflows.DeliveryResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: workflows.TaskQueue, StartToCloseTimeout: time.Hour, HeartbeatTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second,
			NonRetryableErrorTypes: []string{workflows.ErrNotDelivered, workflows.ErrUnconfirmed, workflows.ErrConflict, workflows.ErrInvalidRequest}},
	})
	var res workflows.DeliveryResult
	err := workflow.ExecuteActivity(ctx, workflows.ActivityJoinDelivery, in).Get(ctx, &res)
	return res, err
}

// TestJoinsLeaveAttemptSlots: Courier's workers with two activity slots;
// four caller workflows join a parked delivery (three through courierwf,
// one as callers built before the join's queue do) and wait. A new
// delivery's attempt still runs at once; when the parked delivery is
// abandoned, every caller learns it.
func TestJoinsLeaveAttemptSlots(t *testing.T) {
	ctx, rl, env := realTest(t, 3*time.Minute)
	c := rl.Temporal.Client()
	ws := worker.New(c, env.Config, worker.NewActivities(c, env.Config, env.Adapters),
		sdkworker.Options{MaxConcurrentActivityExecutionSize: 2})
	for _, w := range ws {
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}
	queue := "join-callers-" + rl.RunID
	cw := sdkworker.New(c, queue, sdkworker.Options{})
	cw.RegisterWorkflowWithOptions(joinCaller, workflow.RegisterOptions{Name: "JoinCaller"})
	cw.RegisterWorkflowWithOptions(earlierJoinCaller, workflow.RegisterOptions{Name: "EarlierJoinCaller"})
	require.NoError(t, cw.Start())
	t.Cleanup(cw.Stop)
	st := starter.New(c)

	id := "parked-" + rl.RunID
	in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Wait for a person"))
	require.NoError(t, env.Inject(lab.DestLegacy, closeAfterCommit(1)))
	parked, err := st.Deliver(ctx, in)
	require.NoError(t, err)
	require.Equal(t, workflows.StateAwaitingReview, parked.State)

	var runs []client.WorkflowRun
	for i, typ := range []string{"JoinCaller", "JoinCaller", "JoinCaller", "EarlierJoinCaller"} {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("%s-%d-%s", typ, i, rl.RunID), TaskQueue: queue}, typ, in)
		require.NoError(t, err)
		runs = append(runs, run)
	}
	// Waiting: at least as many joins running as there are slots.
	require.Eventually(t, func() bool {
		started := 0
		for _, r := range runs {
			d, err := c.DescribeWorkflowExecution(ctx, r.GetID(), r.GetRunID())
			require.NoError(t, err)
			for _, a := range d.GetPendingActivities() {
				if a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
					started++
				}
			}
		}
		return started >= 2
	}, time.Minute, 100*time.Millisecond, "the callers never joined")

	id = "beside-joins-" + rl.RunID
	began := time.Now()
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := st.Deliver(dctx, lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, "Not behind the joins")))
	require.NoError(t, err, "a delivery beside waiting joins did not settle in 20 s: its attempt had no slot")
	require.Equal(t, workflows.StatusCreated, res.Status)
	require.Less(t, time.Since(began), 10*time.Second, "the attempt waited for a slot")

	_, err = st.Review(ctx, parked.Key, workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "ops", Note: "test over"})
	require.NoError(t, err)
	for _, r := range runs {
		var out workflows.DeliveryResult
		err := r.Get(ctx, &out)
		_, ok := workflows.Failure(err, workflows.ErrUnconfirmed)
		require.True(t, ok, "%s: %v", r.GetID(), err)
	}
}
