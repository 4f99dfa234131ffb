// Package gateclient is the client side of the destinations' gates
// (package gate): how they are read and started, the workers' cache of
// them, and an operator's pause, resume and status. Kept apart from the
// gate workflow so that its deterministic code links none of this. The
// worker, the starter and the commands import it.
package gateclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/internal/visibility"
	"github.com/abde64c9/courier/workflows"
)

// A gate is read from its latest run's status and the state a gate run
// published in its memo, never by query: a query needs a worker to answer,
// which fails in the very outage an operator is handling.
//
// Whoever starts a run sets its memo and input; only what a run's gate
// published itself counts (see published). A run that published nothing
// of its own (started by hand and not yet recovered, never run by a
// Courier worker, refused for its name) holds nothing of its own: the gate
// is what its runs before it last published.

// run is one run of a gate, as the server records it.
type run struct {
	id, runID string
	status    enumspb.WorkflowExecutionStatus
	start     time.Time
	taskQueue string
	memo      *commonpb.Memo
}

func runOf(info *workflowpb.WorkflowExecutionInfo) run {
	return run{id: info.GetExecution().GetWorkflowId(), runID: info.GetExecution().GetRunId(), status: info.GetStatus(),
		start: info.GetStartTime().AsTime(), taskQueue: info.GetTaskQueue(), memo: info.GetMemo()}
}

// Read reads a destination's gate from its latest run (as gate.OfRun reads
// it); nil when it has none (never paused, breaker never tripped) or none
// of its runs published a state.
func Read(ctx context.Context, c client.Client, dc converter.DataConverter, dest string) (*gate.DestinationState, error) {
	r, ok, err := latest(ctx, c, dest)
	if err != nil || !ok {
		return nil, err
	}
	return resolve(ctx, c, dc, dest, r)
}

// latest is a gate's latest run, as the server (not visibility) says.
func latest(ctx context.Context, c client.Client, dest string) (run, bool, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, gate.WorkflowID(dest), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return run{}, false, nil
	}
	if err != nil {
		return run{}, false, fmt.Errorf("read the gate of %s: %w", dest, err)
	}
	return runOf(desc.GetWorkflowExecutionInfo()), true, nil
}

// resolve is dest's gate with r its latest run: what r published, else
// what the runs before it last published, held as stopped when r stopped.
func resolve(ctx context.Context, c client.Client, dc converter.DataConverter, dest string, r run) (*gate.DestinationState, error) {
	st, err := published(ctx, c, dc, r)
	if err != nil {
		return nil, err
	}
	if st != nil {
		return gate.OfRun(r.status, st), nil
	}
	if st, err = before(ctx, c, dc, dest, r); err != nil || st == nil {
		return st, err
	}
	if s := gate.Stopped(r.status); s != "" {
		st.Stopped = s
		stoppedPause(st)
	}
	return st, nil
}

// published is the state run r's gate published itself; nil when it
// published none. Its memo counts when it names r (a starter cannot know a
// run's ID before it starts) and r runs on Courier's task queue; a memo of
// a gate from before runs were named counts when r's own history shows
// the gate wrote it. A memo that does not decode, or decodes to no state a
// gate publishes, is none.
func published(ctx context.Context, c client.Client, dc converter.DataConverter, r run) (*gate.DestinationState, error) {
	if r.taskQueue != workflows.TaskQueue {
		return nil, nil
	}
	st := fromPayload(dc, r.memo.GetFields()[gate.Memo])
	switch {
	case st == nil:
		return nil, nil
	case st.Run == r.runID:
		return st, nil
	case st.Run != "":
		// Another run's: carried over a continue-as-new, or set by hand.
		return nil, nil
	}
	return fromHistory(ctx, c, dc, r)
}

// fromHistory is the state r's gate last wrote to its memo, as r's history
// records it (nil: it wrote none): what a starter set is in the run's
// start event, never in one of these.
func fromHistory(ctx context.Context, c client.Client, dc converter.DataConverter, r run) (*gate.DestinationState, error) {
	var last *commonpb.Payload
	it := c.GetWorkflowHistory(ctx, r.id, r.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read the history of gate run %s: %w", r.runID, err)
		}
		if p, ok := e.GetWorkflowPropertiesModifiedEventAttributes().GetUpsertedMemo().GetFields()[gate.Memo]; ok {
			last = p
		}
	}
	return fromPayload(dc, last), nil
}

// before is what dest's gate runs that started before r last published
// (nil: none did), the newest first; marked Stopped as the run that
// published it stopped (a run that continued as new is not stopped).
// Every run of the gate is listed: runs started by hand may be many, and
// the one that last published may be under them.
func before(ctx context.Context, c client.Client, dc converter.DataConverter, dest string, r run) (*gate.DestinationState, error) {
	q := fmt.Sprintf(`WorkflowId = %q AND WorkflowType = %q`, gate.WorkflowID(dest), gate.WorkflowType)
	var runs []run
	for e, err := range visibility.Executions(ctx, c, &workflowservice.ListWorkflowExecutionsRequest{Query: q}) {
		if err != nil {
			return nil, fmt.Errorf("list the runs of the gate of %s: %w", dest, err)
		}
		if p := runOf(e); p.runID != r.runID && p.start.Before(r.start) {
			runs = append(runs, p)
		}
	}
	slices.SortFunc(runs, func(a, b run) int { return b.start.Compare(a.start) })
	for _, p := range runs {
		// The server's record of it, not visibility's, which lags.
		desc, err := c.DescribeWorkflowExecution(ctx, p.id, p.runID)
		if err != nil {
			return nil, fmt.Errorf("read gate run %s of %s: %w", p.runID, dest, err)
		}
		p = runOf(desc.GetWorkflowExecutionInfo())
		st, err := published(ctx, c, dc, p)
		if err != nil {
			return nil, err
		}
		if st == nil {
			continue
		}
		if st.Stopped = gate.Stopped(p.status); st.Stopped != "" {
			stoppedPause(st)
		}
		return st, nil
	}
	return nil, nil
}

// stoppedPause keeps a stopped gate's pause until an operator ends it: no
// gate ran to end it at its until.
func stoppedPause(st *gate.DestinationState) {
	if st.Paused != nil {
		p := *st.Paused
		p.Until = time.Time{}
		st.Paused = &p
	}
}

// Recover is activity gate.ActivityRecover: the state of the gate that
// scheduled it, as its runs before this one last published (nil: none), a
// pause a stopped run held kept until an operator ends it. Which gate and
// run are the server's record of the scheduler, not an argument.
func (g *Cache) Recover(ctx context.Context) (*gate.DestinationState, error) {
	info := activity.GetInfo(ctx)
	dest, ok := strings.CutPrefix(info.WorkflowExecution.ID, gate.IDPrefix)
	if !ok {
		return nil, fmt.Errorf("workflow %s is not a destination's gate", info.WorkflowExecution.ID)
	}
	desc, err := g.c.DescribeWorkflowExecution(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
	if err != nil {
		return nil, fmt.Errorf("read gate run %s: %w", info.WorkflowExecution.RunID, err)
	}
	st, err := before(ctx, g.c, g.dc, dest, runOf(desc.GetWorkflowExecutionInfo()))
	if st != nil {
		activity.GetLogger(ctx).Info("gate recovered its state", "destination", dest, "state", st.State,
			"from_run", st.Run, "stopped", st.Stopped)
	}
	return st, err
}

// running lists the running runs of the gates (one visibility listing),
// each destination's latest by start: a gate that does not run is read by
// Read, as the server has it.
func running(ctx context.Context, c client.Client) (map[string]run, error) {
	runs := map[string]run{}
	for e, err := range visibility.Executions(ctx, c, &workflowservice.ListWorkflowExecutionsRequest{Query: gate.RunningQuery}) {
		if err != nil {
			return nil, fmt.Errorf("list destinations' gates: %w", err)
		}
		r := runOf(e)
		name := strings.TrimPrefix(r.id, gate.IDPrefix)
		if l, ok := runs[name]; !ok || cmp.Less(l.start.UnixNano(), r.start.UnixNano()) {
			// Two running: visibility lags a continue-as-new.
			runs[name] = r
		}
	}
	return runs, nil
}

// fromPayload is the gate state p holds; nil when there is none, it does
// not decode, or it is no state a gate publishes.
func fromPayload(dc converter.DataConverter, p *commonpb.Payload) *gate.DestinationState {
	if p == nil {
		return nil
	}
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var st gate.DestinationState
	if err := dc.FromPayload(p, &st); err != nil || !st.Valid() {
		return nil
	}
	return &st
}
