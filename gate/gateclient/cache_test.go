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
	"go.temporal.io/api/serviceerror"
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
	"github.com/abde64c9/courier/workflows"
)

func gateRun(t *testing.T, dest, runID string, status enumspb.WorkflowExecutionStatus, state string) *workflowpb.WorkflowExecutionInfo {
	st := gate.DestinationState{Name: dest, State: state, Breaker: gate.Breaker{State: gate.Closed}, Run: runID}
	if state == gate.Paused {
		st.Paused = &gate.Pause{Reason: "INC-7", By: "alice"}
	}
	p, err := converter.GetDefaultDataConverter().ToPayload(st)
	require.NoError(t, err)
	return &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: gate.WorkflowID(dest), RunId: runID},
		Status:    status, TaskQueue: workflows.TaskQueue,
		Memo: &commonpb.Memo{Fields: map[string]*commonpb.Payload{gate.Memo: p}},
	}
}

// TestReadAllKeepsStoppedPauses: one listing of the running gates; a
// destination whose gate does not run is read from its latest run, and a
// stopped gate's pause holds.
func TestReadAllKeepsStoppedPauses(t *testing.T) {
	now := time.Now()
	const (
		running = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		term    = enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED
		canc    = enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED
	)
	c := &mocks.Client{}
	c.On("ListWorkflow", mock.Anything, mock.MatchedBy(func(r *workflowservice.ListWorkflowExecutionsRequest) bool {
		return r.GetQuery() == gate.RunningQuery
	})).Return(&workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{
		gateRun(t, "resumed", "r1", running, gate.Closed),
	}}, nil).Once()
	describe := func(dest string, info *workflowpb.WorkflowExecutionInfo, err error) {
		c.On("DescribeWorkflowExecution", mock.Anything, gate.WorkflowID(dest), "").
			Return(&workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: info}, err).Once()
	}
	describe("stopped", gateRun(t, "stopped", "s1", term, gate.Paused), nil)
	describe("closed", gateRun(t, "closed", "c1", canc, gate.Closed), nil)
	c.On("DescribeWorkflowExecution", mock.Anything, gate.WorkflowID("never"), "").Return(nil, serviceerror.NewNotFound("none")).Once()
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

	// The next listing asks the server again only for the gate that holds.
	c.On("ListWorkflow", mock.Anything, mock.Anything).Return(&workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{
		gateRun(t, "resumed", "r1", running, gate.Closed),
	}}, nil).Once()
	describe("stopped", gateRun(t, "stopped", "s1", term, gate.Paused), nil)
	require.NoError(t, g.readAll(context.Background()))
	c.AssertExpectations(t)

	// A just-released delivery reads afresh: the same decision.
	describe("stopped", gateRun(t, "stopped", "s1", term, gate.Paused), nil)
	hold, probe, err = g.Admit(ctx, "stopped", "k", true)
	require.NoError(t, err)
	require.False(t, probe)
	require.Contains(t, hold.Reason, "its gate was terminated while paused")
	c.AssertExpectations(t)
}

// TestStarterMemoHoldsNothing: a running gate whose memo names another
// run, or whose memo is no state a gate publishes (paused without a
// pause), published nothing of its own: with no runs before it, it holds
// nothing, and Admit neither fails nor holds.
func TestStarterMemoHoldsNothing(t *testing.T) {
	c := &mocks.Client{}
	forged := gateRun(t, "legacy", "r2", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, gate.Paused)
	st := gate.DestinationState{Name: "legacy", State: gate.Paused, Breaker: gate.Breaker{State: gate.Closed}, Run: "r2"}
	p, err := converter.GetDefaultDataConverter().ToPayload(st)
	require.NoError(t, err)
	noPause := gateRun(t, "legacy", "r2", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, gate.Closed)
	noPause.Memo.Fields[gate.Memo] = p
	forged.Memo = gateRun(t, "legacy", "r1", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, gate.Paused).Memo
	for _, info := range []*workflowpb.WorkflowExecutionInfo{forged, noPause} {
		c.On("DescribeWorkflowExecution", mock.Anything, gate.WorkflowID("legacy"), "").
			Return(&workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: info}, nil).Once()
		c.On("ListWorkflow", mock.Anything, mock.Anything).Return(&workflowservice.ListWorkflowExecutionsResponse{}, nil).Once()
		cfg := destinations.Config{Destinations: map[string]destinations.Destination{"legacy": {}}}
		g := NewCache(c, "default", nil, cfg, client.MetricsNopHandler, slog.New(slog.DiscardHandler))
		hold, probe, err := g.Admit(context.Background(), "legacy", "k", true)
		require.NoError(t, err)
		require.Nil(t, hold)
		require.False(t, probe)
		c.AssertExpectations(t)
	}
}

// TestReportSparesAStoppedGate: a report to a gate stopped while its
// breaker was open would start a fresh one by signal-with-start, dropping
// what it held; it is not sent (the mock fails on any call).
func TestReportSparesAStoppedGate(t *testing.T) {
	c := &mocks.Client{}
	b := &contract.Breaker{Failures: 3, Window: contract.Duration(time.Minute), CoolDown: contract.Duration(time.Minute)}
	cfg := destinations.Config{Destinations: map[string]destinations.Destination{"legacy": {Contract: contract.Contract{Breaker: b}}}}
	g := NewCache(c, "default", nil, cfg, client.MetricsNopHandler, slog.New(slog.DiscardHandler))
	g.keep("legacy", gateRead{state: &gate.DestinationState{Name: "legacy", State: gate.HalfOpen, Stopped: "terminated",
		Breaker: gate.Breaker{State: gate.HalfOpen, Failures: 3}}}, time.Now())
	g.Report(context.Background(), "legacy", "probe", activities.Outcome{Class: contract.ClassNotSent})
	c.AssertExpectations(t)
}

// TestRunWithoutItsOwnStateReadsTheRunsBefore: the latest run of a gate
// published nothing of its own (started by hand in place of a terminated
// one): the gate is what the run before it published, held as stopped, its
// pause without an end; runs started after it, and the run itself, are not
// read.
func TestRunWithoutItsOwnStateReadsTheRunsBefore(t *testing.T) {
	now := time.Now()
	c := &mocks.Client{}
	latest := gateRun(t, "legacy", "r3", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, gate.Closed)
	latest.Memo = nil
	latest.StartTime = timestamppb.New(now)
	earlier := gateRun(t, "legacy", "r2", enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, gate.Paused)
	earlier.StartTime = timestamppb.New(now.Add(-time.Hour))
	st := gate.DestinationState{Name: "legacy", State: gate.Paused, Breaker: gate.Breaker{State: gate.Closed}, Run: "r2",
		Paused: &gate.Pause{Reason: "INC-7", By: "alice", Until: now.Add(-time.Minute)}}
	p, err := converter.GetDefaultDataConverter().ToPayload(st)
	require.NoError(t, err)
	earlier.Memo.Fields[gate.Memo] = p
	oldest := gateRun(t, "legacy", "r1", enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, gate.Closed)
	oldest.StartTime = timestamppb.New(now.Add(-2 * time.Hour))
	c.On("DescribeWorkflowExecution", mock.Anything, gate.WorkflowID("legacy"), "").
		Return(&workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: latest}, nil).Once()
	c.On("ListWorkflow", mock.Anything, mock.Anything).Return(&workflowservice.ListWorkflowExecutionsResponse{
		Executions: []*workflowpb.WorkflowExecutionInfo{latest, oldest, earlier}}, nil).Once()
	c.On("DescribeWorkflowExecution", mock.Anything, gate.WorkflowID("legacy"), "r2").
		Return(&workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: earlier}, nil).Once()
	got, err := Read(context.Background(), c, nil, "legacy")
	require.NoError(t, err)
	c.AssertExpectations(t)
	require.Equal(t, gate.Paused, got.State)
	require.Equal(t, "terminated", got.Stopped)
	require.True(t, got.Paused.Until.IsZero(), "no gate ran to end it")
	hold, probe := got.Hold(now)
	require.False(t, probe)
	require.Contains(t, hold.Reason, "INC-7 (paused by alice); its gate was terminated while paused")
}
