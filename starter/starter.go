// Package starter is what services import to start deliveries, and what
// operators use to review them: start or join, review, status, list. Any Go
// service may import it; the worker's side of calls from other workflows
// (worker/callers) uses it as one.
package starter

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// Client starts and reviews deliveries through a Temporal client (which
// carries the data converter, an encrypting codec say).
type Client struct {
	c client.Client
	// namespace and dc are the client's, for the batch operations' raw
	// requests, which name the namespace and carry encoded payloads.
	namespace string
	dc        converter.DataConverter
}

// New wraps a connected Temporal client of the default namespace, with the
// default data converter.
func New(c client.Client) *Client {
	return &Client{c: c, namespace: client.DefaultNamespace, dc: converter.GetDefaultDataConverter()}
}

// NewWithOptions wraps a Temporal client connected with opts: bulk reviews
// use its namespace and data converter (an encrypting codec, say).
func NewWithOptions(c client.Client, opts client.Options) *Client {
	s := New(c)
	if opts.Namespace != "" {
		s.namespace = opts.Namespace
	}
	if opts.DataConverter != nil {
		s.dc = opts.DataConverter
	}
	return s
}

// InvalidRequestError is a request refused before anything was sent.
type InvalidRequestError struct{ Err error }

func (e *InvalidRequestError) Error() string { return "invalid request: " + e.Err.Error() }
func (e *InvalidRequestError) Unwrap() error { return e.Err }

// ConflictError: the operation was already started with another payload.
// Nothing was sent for this request.
type ConflictError struct {
	Key                 string
	ExistingFingerprint string
	RequestFingerprint  string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("conflict: delivery %s was started with another payload (fingerprint %s, this request %s); nothing was sent",
		e.Key, short(e.ExistingFingerprint), short(e.RequestFingerprint))
}

// ErrUnknownKey: no delivery has this key.
var ErrUnknownKey = errors.New("no delivery with this key")

// Handle names a started (or joined) delivery.
type Handle struct {
	Key         string `json:"key"`
	Fingerprint string `json:"fingerprint"`
	WorkflowID  string `json:"workflow_id"`
	RunID       string `json:"run_id"`
	// Joined is true when the operation had been started before with the
	// same payload: this request sent nothing.
	Joined bool `json:"joined"`
}

// ParseKey accepts a delivery key or its workflow ID (delivery-<key>) and
// returns the key.
func ParseKey(s string) (string, error) {
	k := strings.TrimPrefix(strings.TrimSpace(s), workflows.WorkflowIDPrefix)
	u, err := uuid.Parse(k)
	if err != nil || u.String() != k {
		return "", fmt.Errorf("%q is not a delivery key: a key is a lowercase UUID such as "+
			"6ba7b810-9dad-51d1-80b4-00c04fd430c8, or its workflow ID %s<key>", s, workflows.WorkflowIDPrefix)
	}
	return k, nil
}

// Start starts the delivery of in, or joins the one already started for the
// same operation. It validates in first: a bad request sends nothing. A
// join is checked by the workflow itself (its deliver update's validator):
// another payload is a *ConflictError.
func (s *Client) Start(ctx context.Context, in workflows.DeliveryInput) (Handle, error) {
	h, err := s.handle(in)
	if err != nil {
		return Handle{}, err
	}
	// One run per operation (within the namespace's retention): a second
	// start joins the first instead.
	return s.start(ctx, in, h, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE)
}

func (s *Client) handle(in workflows.DeliveryInput) (Handle, error) {
	if err := in.Validate(); err != nil {
		return Handle{}, &InvalidRequestError{err}
	}
	fp, err := opkey.Fingerprint(in.Payload)
	if err != nil {
		return Handle{}, &InvalidRequestError{err}
	}
	key := opkey.Key(in.Operation)
	return Handle{Key: key, Fingerprint: fp, WorkflowID: workflows.WorkflowID(key)}, nil
}

func (s *Client) startOptions(in workflows.DeliveryInput, h Handle, reuse enumspb.WorkflowIdReusePolicy) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                    h.WorkflowID,
		TaskQueue:             workflows.TaskQueue,
		WorkflowIDReusePolicy: reuse,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.StartSearchAttributes(in.Operation, h.Key)...),
		// No memo: anything in it would be a claim any client can set, and
		// the deliver update's validator compares the fingerprint the
		// workflow derives itself.
		StaticSummary: workflows.Summary(in.Operation),
	}
}

func (s *Client) start(ctx context.Context, in workflows.DeliveryInput, h Handle, reuse enumspb.WorkflowIdReusePolicy) (Handle, error) {
	opts := s.startOptions(in, h, reuse)
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	run, err := s.c.ExecuteWorkflow(ctx, opts, workflows.WorkflowType, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case err == nil:
		h.RunID = run.GetRunID()
		return h, nil
	case !errors.As(err, &started):
		return Handle{}, fmt.Errorf("start delivery %s: %w", h.Key, err)
	}
	// Running: the workflow's validator accepts the join or calls it a conflict.
	err = s.joinCheck(ctx, h, started.RunId)
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		h.RunID, h.Joined = started.RunId, true
		return h, nil
	case errors.As(err, &nf):
		// Closed since: its result decides.
		_, restart, err := s.closed(ctx, h, started.RunId, reuse)
		if err != nil {
			return Handle{}, err
		}
		if restart {
			return s.start(ctx, in, h, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE)
		}
		h.RunID, h.Joined = started.RunId, true
		return h, nil
	}
	return Handle{}, s.conflictOr(h, err)
}

// Attach is Start for a caller that waits by callback, as a Nexus operation
// does: start makes each start (with the caller's callback) from the options
// given, and fails with *serviceerror.WorkflowExecutionAlreadyStarted where
// the ID is taken. A running delivery of the same payload is attached to (a
// second start that uses the existing run); a closed one answers at once
// with its result (prev), unless it may run again; another payload is a
// *ConflictError, and nothing is attached.
func (s *Client) Attach(ctx context.Context, in workflows.DeliveryInput, start func(client.StartWorkflowOptions) error) (prev *workflows.DeliveryResult, err error) {
	h, err := s.handle(in)
	if err != nil {
		return nil, err
	}
	reuse := enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	for {
		opts := s.startOptions(in, h, reuse)
		err := start(opts)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if !errors.As(err, &started) {
			return nil, err // started, or an error the caller retries
		}
		// Taken. The deliver update's validator is the join check: accepted,
		// the running delivery carries this payload and the callback is
		// attached to it; refused, another payload, and nothing is attached.
		err = s.joinCheck(ctx, h, started.RunId)
		var nf *serviceerror.NotFound
		runID := started.RunId
		switch {
		case err == nil:
			opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
			err = start(opts)
			if !errors.As(err, &started) {
				if err != nil {
					return nil, err
				}
				// The run attached to is the latest; should the checked one
				// have closed and another payload's run begun between the two
				// calls, this check refuses (the callback then finds it
				// failed and is dropped).
				if err := s.joinCheck(ctx, h, ""); err != nil && !errors.As(err, &nf) {
					return nil, s.conflictOr(h, err)
				}
				return nil, nil
			}
			// Closed since (a closed run answers a known update ID with its
			// stored outcome, so the check above passed).
			runID = started.RunId
		case !errors.As(err, &nf):
			return nil, s.conflictOr(h, err)
		}
		res, restart, err := s.closed(ctx, h, runID, reuse)
		if err != nil {
			return nil, err
		}
		if !restart {
			return &res, nil
		}
		reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	}
}

// callerToken tells this caller's answer from its concurrent callers':
// 64 random bits.
func callerToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// deliverUpdate is the deliver update for h's payload under this update ID;
// caller is this caller's token, empty where the answer's starter does not
// matter.
func deliverUpdate(h Handle, id, caller string, stage client.WorkflowUpdateStage) client.UpdateWorkflowOptions {
	return client.UpdateWorkflowOptions{
		WorkflowID:   h.WorkflowID,
		UpdateID:     id,
		UpdateName:   workflows.UpdateDeliver,
		Args:         []any{workflows.DeliverRequest{Caller: caller, Brief: true}}, // the ID names the payload
		WaitForStage: stage,
	}
}

// answer is the deliver update's answer: a brief one, of a final delivery,
// completed with the run's result, which the run closed with in the same
// workflow task.
func (s *Client) answer(ctx context.Context, h Handle, uh client.WorkflowUpdateHandle) (workflows.Settled, error) {
	var out workflows.Settled
	if err := uh.Get(ctx, &out); err != nil || !out.Brief {
		return out, err
	}
	res, err := s.Result(ctx, h.Key, uh.RunID())
	if err != nil {
		return out, err
	}
	out.DeliveryStatus = workflows.DeliveryStatus{State: res.StateOr(out.State), DeliveryResult: res}
	return out, nil
}

// conflictOr turns the deliver update's refusals into a *ConflictError
// or an *InvalidRequestError; any other error is wrapped.
func (s *Client) conflictOr(h Handle, err error) error {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == workflows.ErrConflict {
		var existing, requested string
		if app.Details(&existing, &requested) != nil {
			existing = "(unknown)"
		}
		return &ConflictError{Key: h.Key, ExistingFingerprint: existing, RequestFingerprint: h.Fingerprint}
	}
	if errors.As(err, &app) && app.Type() == workflows.ErrInvalidRequest {
		return &InvalidRequestError{errors.New(app.Message())}
	}
	return fmt.Errorf("delivery %s: %w", h.Key, err)
}

// closed reads a finished run's result: a conflict when it carried another
// payload and may not run again; restart when it applied nothing and may.
func (s *Client) closed(ctx context.Context, h Handle, runID string, reuse enumspb.WorkflowIdReusePolicy) (workflows.DeliveryResult, bool, error) {
	prev, err := s.Result(ctx, h.Key, runID)
	var term *temporal.TerminatedError
	var timeout *temporal.TimeoutError
	if errors.As(err, &term) || errors.As(err, &timeout) {
		// It never recorded an end: what it recorded until then, and how
		// the server ended it.
		st, serr := s.RunStatus(ctx, h.Key, runID)
		if serr != nil {
			return prev, false, fmt.Errorf("read the earlier delivery: %w", serr)
		}
		prev, err = st.DeliveryResult, nil
	}
	if err != nil {
		return prev, false, fmt.Errorf("read the earlier delivery: %w", err)
	}
	if reuse == enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE && restartable(prev, h.Fingerprint) {
		return prev, true, nil
	}
	if prev.Fingerprint != h.Fingerprint {
		return prev, false, &ConflictError{Key: h.Key, ExistingFingerprint: prev.Fingerprint, RequestFingerprint: h.Fingerprint}
	}
	return prev, false, nil
}

// restartable says whether a finished delivery may be run again for a new
// request: one that provably applied nothing (the rule the workflow's own
// guard against a second run uses), or one stopped from outside before it
// settled (terminated, timed out, canceled), which nothing could decide
// otherwise. A rejected one never consumed its key, so the request may
// have been corrected; any other is run again only with the same payload.
// A stopped run that may have applied is policed by the new run's guard:
// where a repeat could apply twice, it parks naming that run.
func restartable(prev workflows.DeliveryResult, fingerprint string) bool {
	if prev.Status.EndedUnfinished() {
		return prev.Fingerprint == fingerprint
	}
	return prev.LeftNoEffect() && (prev.Status == workflows.StatusRejected || prev.Fingerprint == fingerprint)
}

// Deliver starts or joins the delivery of in and waits until it finishes or
// stops for review (State awaiting_review), in one Update-with-Start call:
// the workflow answers as soon as it settles. A joined delivery that had
// delivered reports status duplicate with the first delivery's receipt.
func (s *Client) Deliver(ctx context.Context, in workflows.DeliveryInput) (workflows.DeliveryStatus, error) {
	h, err := s.handle(in)
	if err != nil {
		return workflows.DeliveryStatus{}, err
	}
	st, joined, err := s.settle(ctx, in, h, "")
	if err != nil {
		return st, err
	}
	st.Operation = in.Operation
	if joined {
		switch st.Status {
		case workflows.StatusCreated, workflows.StatusDuplicate, workflows.StatusDeliveredByReview:
			st.Status = workflows.StatusDuplicate
			st.State = st.StateOr(st.State)
		}
	}
	return st, nil
}

// settle starts or joins with the deliver update and waits for its answer.
// after, when set, is a finished run that applied nothing: the delivery
// runs again after it (and its callers share one update on the new run).
func (s *Client) settle(ctx context.Context, in workflows.DeliveryInput, h Handle, after string) (workflows.DeliveryStatus, bool, error) {
	caller := callerToken()
	reuse := enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	if after != "" {
		reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	}
	opts := s.startOptions(in, h, reuse)
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	notReady := 0
	for epoch := 0; ; {
		id := workflows.BriefDeliverUpdateID(h.Fingerprint, epoch)
		if after != "" {
			// The finished run answers its own update's ID with its stored
			// outcome: the new run's update needs another.
			id += "-after-" + after
		}
		uh, err := s.c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: s.c.NewWithStartWorkflowOperation(opts, workflows.WorkflowType, in),
			UpdateOptions:          deliverUpdate(h, id, caller, client.WorkflowUpdateStageCompleted),
		})
		var out workflows.Settled
		if err == nil {
			out, err = s.answer(ctx, h, uh)
		}
		if notReady < maxNotReady && retryable(ctx, err) {
			notReady++
			continue // the same update ID joins what the first try began
		}
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			// Finished, and not to be run again: its result is the answer.
			prev, restart, err := s.closed(ctx, h, started.RunId, reuse)
			if err != nil {
				return workflows.DeliveryStatus{}, false, err
			}
			if restart {
				return s.settle(ctx, in, h, started.RunId)
			}
			return workflows.DeliveryStatus{State: prev.StateOr(""), DeliveryResult: prev}, true, nil
		}
		if err != nil {
			return workflows.DeliveryStatus{}, false, s.conflictOr(h, err)
		}
		joined := out.Starter != caller
		st := out.DeliveryStatus
		if st.Status != "" && after == "" && joined && restartable(st.DeliveryResult, h.Fingerprint) {
			// The server answered with an earlier run's outcome; one that
			// applied nothing runs again for this request.
			return s.settle(ctx, in, h, uh.RunID())
		}
		if st.State != workflows.StateAwaitingReview {
			return st, joined, nil
		}
		// The update may have answered at an earlier park that a reviewer
		// has decided since: the status query says where it is now.
		now, err := s.Status(ctx, h.Key)
		if err != nil {
			return workflows.DeliveryStatus{}, false, err
		}
		if now.Status != "" && after == "" && joined && restartable(now.DeliveryResult, h.Fingerprint) {
			// Stopped since it parked (terminated, canceled): its stored
			// answer is stale, and the operation runs again.
			return s.settle(ctx, in, h, uh.RunID())
		}
		if now.State == workflows.StateAwaitingReview || now.Status != "" {
			return now, joined, nil
		}
		epoch = now.Review.AcceptedDecisions() // delivering again: wait for its next settle
	}
}

// Wait waits for the delivery with this key to finish or to stop for review.
func (s *Client) Wait(ctx context.Context, key string) (workflows.DeliveryStatus, error) {
	st, err := s.settledStatus(ctx, key)
	if err != nil || st.Status != "" || st.State == workflows.StateAwaitingReview {
		return st, err
	}
	h := Handle{Key: key, Fingerprint: st.Fingerprint, WorkflowID: workflows.WorkflowID(key)}
	uh, err := s.c.UpdateWorkflow(ctx, deliverUpdate(h,
		workflows.BriefDeliverUpdateID(h.Fingerprint, st.Review.AcceptedDecisions()), "", client.WorkflowUpdateStageCompleted))
	var out workflows.Settled
	if err == nil {
		out, err = s.answer(ctx, h, uh)
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return s.Status(ctx, key) // finished in between
	}
	if err != nil {
		return workflows.DeliveryStatus{}, fmt.Errorf("wait for delivery %s: %w", key, err)
	}
	if out.State == workflows.StateAwaitingReview {
		return s.Status(ctx, key)
	}
	// A brief answer leaves out what the delivery holds from its start (the
	// operation) or its first park (keyed reviewers): the status read above
	// has them.
	out.Operation, out.KeyedReviewers = st.Operation, cmp.Or(out.KeyedReviewers, st.KeyedReviewers)
	return out.DeliveryStatus, nil
}

// busyRetry is how soon Wait asks again when no worker took its query in
// time: the workers are busy, which is no answer.
const busyRetry = time.Second

// settledStatus is Status, asked again while the workers are too busy to
// answer the query (a backlog released at once), until ctx ends.
func (s *Client) settledStatus(ctx context.Context, key string) (workflows.DeliveryStatus, error) {
	for {
		st, err := s.Status(ctx, key)
		var busy *serviceerror.DeadlineExceeded
		if !errors.As(err, &busy) || ctx.Err() != nil {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, err
		case <-time.After(busyRetry):
		}
	}
}

// maxNotReady bounds how often settle asks again after "not ready": a
// workflow task that keeps failing is a fault to report, not to wait out.
const maxNotReady = 30

// retryable: err is the server's "not ready" (the workflow task that was to
// take the update failed: a worker died in it, or the server refused its
// commands for a moment, e.g. a new namespace's search attributes not yet
// everywhere). The server retries the task; the caller asks again after
// busyRetry, unless ctx ends first.
func retryable(ctx context.Context, err error) bool {
	var notReady *serviceerror.WorkflowNotReady
	if !errors.As(err, &notReady) {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(busyRetry):
		return true
	}
}

func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

// joinCheck asks the deliver update's validator of run runID (empty: the
// latest) whether h's payload joins it: nil when it does, a conflict when
// the run carries another payload, NotFound when the run has closed.
func (s *Client) joinCheck(ctx context.Context, h Handle, runID string) error {
	join := deliverUpdate(h, workflows.BriefDeliverUpdateID(h.Fingerprint, 0), "", client.WorkflowUpdateStageAccepted)
	join.RunID = runID
	_, err := s.c.UpdateWorkflow(ctx, join)
	return err
}
