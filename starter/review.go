package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/workflows"
)

// Review sends a review decision through the validated update: a malformed
// decision, or one for a delivery not awaiting review, is refused with the
// reason and changes nothing. Errors: *InvalidRequestError (the decision is
// malformed; nothing was sent), ErrUnknownKey, *NotAwaitingReviewError,
// *ReviewRefusedError (the workflow's validator said no, e.g. a reviewer
// outside the workers' allow-list).
func (s *Client) Review(ctx context.Context, key string, d workflows.ReviewDecision) (workflows.ReviewRecord, error) {
	var rec workflows.ReviewRecord
	if err := d.Validate(); err != nil {
		return rec, &InvalidRequestError{err}
	}
	h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.WorkflowID(key),
		UpdateName:   workflows.UpdateReview,
		Args:         []any{d},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return rec, s.reviewError(ctx, key, err)
	}
	if err := h.Get(ctx, &rec); err != nil {
		return rec, s.reviewError(ctx, key, err)
	}
	return rec, nil
}

// NotAwaitingReviewError: the delivery exists but is not waiting for a
// decision (still delivering, or finished). Nothing was changed.
type NotAwaitingReviewError struct {
	Key   string
	State workflows.State
	// Ended, for a run the server terminated or timed out, is which and when.
	Ended *workflows.RunEnded
}

func (e *NotAwaitingReviewError) Error() string {
	switch {
	case e.Ended != nil:
		return fmt.Sprintf("delivery %s is not awaiting review: its run %s was %s at %s, so nothing can decide it; "+
			"to move on, deliver the operation again (courier deliver, same payload): the new run parks for review "+
			"naming this run wherever a repeat could apply it twice",
			e.Key, e.Ended.RunID, strings.ReplaceAll(string(e.Ended.How), "_", " "), e.Ended.At.UTC().Format(time.RFC3339))
	case e.State == workflows.State(workflows.StatusCanceled):
		return fmt.Sprintf("delivery %s is not awaiting review: it was canceled, so nothing can decide it; "+
			"to move on, deliver the operation again (courier deliver, same payload)", e.Key)
	}
	return fmt.Sprintf("delivery %s is not awaiting review (state %s): there is nothing to decide", e.Key, e.State)
}

// ReviewRefusedError: the workflow's validator refused the decision.
// Nothing was changed.
type ReviewRefusedError struct {
	Key    string
	Reason string
}

func (e *ReviewRefusedError) Error() string {
	return fmt.Sprintf("review of %s refused: %s", e.Key, e.Reason)
}

func (s *Client) reviewError(ctx context.Context, key string, err error) error {
	var nf *serviceerror.NotFound
	var app *temporal.ApplicationError
	switch {
	case errors.As(err, &nf):
		// A closed delivery takes no update; an unknown one has no status.
		st, serr := s.Status(ctx, key)
		if serr != nil {
			return serr
		}
		return &NotAwaitingReviewError{Key: key, State: st.State, Ended: st.Ended}
	case errors.As(err, &app):
		// The validator runs against the workflow's state; say which
		// state when that is what it objected to.
		if st, serr := s.Status(ctx, key); serr == nil && st.State != workflows.StateAwaitingReview {
			return &NotAwaitingReviewError{Key: key, State: st.State, Ended: st.Ended}
		}
		return &ReviewRefusedError{Key: key, Reason: app.Message()}
	}
	return fmt.Errorf("review %s: %w", key, err)
}
