package gateclient

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
)

func gateRun(t *testing.T, dest string, status enumspb.WorkflowExecutionStatus, closed time.Time, state string) *workflowpb.WorkflowExecutionInfo {
	st := gate.DestinationState{Name: dest, State: state, Breaker: gate.Breaker{State: gate.Closed}}
	if state == gate.Paused {
		st.Paused = &gate.Pause{Reason: "INC-7", By: "alice"}
	}
	p, err := converter.GetDefaultDataConverter().ToPayload(st)
	require.NoError(t, err)
	info := &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: gate.WorkflowID(dest)},
		Status:    status, Memo: &commonpb.Memo{Fields: map[string]*commonpb.Payload{gate.Memo: p}},
	}
	if !closed.IsZero() {
		info.CloseTime = timestamppb.New(closed)
	}
	return info
}

// TestReadAllKeepsStoppedPauses: one listing of the gates' runs; per gate
// a running run wins, else the latest stopped one, and Read reads a
// latest run the same way.
func TestReadAllKeepsStoppedPauses(t *testing.T) {
	now := time.Now()
	const (
		running = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		term    = enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED
		canc    = enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED
	)
	c := &mocks.Client{}
	c.On("ListWorkflow", mock.Anything, mock.MatchedBy(func(r *workflowservice.ListWorkflowExecutionsRequest) bool {
		return r.GetQuery() == gate.RunsQuery
	})).Return(&workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{
		// Terminated paused, then started again and resumed: running wins.
		gateRun(t, "resumed", term, now.Add(-time.Minute), gate.Paused),
		gateRun(t, "resumed", running, time.Time{}, gate.Closed),
		// Terminated twice, paused the last time: the latest decides.
		gateRun(t, "stopped", term, now, gate.Paused),
		gateRun(t, "stopped", canc, now.Add(-time.Hour), gate.Closed),
		// Canceled while closed: holds nothing back.
		gateRun(t, "closed", canc, now, gate.Closed),
	}}, nil).Once()
	cfg := destinations.Config{Destinations: map[string]destinations.Destination{"resumed": {}, "stopped": {}, "closed": {}, "never": {}}}
	g := NewCache(c, "default", nil, cfg, client.MetricsNopHandler, slog.New(slog.DiscardHandler))
	require.NoError(t, g.readAll(context.Background()))
	c.AssertExpectations(t)

	ctx := context.Background()
	st, err := g.State(ctx, "resumed", time.Hour)
	require.NoError(t, err)
	require.Equal(t, gate.Closed, st.State)
	hold, _ := st.Hold(now)
	require.Nil(t, hold)

	st, err = g.State(ctx, "stopped", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "terminated", st.Stopped)
	hold, probe := st.Hold(now)
	require.False(t, probe)
	require.Contains(t, hold.Reason, "its gate was terminated while paused: courier destination resume stopped --by <YOUR-NAME>")

	hold, probe, err = g.Admit(ctx, "closed", "k", false)
	require.NoError(t, err)
	require.Nil(t, hold)
	require.False(t, probe)
	st, err = g.State(ctx, "never", time.Hour)
	require.NoError(t, err)
	require.Nil(t, st)

	// A just-released delivery reads afresh: the same decision.
	c.On("DescribeWorkflowExecution", mock.Anything, gate.WorkflowID("stopped"), "").
		Return(&workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: gateRun(t, "stopped", term, now, gate.Paused)}, nil).Once()
	hold, probe, err = g.Admit(ctx, "stopped", "k", true)
	require.NoError(t, err)
	require.False(t, probe)
	require.Contains(t, hold.Reason, "its gate was terminated while paused")
	c.AssertExpectations(t)
}

// TestReportSparesAStoppedGate: a report to a gate stopped while its
// breaker was open would start a fresh one by signal-with-start, dropping
// what it held; it is not sent (the mock fails on any call).
func TestReportSparesAStoppedGate(t *testing.T) {
	c := &mocks.Client{}
	b := &contract.Breaker{Failures: 3, Window: contract.Duration(time.Minute), CoolDown: contract.Duration(time.Minute)}
	cfg := destinations.Config{Destinations: map[string]destinations.Destination{"legacy": {Contract: contract.Contract{Breaker: b}}}}
	g := NewCache(c, "default", nil, cfg, client.MetricsNopHandler, slog.New(slog.DiscardHandler))
	g.keep("legacy", &gate.DestinationState{Name: "legacy", State: gate.HalfOpen, Stopped: "terminated",
		Breaker: gate.Breaker{State: gate.HalfOpen, Failures: 3}}, time.Now())
	g.Report(context.Background(), "legacy", "probe", activities.Outcome{Class: contract.ClassNotSent})
	c.AssertExpectations(t)
}
