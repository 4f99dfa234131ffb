package wftest

import (
	"github.com/stretchr/testify/require"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/abde64c9/courier/workflows"
)

// QueryStatus asks a test environment's delivery for its status.
func QueryStatus(env *sdktest.TestWorkflowEnvironment) (workflows.DeliveryStatus, error) {
	var st workflows.DeliveryStatus
	v, err := env.QueryWorkflow(workflows.QueryStatus)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// Execute runs the delivery of in to its end in env and returns its result:
// a delivered one completes, any other fails with its result.
func Execute(t require.TestingT, env *sdktest.TestWorkflowEnvironment, in workflows.DeliveryInput) workflows.DeliveryResult {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	env.ExecuteWorkflow(workflows.WorkflowType, in)
	require.True(t, env.IsWorkflowCompleted())
	var res workflows.DeliveryResult
	err := env.GetWorkflowError()
	if err == nil {
		require.NoError(t, env.GetWorkflowResult(&res))
		require.True(t, res.Status.Delivered(), "%s ended as completed", res.Status)
		return res
	}
	res, ok := workflows.NotDeliveredResult(err)
	require.True(t, ok, "not a NotDelivered failure: %v", err)
	require.False(t, res.Status.Delivered(), "%s ended as failed", res.Status)
	return res
}
