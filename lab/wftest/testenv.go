package wftest

import (
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/abde64c9/courier/internal/text/texttest"
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

// CurrentDetails are the web UI's current details of env's workflow, as the
// UI reads them (the SDK's metadata query); it fails t if a line of their
// code blocks would be cut in the UI's details panel.
func CurrentDetails(t require.TestingT, env *sdktest.TestWorkflowEnvironment) string {
	v, err := env.QueryWorkflow("__temporal_workflow_metadata")
	require.NoError(t, err)
	var meta sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&meta))
	require.Empty(t, texttest.WideFenced(meta.GetCurrentDetails()), "code block lines over %d characters", texttest.FenceWidth)
	return meta.GetCurrentDetails()
}

// Execute runs the delivery of in to its end in env and returns its result:
// a delivered one completes, any other fails with its result, typed
// NotDelivered only where nothing can have applied.
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
	res, ok := workflows.UndeliveredResult(err)
	require.True(t, ok, "not a NotDelivered or Unconfirmed failure: %v", err)
	require.False(t, res.Status.Delivered(), "%s ended as failed", res.Status)
	_, typed := workflows.Failure(err, res.FailureType())
	require.True(t, typed, "%s (nothing applied: %t) fails as %s: %v", res.Status, res.LeftNoEffect(), res.FailureType(), err)
	return res
}
