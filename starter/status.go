package starter

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/abde64c9/courier/workflows"
)

// Result waits for the run (empty: the latest) of the delivery with this
// key to finish and returns its result, delivered or not: one that ended
// without delivering fails (NotDelivered, or Unconfirmed where an effect
// may exist), and carries its result in the failure.
func (s *Client) Result(ctx context.Context, key, runID string) (workflows.DeliveryResult, error) {
	var res workflows.DeliveryResult
	err := s.c.GetWorkflow(ctx, workflows.WorkflowID(key), runID).Get(ctx, &res)
	if nd, ok := workflows.UndeliveredResult(err); ok {
		return nd, nil
	}
	if err != nil {
		return res, fmt.Errorf("result of delivery %s: %w", key, err)
	}
	return res, nil
}

// Status returns the delivery's current status (running or finished). A
// run the server terminated or timed out is reported so (State and Status
// terminated or timed_out, Ended saying which run and when): its own status
// query replays to where it was stopped, a state it can never leave.
func (s *Client) Status(ctx context.Context, key string) (workflows.DeliveryStatus, error) {
	return s.RunStatus(ctx, key, "")
}

// RunStatus is the status of one run of the delivery (empty: the latest).
func (s *Client) RunStatus(ctx context.Context, key, runID string) (workflows.DeliveryStatus, error) {
	var st workflows.DeliveryStatus
	wid := workflows.WorkflowID(key)
	desc, err := s.c.DescribeWorkflowExecution(ctx, wid, runID)
	if err != nil {
		return st, notFound(key, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	v, err := s.c.QueryWorkflow(ctx, wid, info.GetExecution().GetRunId(), workflows.QueryStatus)
	if err != nil {
		return st, notFound(key, err)
	}
	if err := v.Get(&st); err != nil {
		return st, fmt.Errorf("decode status of %s: %w", key, err)
	}
	if how := endedBy(info.GetStatus()); how != "" && st.Status == "" {
		st.Status = how
		st.Ended = &workflows.RunEnded{RunID: info.GetExecution().GetRunId(), How: how, At: info.GetCloseTime().AsTime(),
			Reason: s.endReason(ctx, wid, info.GetExecution().GetRunId())}
	}
	st.State = st.StateOr(st.State)
	return st, nil
}

// endedBy is the final status of a run the server closed before it could
// record one itself; empty for any other.
func endedBy(st enumspb.WorkflowExecutionStatus) workflows.Status {
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return workflows.StatusTerminated
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return workflows.StatusTimedOut
	}
	return ""
}

// endReason is the reason and identity a termination gave, read from the
// run's closing event; empty when there is none.
func (s *Client) endReason(ctx context.Context, wid, runID string) string {
	it := s.c.GetWorkflowHistory(ctx, wid, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	if !it.HasNext() {
		return ""
	}
	ev, err := it.Next()
	if err != nil {
		return ""
	}
	if a := ev.GetWorkflowExecutionTerminatedEventAttributes(); a != nil {
		if a.GetIdentity() != "" {
			return fmt.Sprintf("%s (by %s)", a.GetReason(), a.GetIdentity())
		}
		return a.GetReason()
	}
	return ""
}

func notFound(key string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: %s", ErrUnknownKey, key)
	}
	return err
}
