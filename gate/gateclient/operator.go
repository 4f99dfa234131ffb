package gateclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/internal/visibility"
	"github.com/abde64c9/courier/workflows"
)

// Operator is an operator's side of the gates: pause, resume and status.
type Operator struct {
	C client.Client
	// DC decodes the gates' memos (nil: the default converter).
	DC converter.DataConverter
}

// RefusedError is a pause or resume the destination's gate refused,
// with its reason (not valid, nothing to resume, by a name the workers'
// reviewers do not list, or with a proof that does not verify); nothing
// changed.
type RefusedError struct {
	Destination, Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("destination %s: %s", e.Destination, e.Reason)
}

// Pause pauses a destination for every worker: from then on no attempt is
// sent to it, and its deliveries wait, spending no attempts or deadline,
// until Resume (or r.Until). It starts the destination's gate if it has none,
// or a new run of a stopped one, which recovers what it held.
// When the workers' destinations file lists reviewers, r.By must be one;
// when they have keys, r.Proof must verify (see Sign).
func (o Operator) Pause(ctx context.Context, dest string, r gate.PauseRequest) (gate.DestinationState, error) {
	return o.updateWithStart(ctx, dest, gate.UpdatePause, r)
}

// Resume resumes a paused destination and closes its breaker if open (by
// one of the reviewers, as Pause); the gate then releases its held
// deliveries at the destination's rate limit. A gate stopped while it held
// its destination is started again to be resumed.
func (o Operator) Resume(ctx context.Context, dest string, r gate.ResumeRequest) (gate.DestinationState, error) {
	stopped, err := o.stopped(ctx, dest)
	if err != nil {
		return gate.DestinationState{}, err
	}
	if stopped != nil && stopped.State != gate.Closed {
		// The new run starts as the stopped one held and resumes by the
		// gate's own update: its reviewers' check, transition and release.
		return o.updateWithStart(ctx, dest, gate.UpdateResume, r)
	}
	h, err := o.C.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: gate.WorkflowID(dest), UpdateName: gate.UpdateResume,
		Args: []any{r}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return gate.DestinationState{}, &RefusedError{dest, "it is not paused and its breaker is closed (it has no running gate)"}
	}
	return o.gateAnswer(ctx, dest, h, err)
}

// updateWithStart sends a gate update, starting the gate if it has no
// running run: the new run recovers what its runs before held, then
// decides the update.
func (o Operator) updateWithStart(ctx context.Context, dest, update string, arg any) (gate.DestinationState, error) {
	start := o.C.NewWithStartWorkflowOperation(StartOptions(dest), gate.WorkflowType, gate.DestinationInput{Name: dest})
	h, err := o.C.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID: gate.WorkflowID(dest), UpdateName: update,
			Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	return o.gateAnswer(ctx, dest, h, err)
}

// stopped is the state of a gate whose latest run stopped (as gate.OfRun
// reads it), nil when it is running or has none.
func (o Operator) stopped(ctx context.Context, dest string) (*gate.DestinationState, error) {
	st, err := Read(ctx, o.C, o.DC, dest)
	if err != nil || st == nil || st.Stopped == "" {
		return nil, err
	}
	return st, nil
}

func (o Operator) gateAnswer(ctx context.Context, dest string, h client.WorkflowUpdateHandle, err error) (gate.DestinationState, error) {
	var st gate.DestinationState
	if err == nil {
		err = h.Get(ctx, &st)
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == gate.ErrInvalidChange {
		return st, &RefusedError{dest, app.Message()}
	}
	if err != nil {
		return st, fmt.Errorf("destination %s: %w", dest, err)
	}
	return st, nil
}

// Status is a destination's gate and what waits on it.
type Status struct {
	gate.DestinationState
	Waiting
	// Dedup and Configured are what the destinations file read says of it:
	// its dedup kind, and whether it lists it. Both are left out when no
	// file was read.
	Dedup      contract.Dedup `json:"dedup,omitempty"`
	Configured *bool          `json:"configured,omitempty"`
}

// Waiting counts the running deliveries at a destination by what they
// wait for (visibility lags a moment).
type Waiting struct {
	// Parked await a review (awaiting_review).
	Parked int64 `json:"parked"`
	// Held wait on its gate (paused, circuit_open).
	Held int64 `json:"held"`
	// Retrying wait for their next attempt (retry_wait).
	Retrying int64 `json:"retrying"`
}

// Status reads a destination's gate, as workers read it (a stopped one is
// marked Stopped), and counts the deliveries waiting at it; one that never
// had a gate is closed.
func (o Operator) Status(ctx context.Context, dest string) (Status, error) {
	out := Status{DestinationState: gate.DestinationState{Name: dest, State: gate.Closed, Breaker: gate.Breaker{State: gate.Closed}}}
	st, err := Read(ctx, o.C, o.DC, dest)
	if err != nil {
		return out, err
	}
	if st != nil {
		out.DestinationState = *st
	}
	// Temporal's visibility groups counts by ExecutionStatus only, so each
	// is a count of its own.
	for _, q := range []struct {
		what  string
		query string
		n     *int64
	}{
		{"parked", workflows.ParkedQuery(dest), &out.Parked},
		{"held", workflows.HeldQuery(dest), &out.Held},
		{"retrying", workflows.RetryingQuery(dest), &out.Retrying},
	} {
		n, err := o.C.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: q.query})
		if err != nil {
			return out, fmt.Errorf("count the deliveries %s at %s: %w", q.what, dest, err)
		}
		*q.n = n.GetCount()
	}
	return out, nil
}

// List lists the destinations that have a gate (paused once, or whose
// breaker tripped once), running or stopped.
func (o Operator) List(ctx context.Context) ([]string, error) {
	var names []string
	for e, err := range visibility.Executions(ctx, o.C, &workflowservice.ListWorkflowExecutionsRequest{Query: gate.RunsQuery}) {
		if err != nil {
			return nil, fmt.Errorf("list destinations' gates: %w", err)
		}
		names = append(names, strings.TrimPrefix(e.GetExecution().GetWorkflowId(), gate.IDPrefix))
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// Desk is the status of the named destinations or, with none named, of
// every destination cfg configures and every one that has a gate, by name.
// cfg is the destinations file as read where this runs, a claim of what
// the workers serve; nil: none was read, and only gates are listed.
func (o Operator) Desk(ctx context.Context, cfg *destinations.Config, names ...string) ([]Status, error) {
	if len(names) == 0 {
		gated, err := o.List(ctx)
		if err != nil {
			return nil, err
		}
		names = gated
		if cfg != nil {
			names = append(cfg.Names(), gated...)
			slices.Sort(names)
			names = slices.Compact(names)
		}
	}
	out := make([]Status, 0, len(names))
	for _, name := range names {
		st, err := o.Status(ctx, name)
		if err != nil {
			return nil, err
		}
		if cfg != nil {
			d, ok := cfg.Destinations[name]
			st.Dedup, st.Configured = d.Contract.Dedup, &ok
		}
		out = append(out, st)
	}
	return out, nil
}
