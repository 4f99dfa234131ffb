// Package callers is the worker's side of calls from other workflows: the
// Nexus service courier, served on each tenant's task queue, and the join
// activity behind a child-workflow delivery call (courierwf). Both start or
// join deliveries through the starter, as any service does. Only the
// worker imports it.
package callers

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/abde64c9/courier/courierwf"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// tenantName is what a tenant served through Nexus may be named: it is
// part of a task queue and of an endpoint's name.
var tenantName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$`)

// CheckTenant says how to fix a tenant name Nexus cannot serve.
func CheckTenant(tenant string) error {
	if !tenantName.MatchString(tenant) {
		return fmt.Errorf("nexus tenant %q: use 1-64 lowercase letters, digits and inner dashes (it names a task queue and an endpoint)", tenant)
	}
	return nil
}

// NexusService is the Nexus service courier, whose deliver operation the
// workers serve on each tenant's task queue (workflows.NexusTaskQueue). The
// tenant of a delivery is the one whose task queue the request arrived on:
// the endpoint a caller may use decides it, never the caller's input.
func NexusService(c client.Client, allows func(dest, tenant string) bool) *nexus.Service {
	h := &nexusHandler{s: starter.New(c), allows: allows}
	svc := nexus.NewService(workflows.NexusService)
	svc.MustRegister(temporalnexus.MustNewTemporalOperation(temporalnexus.TemporalOperationOptions[courierwf.NexusInput, workflows.DeliveryResult]{
		Name:  workflows.NexusOperationDeliver,
		Start: h.deliver,
		// A caller's cancel never cancels the delivery: other callers may
		// wait on it, and an attempt cut short is an unknown outcome.
		CancelWorkflowRun: func(context.Context, client.Client, temporalnexus.CancelTemporalWorkflowRunOptions, nexus.CancelOperationOptions) error {
			return nexus.NewHandlerErrorf(nexus.HandlerErrorTypeNotImplemented,
				"a delivery is not canceled by its callers: cancel with cancellation type Abandon to stop waiting")
		},
	}))
	svc.MustRegister(nexus.NewSyncOperation(workflows.NexusOperationStatus, h.status))
	return svc
}

type nexusHandler struct {
	s *starter.Client
	// allows says whether a tenant may use a destination.
	allows func(dest, tenant string) bool
}

// status is the status of the tenant's delivery of in.
func (h *nexusHandler) status(ctx context.Context, in courierwf.NexusStatusInput, _ nexus.StartOperationOptions) (workflows.DeliveryStatus, error) {
	tenant, err := endpointTenant(ctx)
	if err != nil {
		return workflows.DeliveryStatus{}, err
	}
	op := opkey.Operation{Tenant: tenant, Destination: in.Destination, Operation: in.Operation, BusinessID: in.BusinessID}
	if err := op.Validate(); err != nil {
		return workflows.DeliveryStatus{}, failed(typedFailure(&starter.InvalidRequestError{Err: err}))
	}
	st, err := h.s.Status(ctx, opkey.Key(op))
	if errors.Is(err, starter.ErrUnknownKey) {
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
	if !ok || CheckTenant(tenant) != nil {
		// An endpoint aimed at a queue of no tenant: the setup is wrong.
		return "", nexus.NewHandlerErrorf(nexus.HandlerErrorTypeInternal,
			"the endpoint targets task queue %q, not one of a tenant (%s<tenant>)", tq, workflows.NexusTaskQueuePrefix)
	}
	return tenant, nil
}

type nexusResult = temporalnexus.TemporalOperationResult[workflows.DeliveryResult]

// deliver starts the delivery with the caller's callback attached, or
// attaches it to the running delivery of the same payload, or answers at
// once from a closed one: the operation's result is the delivery's result.
func (h *nexusHandler) deliver(ctx context.Context, nc temporalnexus.NexusClient, in courierwf.NexusInput, _ temporalnexus.StartTemporalOperationOptions) (nexusResult, error) {
	tenant, err := endpointTenant(ctx)
	if err != nil {
		return nexusResult{}, err
	}
	if in.Tenant != "" {
		return nexusResult{}, failed(typedFailure(&starter.InvalidRequestError{
			Err: fmt.Errorf("tenant: set by the endpoint (here %q), not by the caller; leave it out", tenant)}))
	}
	if !h.allows(in.Destination, tenant) {
		return nexusResult{}, failed(typedFailure(&starter.InvalidRequestError{
			Err: fmt.Errorf("destination %q: tenant %s may not use it", in.Destination, tenant)}))
	}
	din := workflows.DeliveryInput{
		Operation: opkey.Operation{Tenant: tenant, Destination: in.Destination, Operation: in.Operation, BusinessID: in.BusinessID},
		Payload:   in.Payload,
	}
	var r nexusResult
	prev, err := h.s.Attach(ctx, din, func(opts client.StartWorkflowOptions) (err error) {
		r, err = temporalnexus.StartUntypedWorkflow[workflows.DeliveryResult](ctx, nc, opts, workflows.WorkflowType, din)
		return err
	})
	switch {
	case err != nil:
		return nexusResult{}, failed(typedFailure(err))
	case prev == nil:
		return r, nil
	case !prev.Status.Delivered():
		return nexusResult{}, failed(notDelivered(*prev))
	}
	return temporalnexus.NewSyncResult(*prev), nil
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
