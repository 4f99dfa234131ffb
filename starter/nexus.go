package starter

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/nexus-rpc/sdk-go/nexus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/abde64c9/courier/courierwf"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// nexusTenant is what a tenant served through Nexus may be named: it is
// part of a task queue and of an endpoint's name.
var nexusTenant = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$`)

// CheckNexusTenant says how to fix a tenant name Nexus cannot serve.
func CheckNexusTenant(tenant string) error {
	if !nexusTenant.MatchString(tenant) {
		return fmt.Errorf("nexus tenant %q: use 1-64 lowercase letters, digits and inner dashes (it names a task queue and an endpoint)", tenant)
	}
	return nil
}

// NexusTaskQueue is the task queue the tenant's endpoint targets; the
// workers serving the tenant poll it.
func NexusTaskQueue(tenant string) string { return workflows.NexusTaskQueuePrefix + tenant }

// NexusEndpoint is the name `courier-lab dev` gives the tenant's endpoint.
func NexusEndpoint(tenant string) string { return "courier-" + tenant }

// NexusService is the Nexus service courier, whose deliver operation the
// workers serve on each tenant's task queue (NexusTaskQueue). The tenant
// of a delivery is the one whose task queue the request arrived on: the
// endpoint a caller may use decides it, never the caller's input.
func NexusService(c client.Client) *nexus.Service {
	s := New(c)
	svc := nexus.NewService(workflows.NexusService)
	svc.MustRegister(temporalnexus.MustNewTemporalOperation(temporalnexus.TemporalOperationOptions[courierwf.NexusInput, workflows.DeliveryResult]{
		Name:  workflows.NexusOperationDeliver,
		Start: s.nexusDeliver,
		// A caller's cancel never cancels the delivery: other callers may
		// wait on it, and an attempt cut short is an unknown outcome.
		CancelWorkflowRun: func(context.Context, client.Client, temporalnexus.CancelTemporalWorkflowRunOptions, nexus.CancelOperationOptions) error {
			return nexus.NewHandlerErrorf(nexus.HandlerErrorTypeNotImplemented,
				"a delivery is not canceled by its callers: cancel with cancellation type Abandon to stop waiting")
		},
	}))
	svc.MustRegister(nexus.NewSyncOperation(workflows.NexusOperationStatus, s.nexusStatus))
	return svc
}

// nexusStatus is the status of the tenant's delivery of in.
func (s *Client) nexusStatus(ctx context.Context, in courierwf.NexusStatusInput, _ nexus.StartOperationOptions) (workflows.DeliveryStatus, error) {
	tenant, err := endpointTenant(ctx)
	if err != nil {
		return workflows.DeliveryStatus{}, err
	}
	op := opkey.Operation{Tenant: tenant, Destination: in.Destination, Operation: in.Operation, BusinessID: in.BusinessID}
	if err := op.Validate(); err != nil {
		return workflows.DeliveryStatus{}, failed(TypedFailure(&InvalidRequestError{err}))
	}
	st, err := s.Status(ctx, opkey.Key(op))
	if errors.Is(err, ErrUnknownKey) {
		return st, failed(temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no delivery of %s → %s · %s for tenant %s", in.Operation, in.Destination, in.BusinessID, tenant),
			workflows.ErrUnknownDelivery, nil))
	}
	return st, err
}

// endpointTenant is the tenant whose task queue the request came on: the
// one its endpoint serves.
func endpointTenant(ctx context.Context) (string, error) {
	tq := temporalnexus.GetOperationInfo(ctx).TaskQueue
	tenant, ok := strings.CutPrefix(tq, workflows.NexusTaskQueuePrefix)
	if !ok || CheckNexusTenant(tenant) != nil {
		// An endpoint aimed at a queue of no tenant: the setup is wrong.
		return "", nexus.NewHandlerErrorf(nexus.HandlerErrorTypeInternal,
			"the endpoint targets task queue %q, not one of a tenant (%s<tenant>)", tq, workflows.NexusTaskQueuePrefix)
	}
	return tenant, nil
}

type nexusResult = temporalnexus.TemporalOperationResult[workflows.DeliveryResult]

// nexusDeliver starts the delivery with the caller's callback attached, or
// attaches it to the running delivery of the same payload, or answers at
// once from a closed one: the operation's result is the delivery's result.
func (s *Client) nexusDeliver(ctx context.Context, nc temporalnexus.NexusClient, in courierwf.NexusInput, _ temporalnexus.StartTemporalOperationOptions) (nexusResult, error) {
	tenant, err := endpointTenant(ctx)
	if err != nil {
		return nexusResult{}, err
	}
	if in.Tenant != "" {
		return nexusResult{}, failed(TypedFailure(&InvalidRequestError{
			fmt.Errorf("tenant: set by the endpoint (here %q), not by the caller; leave it out", tenant)}))
	}
	din := workflows.DeliveryInput{
		Operation: opkey.Operation{Tenant: tenant, Destination: in.Destination, Operation: in.Operation, BusinessID: in.BusinessID},
		Payload:   in.Payload,
	}
	h, err := s.handle(din)
	if err != nil {
		return nexusResult{}, failed(TypedFailure(err))
	}
	return s.nexusStart(ctx, nc, din, h, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE)
}

func (s *Client) nexusStart(ctx context.Context, nc temporalnexus.NexusClient, in workflows.DeliveryInput, h Handle, reuse enumspb.WorkflowIdReusePolicy) (nexusResult, error) {
	opts := s.startOptions(in, h, reuse)
	r, err := temporalnexus.StartUntypedWorkflow[workflows.DeliveryResult](ctx, nc, opts, workflows.WorkflowType, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if !errors.As(err, &started) {
		return r, err // started, or an error the Nexus task retries
	}
	// Taken. The deliver update's validator is the join check: accepted,
	// the running delivery carries this payload, and the callback is
	// attached to it; refused, another payload, and nothing is attached.
	err = s.joinCheck(ctx, h, started.RunId)
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
		if r, err = temporalnexus.StartUntypedWorkflow[workflows.DeliveryResult](ctx, nc, opts, workflows.WorkflowType, in); err != nil {
			if errors.As(err, &started) {
				// Closed since (a closed run answers a known update ID with
				// its stored outcome, so the check above passed).
				return s.nexusClosed(ctx, nc, in, h, started.RunId, reuse)
			}
			return r, err
		}
		// The run attached to is the latest; should the checked one have
		// closed and another payload's run begun between the two calls,
		// this check refuses the operation (the callback then finds it
		// failed and is dropped).
		if err := s.joinCheck(ctx, h, ""); err != nil && !errors.As(err, &nf) {
			return nexusResult{}, failed(TypedFailure(s.conflictOr(h, err)))
		}
		return r, nil
	case errors.As(err, &nf):
		return s.nexusClosed(ctx, nc, in, h, started.RunId, reuse)
	}
	return nexusResult{}, failed(TypedFailure(s.conflictOr(h, err)))
}

// nexusClosed answers from the closed run runID: its result at once, or a
// new run where the operation may run again.
func (s *Client) nexusClosed(ctx context.Context, nc temporalnexus.NexusClient, in workflows.DeliveryInput, h Handle, runID string, reuse enumspb.WorkflowIdReusePolicy) (nexusResult, error) {
	prev, restart, err := s.closed(ctx, h, runID, reuse)
	if err != nil {
		return nexusResult{}, failed(TypedFailure(err))
	}
	if restart {
		return s.nexusStart(ctx, nc, in, h, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE)
	}
	if !prev.Status.Delivered() {
		return nexusResult{}, failed(NotDelivered(prev))
	}
	return temporalnexus.NewSyncResult(prev), nil
}

// failed ends the operation with err when it is one of the typed failures
// (an application error that is not retried); any other error is the
// handler's, which Nexus retries.
func failed(err error) error {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.NonRetryable() {
		return &nexus.OperationError{State: nexus.OperationStateFailed, Message: app.Error(), Cause: err}
	}
	return err
}
