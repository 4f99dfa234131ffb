package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/visibility"
	"github.com/abde64c9/courier/workflows"
)

// NewActivities returns Courier's activities over the opened adapters, with
// the configured contracts (a delivery's first attempt records one) and
// the client that reads a workflow ID's earlier runs.
func NewActivities(c client.Client, cfg destinations.Config, ads *Adapters) *activities.Activities {
	acts := &activities.Activities{Adapters: ads.ByName, Notifiers: ads.Notifiers, Contracts: cfg.Contracts(),
		Reviewers: cfg.Reviewers.Names(), Reviewing: Reviewing(cfg), Tenants: map[string][]string{}}
	// No destination is named "": its reviewers are the file's default.
	_, acts.DefaultPolicy = cfg.ReviewersOf("")
	for name, d := range cfg.Destinations {
		if d.Tenants != nil {
			acts.Tenants[name] = d.Tenants
		}
	}
	if c != nil {
		acts.Runs = earlierRuns{c}
	}
	return acts
}

// Reviewing is who may review at each destination whose reviewers are not
// simply the file's plain default: its own, or keyed ones.
func Reviewing(cfg destinations.Config) map[string]activities.Reviewing {
	m := map[string]activities.Reviewing{}
	for name, d := range cfg.Destinations {
		if d.Reviewers == nil && !cfg.Reviewers.Keyed() {
			continue
		}
		names, policy := cfg.ReviewersOf(name)
		m[name] = activities.Reviewing{Names: names, Policy: policy}
	}
	return m
}

// earlierRuns reads a delivery's other runs from the server: the list from
// visibility, each completed run's result from its closing event. It reads
// every Delivery run of the workflow ID, to the last page: runs anyone
// started by hand cannot hide the one that applied the operation. With an
// outcome ledger the activities do not ask (the ledger holds every run
// that may have applied), so the cost of runs started by outsiders falls
// only on workers without one.
type earlierRuns struct{ c client.Client }

// earlierRunsPage is how many runs one visibility page holds.
const earlierRunsPage = 100

func (r earlierRuns) Earlier(ctx context.Context, workflowID, runID string) ([]activities.EarlierRun, error) {
	var out []activities.EarlierRun
	req := &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s' AND WorkflowType = '%s'",
			strings.ReplaceAll(workflowID, "'", ""), workflows.WorkflowType),
		PageSize: earlierRunsPage,
	}
	var execs []*workflowpb.WorkflowExecutionInfo
	for e, err := range visibility.Executions(ctx, r.c, req) {
		if err != nil {
			return nil, fmt.Errorf("list runs of %s: %w", workflowID, err)
		}
		execs = append(execs, e)
	}
	for _, e := range execs {
		id := e.GetExecution().GetRunId()
		if id == runID {
			continue
		}
		run := activities.EarlierRun{
			RunID:  id,
			Status: strings.ToLower(strings.TrimPrefix(e.GetStatus().String(), "WorkflowExecutionStatus")),
			Closed: e.GetCloseTime().AsTime(),
		}
		if e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			// Another run of this workflow ID cannot still be running:
			// visibility has not caught up with its close, and until it
			// does nothing says what it did.
			run.Status = "closing (visibility still lists it running)"
			out = append(out, run)
			continue
		}
		switch e.GetStatus() {
		case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
			var res workflows.DeliveryResult
			err := r.c.GetWorkflow(ctx, workflowID, id).Get(ctx, &res)
			if nd, ok := workflows.UndeliveredResult(err); ok {
				res, err = nd, nil // ended without delivering; its result says whether it may have applied
			}
			var failed *temporal.WorkflowExecutionError
			if errors.As(err, &failed) {
				break // failed otherwise: counted as possibly applied, below
			}
			if err != nil {
				return nil, fmt.Errorf("read the result of run %s of %s: %w", id, workflowID, err)
			}
			run.Status = string(res.Status)
			run.NothingApplied = res.LeftNoEffect()
			run.FirstAttempt = res.FirstApplying()
		}
		// Any other close (terminated, failed, timed out) may have applied
		// the effect: it counts, whatever its attempts.
		out = append(out, run)
	}
	return out, nil
}
