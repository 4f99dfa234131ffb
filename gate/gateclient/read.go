// Package gateclient is the client side of the destinations' gates
// (package gate): how they are read and started, the workers' cache of
// them, and an operator's pause, resume and status. Kept apart from the
// gate workflow so that its deterministic code links none of this. The
// worker, the starter and the commands import it.
package gateclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/internal/visibility"
)

// A gate is read from its latest run's status and the memo it last
// published, never by query: a query needs a worker to answer, which
// fails in the very outage an operator is handling.

// Read reads a destination's gate from its latest run (as gate.OfRun reads
// it); nil when it has none (never paused, breaker never tripped) or it
// holds nothing back: closed.
func Read(ctx context.Context, c client.Client, dc converter.DataConverter, dest string) (*gate.DestinationState, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, gate.WorkflowID(dest), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the gate of %s: %w", dest, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	st, err := fromMemo(dc, info.GetMemo(), dest)
	if err != nil {
		return nil, err
	}
	return gate.OfRun(info.GetStatus(), st), nil
}

// latestRun is a gate's run that decides it, with the memo it published.
type latestRun struct {
	run  gate.Run
	memo *commonpb.Memo
}

// latestRuns lists every gate's runs that may decide it (running, or
// stopped without continuing) with their memos, in one visibility call,
// and keeps each destination's latest.
func latestRuns(ctx context.Context, c client.Client) (map[string]latestRun, error) {
	runs := map[string]latestRun{}
	for e, err := range visibility.Executions(ctx, c, &workflowservice.ListWorkflowExecutionsRequest{Query: gate.RunsQuery}) {
		if err != nil {
			return nil, fmt.Errorf("list destinations' gates: %w", err)
		}
		name := strings.TrimPrefix(e.GetExecution().GetWorkflowId(), gate.IDPrefix)
		run := gate.Run{Status: e.GetStatus(), CloseTime: e.GetCloseTime().AsTime()}
		if l, ok := runs[name]; !ok || gate.LatestRun(l.run, run) {
			runs[name] = latestRun{run, e.GetMemo()}
		}
	}
	return runs, nil
}

// ReadAll reads the gates of the named destinations in one visibility
// call: each one's latest run's gate, nil when closed. Gates of other
// destinations are not decoded: a worker reads only those it serves, so
// another team's gate (another codec key, another shape) costs it nothing.
func ReadAll(ctx context.Context, c client.Client, dc converter.DataConverter, names []string) (map[string]*gate.DestinationState, error) {
	runs, err := latestRuns(ctx, c)
	if err != nil {
		return nil, err
	}
	got := make(map[string]*gate.DestinationState, len(names))
	for _, name := range names {
		l, ok := runs[name]
		if !ok {
			continue
		}
		st, err := fromMemo(dc, l.memo, name)
		if err != nil {
			return nil, err
		}
		got[name] = gate.OfRun(l.run.Status, st)
	}
	return got, nil
}

// fromMemo is the gate a gate workflow's memo holds; nil when it has
// published none yet (just started): closed.
func fromMemo(dc converter.DataConverter, memo *commonpb.Memo, dest string) (*gate.DestinationState, error) {
	p, ok := memo.GetFields()[gate.Memo]
	if !ok {
		return nil, nil
	}
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var st gate.DestinationState
	if err := dc.FromPayload(p, &st); err != nil {
		return nil, fmt.Errorf("decode the gate of %s: %w", dest, err)
	}
	return &st, nil
}
