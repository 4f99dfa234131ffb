package gate_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/workflows"
)

// TestGateOfRun: what a gate's latest run means, as workers and the
// starter read it. A running run is its memo; one that stopped without
// continuing keeps what it held, marked stopped; any other is no gate.
func TestGateOfRun(t *testing.T) {
	paused := &gate.DestinationState{Name: "legacy", State: gate.Paused, Breaker: gate.Breaker{State: gate.Closed},
		Paused: &gate.Pause{Reason: "INC-7", By: "alice", Until: time.Now().Add(-time.Minute)}}
	require.Same(t, paused, gate.OfRun(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, paused))
	for status, how := range map[enumspb.WorkflowExecutionStatus]string{
		enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED: "terminated",
		enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:   "canceled",
		enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:     "failed",
		enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:  "timed out",
	} {
		st := gate.OfRun(status, paused)
		require.NotNil(t, st, how)
		require.Equal(t, how, st.Stopped)
		require.Empty(t, paused.Stopped, "the memo read is not changed")
		hold, probe := st.Hold(time.Now())
		require.False(t, probe)
		require.Equal(t, string(workflows.StatePaused), hold.State, how)
		require.Contains(t, hold.Reason, "INC-7 (paused by alice); its gate was "+how+" while paused: courier destination resume legacy --by <YOUR-NAME>")
		require.True(t, hold.Until.IsZero(), "no gate runs to end the pause: it holds until an operator decides")
	}
	for _, status := range []enumspb.WorkflowExecutionStatus{
		enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
	} {
		require.Nil(t, gate.OfRun(status, paused), "%s is not a stopped gate", status)
	}
	require.Nil(t, gate.OfRun(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, nil), "stopped before it published anything")

	// An open breaker stopped: held, no probe (no gate to grant it).
	open := &gate.DestinationState{Name: "legacy", State: gate.Open,
		Breaker: gate.Breaker{State: gate.Open, Failures: 5, OpenedAt: time.Now().Add(-time.Hour), LastFailure: "503"}}
	hold, probe := gate.OfRun(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, open).Hold(time.Now())
	require.False(t, probe)
	require.Equal(t, string(workflows.StateCircuitOpen), hold.State)
	require.Contains(t, hold.Reason, "its gate was terminated while its breaker was open")
	_, probe = open.Hold(time.Now())
	require.True(t, probe, "running, past its cool-down: the probe")

	// Stopped while closed: holds nothing back.
	closed := &gate.DestinationState{Name: "legacy", State: gate.Closed, Breaker: gate.Breaker{State: gate.Closed}}
	hold, probe = gate.OfRun(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, closed).Hold(time.Now())
	require.Nil(t, hold)
	require.False(t, probe)
}
