package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/abde64c9/courier/workflows"
)

// TestGateOfRun: what a gate's latest run means, as workers and the
// starter read it. A running run is its memo; one that stopped without
// continuing keeps what it held, marked stopped; any other is no gate.
func TestGateOfRun(t *testing.T) {
	paused := &workflows.DestinationState{Name: "legacy", State: workflows.GatePaused,
		Paused: &workflows.Pause{Reason: "INC-7", By: "alice", Until: time.Now().Add(-time.Minute)}}
	require.Same(t, paused, workflows.GateOfRun(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, paused))
	for status, how := range map[enumspb.WorkflowExecutionStatus]string{
		enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED: "terminated",
		enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:   "canceled",
		enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:     "failed",
		enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:  "timed out",
	} {
		st := workflows.GateOfRun(status, paused)
		require.NotNil(t, st, how)
		require.Equal(t, how, st.Stopped)
		require.Empty(t, paused.Stopped, "the memo read is not changed")
		hold, probe := st.Hold(time.Now())
		require.False(t, probe)
		require.Equal(t, string(workflows.StatePaused), hold.State, how)
		require.Contains(t, hold.Reason, "INC-7 (paused by alice); its gate was "+how+" while paused: courier destination resume legacy --by NAME")
		require.True(t, hold.Until.IsZero(), "no gate runs to end the pause: it holds until an operator decides")
	}
	for _, status := range []enumspb.WorkflowExecutionStatus{
		enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
	} {
		require.Nil(t, workflows.GateOfRun(status, paused), "%s is not a stopped gate", status)
	}
	require.Nil(t, workflows.GateOfRun(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, nil), "stopped before it published anything")

	// An open breaker stopped: held, no probe (no gate to grant it).
	open := &workflows.DestinationState{Name: "legacy", State: workflows.GateOpen,
		Breaker: workflows.Breaker{State: workflows.GateOpen, Failures: 5, OpenedAt: time.Now().Add(-time.Hour), LastFailure: "503"}}
	hold, probe := workflows.GateOfRun(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, open).Hold(time.Now())
	require.False(t, probe)
	require.Equal(t, string(workflows.StateCircuitOpen), hold.State)
	require.Contains(t, hold.Reason, "its gate was terminated while its breaker was open")
	_, probe = open.Hold(time.Now())
	require.True(t, probe, "running, past its cool-down: the probe")

	// Stopped while closed: holds nothing back.
	closed := &workflows.DestinationState{Name: "legacy", State: workflows.GateClosed, Breaker: workflows.Breaker{State: workflows.GateClosed}}
	hold, probe = workflows.GateOfRun(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, closed).Hold(time.Now())
	require.Nil(t, hold)
	require.False(t, probe)
}

// TestLatestGateRun: of a gate's listed runs, a running one wins over
// stopped ones in any order, and of stopped ones the last to close.
func TestLatestGateRun(t *testing.T) {
	now := time.Now()
	running := workflows.GateRun{Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	old := workflows.GateRun{Status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, CloseTime: now.Add(-time.Hour)}
	recent := workflows.GateRun{Status: enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, CloseTime: now}
	require.True(t, workflows.LatestGateRun(old, running))
	require.True(t, workflows.LatestGateRun(recent, running))
	require.False(t, workflows.LatestGateRun(running, recent))
	require.False(t, workflows.LatestGateRun(running, old))
	require.True(t, workflows.LatestGateRun(old, recent))
	require.False(t, workflows.LatestGateRun(recent, old))
	require.False(t, workflows.LatestGateRun(running, running))
}
