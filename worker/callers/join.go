package callers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// Join runs activity workflows.ActivityJoinDelivery for the workers.
type Join struct {
	s *starter.Client
	// wait bounds how long one attempt waits for the end; 0: until the
	// activity's own timeout.
	wait time.Duration
}

// NewJoin is the join activity over client c for workflows.JoinTaskQueue:
// each attempt waits until the delivery ends (or the attempt times out).
func NewJoin(c client.Client) *Join { return &Join{s: starter.New(c)} }

// BriefWait is how long a join on workflows.TaskQueue waits.
const BriefWait = 2 * time.Second

// NewBriefJoin is the join activity for workflows.TaskQueue, where callers
// built before workflows.JoinTaskQueue (and anyone who may schedule an
// activity) schedule it: each attempt waits at most BriefWait, then fails
// with ErrJoinPending to be retried (retries write no history), so that no
// join holds a slot the attempts need for longer.
func NewBriefJoin(c client.Client) *Join { return &Join{s: starter.New(c), wait: BriefWait} }

// ErrJoinPending is the retryable failure of a brief join whose delivery
// is not final yet.
const ErrJoinPending = "JoinPending"

// JoinDelivery is activity workflows.ActivityJoinDelivery, which Courier's
// workers run for a workflow whose delivery call (courierwf.Deliver) found
// delivery-<key> taken: Temporal starts a child only under a free workflow
// ID, so the call joins here, as starter.Client.Start does, and waits for
// the delivery's end, heartbeating. A parked delivery keeps it waiting; each
// attempt waits until its start-to-close timeout (a brief join's, at most
// BriefWait) and the next joins again, which sends nothing. Its failures are typed as the workflow's:
// ErrInvalidRequest, ErrConflict, and ErrNotDelivered or ErrUnconfirmed
// with the result as details.
func (j *Join) JoinDelivery(ctx context.Context, in workflows.DeliveryInput) (workflows.DeliveryResult, error) {
	h, err := j.s.Start(ctx, in)
	if err != nil {
		return workflows.DeliveryResult{}, typedFailure(err)
	}
	stop := activities.Heartbeat(ctx)
	defer stop()
	if j.wait == 0 {
		return j.final(ctx, h)
	}
	wctx, cancel := context.WithTimeout(ctx, j.wait)
	defer cancel()
	res, err := j.final(wctx, h)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		// Benign: expected while a delivery runs, logged at debug only.
		return res, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("delivery %s is not final yet; the join asks again", h.Key),
			ErrJoinPending, temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign})
	}
	return res, err
}

// final waits for the end of h's run and returns its result: a delivered
// one, or a typed NotDelivered or Unconfirmed failure carrying it.
func (j *Join) final(ctx context.Context, h starter.Handle) (workflows.DeliveryResult, error) {
	res, err := j.s.Result(ctx, h.Key, h.RunID)
	var term *temporal.TerminatedError
	var timeout *temporal.TimeoutError
	if errors.As(err, &term) || errors.As(err, &timeout) {
		// The server ended it: what it recorded until then, and how.
		st, serr := j.s.RunStatus(ctx, h.Key, h.RunID)
		if serr != nil {
			return res, fmt.Errorf("read delivery %s: %w", h.Key, serr)
		}
		res, err = st.DeliveryResult, nil
	}
	if err != nil {
		return res, err
	}
	if !res.Status.Delivered() {
		return res, notDelivered(res)
	}
	return res, nil
}

// notDelivered is the failure of a delivery that ended without delivering,
// as its run fails: type res.FailureType(), the result as details
// (workflows.UndeliveredResult reads it back).
func notDelivered(res workflows.DeliveryResult) error {
	msg := string(res.Status)
	if res.Error != "" {
		msg += ": " + res.Error
	}
	return temporal.NewNonRetryableApplicationError(msg, res.FailureType(), nil, res)
}

// typedFailure turns the starter's refusals into the failures every SDK
// can tell apart by type (workflows.ErrInvalidRequest; workflows.ErrConflict
// with the delivery's fingerprint, then the request's), neither retried;
// any other error is returned as it is.
func typedFailure(err error) error {
	var invalid *starter.InvalidRequestError
	var conflict *starter.ConflictError
	switch {
	case errors.As(err, &invalid):
		return temporal.NewNonRetryableApplicationError(invalid.Error()+"; nothing was sent", workflows.ErrInvalidRequest, nil)
	case errors.As(err, &conflict):
		return temporal.NewNonRetryableApplicationError(conflict.Error(), workflows.ErrConflict, nil,
			conflict.ExistingFingerprint, conflict.RequestFingerprint)
	}
	return err
}
