// Package courierwf is what workflow code calls to deliver a side effect
// through Courier: Deliver, for workflows in Courier's own namespace (a
// child workflow), and the Nexus service's names and input for workflows
// in other namespaces (NexusDeliver). Deterministic only: it imports no
// client. Any workflow may import it.
package courierwf

import (
	"encoding/json"
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// Join's activity options: each attempt waits this long for a parked
// delivery before the next joins again (retries write no history).
const (
	joinWait      = time.Hour
	joinHeartbeat = 30 * time.Second
)

// request is what Deliver derives from its input, recorded once in the
// caller's history: a later Courier whose rules for valid input changed
// must not change what a running caller replays.
type request struct {
	Key         string `json:"key"`
	Fingerprint string `json:"fingerprint"`
	Invalid     string `json:"invalid,omitempty"`
}

func derive(in workflows.DeliveryInput) request {
	if err := in.Validate(); err != nil {
		return request{Invalid: err.Error()}
	}
	fp, err := opkey.Fingerprint(in.Payload)
	if err != nil {
		return request{Invalid: err.Error()}
	}
	return request{Key: opkey.Key(in.Operation), Fingerprint: fp}
}

// Deliver delivers in from a workflow of Courier's namespace and returns
// the delivery's result once it is final: it starts delivery-<key> as a
// child (abandoned when the caller closes: a caller's end never cuts a
// delivery short), or, when that workflow ID is taken, joins the delivery
// with activity workflows.ActivityJoinDelivery, which Courier's workers
// run. Every caller of one operation gets the same delivery's result.
//
// A parked delivery keeps Deliver waiting until a reviewer decides. A
// canceled caller stops waiting; the delivery goes on. Its failures are
// typed (temporal.ApplicationError, through the child's or activity's
// error): workflows.ErrInvalidRequest (nothing was started),
// workflows.ErrConflict (the operation carries another payload; nothing was
// sent), workflows.ErrNotDelivered (ended without an effect: nothing it
// sent can have applied), workflows.ErrUnconfirmed (ended without a
// confirmed effect, where one may exist: check the destination); for
// both, the returned result, and workflows.UndeliveredResult(err), say why.
func Deliver(ctx workflow.Context, in workflows.DeliveryInput) (workflows.DeliveryResult, error) {
	var req request
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return derive(in) }).Get(&req); err != nil {
		return workflows.DeliveryResult{}, err
	}
	if req.Invalid != "" {
		return workflows.DeliveryResult{}, temporal.NewNonRetryableApplicationError(
			"invalid request: "+req.Invalid+"; nothing was sent", workflows.ErrInvalidRequest, nil)
	}
	// Disconnected: canceling the caller must not cancel the delivery.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	cctx := workflow.WithChildOptions(dctx, workflow.ChildWorkflowOptions{
		WorkflowID:            workflows.WorkflowID(req.Key),
		TaskQueue:             workflows.TaskQueue,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.StartSearchAttributes(in.Operation, req.Key)...),
		StaticSummary: workflows.Summary(in.Operation),
	})
	var res workflows.DeliveryResult
	err := await(ctx, workflow.ExecuteChildWorkflow(cctx, workflows.WorkflowType, in), &res)
	if taken(err) {
		// Running (or closed, within the namespace's retention): join it, on
		// a queue of its own, so that waiting joins hold none of the
		// attempts' slots. Callers that scheduled it on workflows.TaskQueue
		// replay unchanged: the SDK matches a scheduled activity by its ID
		// and type, not its queue.
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:           workflows.JoinTaskQueue,
			StartToCloseTimeout: joinWait,
			HeartbeatTimeout:    joinHeartbeat,
			// Unbounded on purpose: a parked delivery waits for a person, and
			// each attempt only waits; the failures that decide are typed.
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval: time.Second, MaximumInterval: 10 * time.Second,
				NonRetryableErrorTypes: []string{workflows.ErrNotDelivered, workflows.ErrUnconfirmed, workflows.ErrConflict, workflows.ErrInvalidRequest},
			},
			Summary: "join " + workflows.Summary(in.Operation),
		})
		res = workflows.DeliveryResult{}
		err = await(ctx, workflow.ExecuteActivity(actx, workflows.ActivityJoinDelivery, in), &res)
	}
	if nd, ok := workflows.UndeliveredResult(err); ok {
		return nd, err
	}
	return res, err
}

// taken reports whether a child's start failed because its workflow ID is
// taken (the test environment answers as a client start would).
func taken(err error) bool {
	var child *temporal.ChildWorkflowExecutionAlreadyStartedError
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	return errors.As(err, &child) || errors.As(err, &started)
}

// await is f's value, or ctx's error once the caller is canceled.
func await(ctx workflow.Context, f workflow.Future, out any) error {
	var err error
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(f, func(f workflow.Future) { err = f.Get(ctx, out) })
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) { err = ctx.Err() })
	sel.Select(ctx)
	return err
}

// NexusInput is the input of the Nexus operation deliver of service
// courier: a business operation without its tenant, which the caller's
// endpoint fixes. A tenant set here is refused (InvalidRequest), so that a
// caller cannot believe it chose one.
type NexusInput struct {
	Destination string          `json:"destination"`
	Operation   string          `json:"operation"`
	BusinessID  string          `json:"business_id"`
	Payload     json.RawMessage `json:"payload"`
	// Tenant must be left empty: the endpoint decides it.
	Tenant string `json:"tenant,omitempty"`
}

// NexusDeliver delivers in through the Nexus endpoint, from a workflow of
// any namespace the endpoint allows, and returns the delivery's result once
// it is final. The endpoint fixes the tenant; the operation's failures are
// typed as Deliver's (through a *temporal.NexusOperationError). A parked
// delivery keeps the operation pending until a reviewer decides; opts may
// bound the wait (ScheduleToCloseTimeout) and should abandon on cancel
// (CancellationType Abandon): Courier does not cancel a delivery for one of
// its callers.
func NexusDeliver(ctx workflow.Context, endpoint string, in NexusInput, opts workflow.NexusOperationOptions) (workflows.DeliveryResult, error) {
	c := workflow.NewNexusClient(endpoint, workflows.NexusService)
	var res workflows.DeliveryResult
	err := c.ExecuteOperation(ctx, workflows.NexusOperationDeliver, in, opts).Get(ctx, &res)
	if nd, ok := workflows.UndeliveredResult(err); ok {
		return nd, err
	}
	return res, err
}

// NexusStatusInput names a delivery for the Nexus operation status: its
// operation without the tenant, which the endpoint fixes.
type NexusStatusInput struct {
	Destination string `json:"destination"`
	Operation   string `json:"operation"`
	BusinessID  string `json:"business_id"`
}

// NexusStatus reads the status of the endpoint's tenant's delivery of in,
// at once (state awaiting_review while parked, with the review's
// evidence). An operation no delivery has fails with type
// workflows.ErrUnknownDelivery.
func NexusStatus(ctx workflow.Context, endpoint string, in NexusStatusInput, opts workflow.NexusOperationOptions) (workflows.DeliveryStatus, error) {
	c := workflow.NewNexusClient(endpoint, workflows.NexusService)
	var st workflows.DeliveryStatus
	err := c.ExecuteOperation(ctx, workflows.NexusOperationStatus, in, opts).Get(ctx, &st)
	return st, err
}
