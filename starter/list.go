package starter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/internal/visibility"
	"github.com/abde64c9/courier/workflows"
)

// Delivery is one line of a listing.
type Delivery struct {
	Key         string `json:"key"`
	Destination string `json:"destination"`
	Operation   string `json:"operation"`
	BusinessID  string `json:"business_id"`
	State       string `json:"state"`
	// Held, for a paused or circuit_open delivery, is why it waits, as
	// its destination's gate says now.
	Held       string    `json:"held,omitempty"`
	Started    time.Time `json:"started"`
	WorkflowID string    `json:"workflow_id"`
}

// ListStates are the states a listing can filter on: CourierState is
// published when a delivery waits for its next attempt (retry_wait), is
// held at its destination (paused, circuit_open), parks (awaiting_review)
// and finishes (its status), but for one created at its first try, and
// by starts from before that rule, delivering. A running delivery without
// one is delivering, a completed one created (unpublished). Lookups show
// as delivering.
var ListStates = []string{
	string(workflows.StateDelivering), string(workflows.StateRetryWait), string(workflows.StatePaused), string(workflows.StateCircuitOpen),
	string(workflows.StateAwaitingReview),
	string(workflows.StatusCreated), string(workflows.StatusDuplicate), string(workflows.StatusConflict),
	string(workflows.StatusRejected), string(workflows.StatusAttemptLimit),
	string(workflows.StatusDeliveredByReview), string(workflows.StatusAbandoned), string(workflows.StatusCanceled),
}

// waitingStates are the ListStates of running deliveries.
var waitingStates = []string{
	string(workflows.StateDelivering), string(workflows.StateRetryWait), string(workflows.StatePaused), string(workflows.StateCircuitOpen),
	string(workflows.StateAwaitingReview),
}

// unpublished are the states a delivery may be in with no CourierState
// published, each with the run status that then says it (and its name in
// a visibility query).
var unpublished = []struct {
	state, query string
	status       enumspb.WorkflowExecutionStatus
}{
	{string(workflows.StateDelivering), "Running", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
	{string(workflows.StatusCreated), "Completed", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED},
}

// stateOf is the state a listed run shows: its CourierState, or where it
// has none, the one its status says.
func stateOf(published string, status enumspb.WorkflowExecutionStatus) string {
	for _, u := range unpublished {
		if published == "" && u.status == status {
			return u.state
		}
	}
	return published
}

// ListOptions filter a listing; zero values match everything.
type ListOptions struct {
	State       string // one of ListStates
	Destination string
	// Limit caps the number of deliveries returned; 0 is no cap.
	Limit int
}

// Query is the visibility query for these options, as typed in the web UI's
// search box or `temporal workflow list --query`.
func (o ListOptions) Query() string {
	q := fmt.Sprintf("WorkflowType = %q", workflows.WorkflowType)
	if o.State != "" {
		state := fmt.Sprintf("%s = %q", workflows.SAState.GetName(), o.State)
		for _, u := range unpublished {
			if u.state == o.State {
				state = fmt.Sprintf("(%s OR (%s IS NULL AND ExecutionStatus = %q))", state, workflows.SAState.GetName(), u.query)
			}
		}
		q += " AND " + state
		if slices.Contains(waitingStates, o.State) {
			// A run terminated while waiting keeps the state it last
			// published; only a running one is still waiting.
			q += ` AND ExecutionStatus = "Running"`
		}
	}
	if o.Destination != "" {
		q += fmt.Sprintf(" AND %s = %q", workflows.SADestination.GetName(), o.Destination)
	}
	return q
}

// ListAwaitingReview lists the deliveries waiting for a decision.
func (s *Client) ListAwaitingReview(ctx context.Context) ([]Delivery, error) {
	return s.List(ctx, ListOptions{State: string(workflows.StateAwaitingReview)})
}

// List lists deliveries, newest first, through the visibility store: it
// lags the workflows by a moment, so a delivery that just parked may take
// a second to show up.
func (s *Client) List(ctx context.Context, o ListOptions) ([]Delivery, error) {
	if o.State != "" && !slices.Contains(ListStates, o.State) {
		return nil, &InvalidRequestError{fmt.Errorf("state %q unknown; use one of %s", o.State, strings.Join(ListStates, ", "))}
	}
	var out []Delivery
	for e, err := range visibility.Executions(ctx, s.c, &workflowservice.ListWorkflowExecutionsRequest{Query: o.Query()}) {
		if err != nil {
			return nil, fmt.Errorf("list deliveries: %w", err)
		}
		fields := e.GetSearchAttributes().GetIndexedFields()
		get := func(k temporal.SearchAttributeKeyKeyword) string {
			var v string
			if p := fields[k.GetName()]; p != nil {
				_ = converter.GetDefaultDataConverter().FromPayload(p, &v)
			}
			return v
		}
		out = append(out, Delivery{
			Key: get(workflows.SAKey), Destination: get(workflows.SADestination),
			Operation: get(workflows.SAOperation), BusinessID: get(workflows.SABusinessID),
			State: stateOf(get(workflows.SAState), e.GetStatus()), Started: e.GetStartTime().AsTime(),
			WorkflowID: e.GetExecution().GetWorkflowId(),
		})
		if o.Limit > 0 && len(out) == o.Limit {
			break
		}
	}
	return s.withHolds(ctx, out), nil
}

// withHolds says why each held delivery waits, from its destination's gate.
func (s *Client) withHolds(ctx context.Context, ds []Delivery) []Delivery {
	why := map[string]string{}
	for i, d := range ds {
		if d.State != string(workflows.StatePaused) && d.State != string(workflows.StateCircuitOpen) {
			continue
		}
		reason, ok := why[d.Destination]
		if !ok {
			if g, err := gateclient.Read(ctx, s.c, s.dc, d.Destination); err == nil && g != nil {
				if h, _ := g.Hold(time.Now()); h != nil {
					reason = strings.ReplaceAll(h.State, "_", " ") + ": " + h.Reason
				}
			}
			why[d.Destination] = reason
		}
		ds[i].Held = reason
	}
	return ds
}
