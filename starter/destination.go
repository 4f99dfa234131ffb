package starter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/internal/visibility"
	"github.com/abde64c9/courier/workflows"
)

// GateRefusedError is a pause or resume the destination's gate refused,
// with its reason (not valid, nothing to resume, or by a name the workers'
// reviewers do not list); nothing changed.
type GateRefusedError struct {
	Destination, Reason string
}

func (e *GateRefusedError) Error() string {
	return fmt.Sprintf("destination %s: %s", e.Destination, e.Reason)
}

// Pause pauses a destination for every worker: from then on no attempt is
// sent to it, and its deliveries wait, spending no attempts or deadline,
// until Resume (or r.Until). It starts the destination's gate if it has none,
// or a new run of a stopped one, carrying what it held.
// When the workers' destinations file lists reviewers, r.By must be one.
func (s *Client) Pause(ctx context.Context, dest string, r workflows.PauseRequest) (workflows.DestinationState, error) {
	stopped, err := s.stoppedGate(ctx, dest)
	if err != nil {
		return workflows.DestinationState{}, err
	}
	return s.updateWithStart(ctx, dest, stopped, workflows.UpdatePause, r)
}

// Resume resumes a paused destination and closes its breaker if open (by
// one of the reviewers, as Pause); the gate then releases its held
// deliveries at the destination's rate limit. A gate stopped while it held
// its destination is started again to be resumed.
func (s *Client) Resume(ctx context.Context, dest string, r workflows.ResumeRequest) (workflows.DestinationState, error) {
	stopped, err := s.stoppedGate(ctx, dest)
	if err != nil {
		return workflows.DestinationState{}, err
	}
	if stopped != nil && stopped.State != workflows.GateClosed {
		// The new run starts as the stopped one held and resumes by the
		// gate's own update: its reviewers' check, transition and release.
		return s.updateWithStart(ctx, dest, stopped, workflows.UpdateResume, r)
	}
	h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.DestinationWorkflowID(dest), UpdateName: workflows.UpdateResume,
		Args: []any{r}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return workflows.DestinationState{}, &GateRefusedError{dest, "it is not paused and its breaker is closed (it has no running gate)"}
	}
	return s.gateAnswer(ctx, dest, h, err)
}

// updateWithStart sends a gate update, starting the gate if it has no
// running run: from what a stopped run held, if any.
func (s *Client) updateWithStart(ctx context.Context, dest string, stopped *workflows.DestinationState, update string, arg any) (workflows.DestinationState, error) {
	in := workflows.DestinationInput{Name: dest}
	if stopped != nil {
		carried := *stopped
		carried.Stopped = ""
		if carried.Paused != nil {
			// The update decides at once; a pause's end that passed while
			// stopped must not lift it before then.
			p := *carried.Paused
			p.Until = time.Time{}
			carried.Paused = &p
		}
		in.State = &carried
	}
	start := s.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: workflows.DestinationWorkflowID(dest), TaskQueue: workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// A stopped run must not keep its destination from a gate.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:         "gate of destination " + dest,
	}, workflows.DestinationWorkflowType, in)
	h, err := s.c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID: workflows.DestinationWorkflowID(dest), UpdateName: update,
			Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	return s.gateAnswer(ctx, dest, h, err)
}

// latestGate reads a gate's latest run: its status and the state its memo
// last published (nil: none); found false when it never had one.
func (s *Client) latestGate(ctx context.Context, dest string) (status enumspb.WorkflowExecutionStatus, memo *workflows.DestinationState, found bool, err error) {
	desc, err := s.c.DescribeWorkflowExecution(ctx, workflows.DestinationWorkflowID(dest), "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return status, nil, false, nil
	case err != nil:
		return status, nil, false, fmt.Errorf("read the gate of %s: %w", dest, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if p, ok := info.GetMemo().GetFields()[workflows.MemoGate]; ok {
		memo = &workflows.DestinationState{}
		if err := s.dc.FromPayload(p, memo); err != nil {
			return status, nil, true, fmt.Errorf("decode the gate of %s: %w", dest, err)
		}
	}
	return info.GetStatus(), memo, true, nil
}

// stoppedGate is the state of a gate whose latest run stopped (as
// workflows.GateOfRun reads it), nil when it is running or has none.
func (s *Client) stoppedGate(ctx context.Context, dest string) (*workflows.DestinationState, error) {
	status, memo, _, err := s.latestGate(ctx, dest)
	if err != nil {
		return nil, err
	}
	if st := workflows.GateOfRun(status, memo); st != nil && st.Stopped != "" {
		return st, nil
	}
	return nil, nil
}

func (s *Client) gateAnswer(ctx context.Context, dest string, h client.WorkflowUpdateHandle, err error) (workflows.DestinationState, error) {
	var st workflows.DestinationState
	if err == nil {
		err = h.Get(ctx, &st)
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == workflows.ErrInvalidGateChange {
		return st, &GateRefusedError{dest, app.Message()}
	}
	if err != nil {
		return st, fmt.Errorf("destination %s: %w", dest, err)
	}
	return st, nil
}

// DestinationStatus is a destination's gate and what waits on it.
type DestinationStatus struct {
	workflows.DestinationState
	// Held counts the deliveries waiting on it (visibility lags a moment).
	Held int64 `json:"held"`
}

// Destination reads a destination's gate and counts the deliveries it
// holds; one that never had a gate is closed.
func (s *Client) Destination(ctx context.Context, dest string) (DestinationStatus, error) {
	g, err := s.gate(ctx, dest)
	out := DestinationStatus{DestinationState: g}
	if err != nil {
		return out, err
	}
	n, err := s.c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: workflows.HeldQuery(dest)})
	if err != nil {
		return out, fmt.Errorf("count the deliveries held at %s: %w", dest, err)
	}
	out.Held = n.GetCount()
	return out, nil
}

// gate reads a destination's gate; one that never had one is closed. A
// running gate answers its query; a stopped one is read from its memo, as
// workers read it, marked Stopped.
func (s *Client) gate(ctx context.Context, dest string) (workflows.DestinationState, error) {
	g := workflows.DestinationState{Name: dest, State: workflows.GateClosed, Breaker: workflows.Breaker{State: workflows.GateClosed}}
	status, memo, found, err := s.latestGate(ctx, dest)
	switch {
	case err != nil || !found:
		return g, err
	case status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		if st := workflows.GateOfRun(status, memo); st != nil {
			return *st, nil
		}
		return g, nil
	}
	v, err := s.c.QueryWorkflow(ctx, workflows.DestinationWorkflowID(dest), "", workflows.QueryGate)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return g, nil
	case err != nil:
		return g, fmt.Errorf("read the gate of %s: %w", dest, err)
	}
	if err := v.Get(&g); err != nil {
		return g, fmt.Errorf("decode the gate of %s: %w", dest, err)
	}
	return g, nil
}

// Destinations lists the destinations that have a gate (paused once, or
// whose breaker tripped once), running or stopped.
func (s *Client) Destinations(ctx context.Context) ([]string, error) {
	var names []string
	for e, err := range visibility.Executions(ctx, s.c, &workflowservice.ListWorkflowExecutionsRequest{Query: workflows.GateRunsQuery}) {
		if err != nil {
			return nil, fmt.Errorf("list destinations' gates: %w", err)
		}
		if n := strings.TrimPrefix(e.GetExecution().GetWorkflowId(), workflows.DestinationIDPrefix); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}
