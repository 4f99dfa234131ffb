package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/wftest"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// TestRetryWaitIsPublished: a throttled attempt's wait for the next one is
// published as retry_wait, which operators count by visibility query, and
// taken back to delivering when the next attempt goes.
func TestRetryWaitIsPublished(t *testing.T) {
	cfg, acts := labWorker(t)
	var ts sdktest.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	worker.Register(env, cfg, acts)
	in := lab.Input(lab.DestHelpdesk, "retry-state", lab.Ticket("retry-state", "Replace the badge reader"))
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(opkey.Key(in.Operation))})

	c := cfg.Destinations[lab.DestHelpdesk].Contract
	env.OnActivity(workflows.ActivityAttempt, mock.Anything, mock.Anything).Return(activities.Outcome{
		Class: contract.ClassThrottled, StatusCode: 503, Error: "unavailable", RetryAfter: 20 * time.Second,
		Terms: &activities.Terms{Contract: &c},
	}, nil).Once()
	env.OnActivity(workflows.ActivityAttempt, mock.Anything, mock.Anything).Return(activities.Outcome{
		Class: contract.ClassCreated, StatusCode: 201, Receipt: &activities.Receipt{ResourceID: "ticket-1"},
	}, nil).Once()
	var published []string
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(workflows.SAState); ok {
			published = append(published, v)
		}
	}).Return()
	var waiting workflows.DeliveryStatus
	env.RegisterDelayedCallback(func() {
		var err error
		waiting, err = wftest.QueryStatus(env)
		require.NoError(t, err)
	}, 10*time.Second)

	res := wftest.Execute(t, env, in)
	require.Equal(t, workflows.StatusCreated, res.Status)
	require.Len(t, res.Attempts, 2)
	require.Equal(t, workflows.StateRetryWait, waiting.State)
	require.Equal(t, []string{"delivering", "retry_wait", "delivering", "created"}, published)
	env.AssertExpectations(t)
}
