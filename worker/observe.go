package worker

import (
	"errors"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/workflows"
)

// Interceptor observes Delivery workflows from the outside: it puts the
// delivery's key, destination and current attempt on every workflow-side
// log line, logs what an operator needs (lost attempts, parking for review,
// the final status) and counts Courier's metrics through the workflow's
// metrics handler. Both the logger and the handler skip replay, so a worker
// that rebuilds a workflow from history neither logs nor counts it twice.
// It issues no commands, so it never affects determinism.
func Interceptor() interceptor.WorkerInterceptor { return &observer{} }

type observer struct {
	interceptor.WorkerInterceptorBase
}

func (*observer) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	if workflow.GetInfo(ctx).WorkflowType.Name != workflows.WorkflowType {
		return next
	}
	return &observedInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

// observedDelivery is what the observer knows of one delivery.
type observedDelivery struct {
	key, destination string
	attempt          int
}

func (d *observedDelivery) fields() []any {
	return []any{"key", d.key, "destination", d.destination, "attempt", d.attempt}
}

type observedInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	d observedDelivery
}

func (i *observedInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&observedOutbound{
		WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound},
		d:                               &i.d,
	})
}

func (i *observedInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	if len(in.Args) == 1 {
		if di, ok := in.Args[0].(workflows.DeliveryInput); ok {
			i.d.key, i.d.destination = workflows.Key(di.Operation), di.Destination
		}
	}
	res, err := i.Next.ExecuteWorkflow(ctx, in)
	logger := workflow.GetLogger(ctx)
	if err != nil {
		logger.Error("delivery failed", "error", err)
		return res, err
	}
	if r, ok := res.(workflows.DeliveryResult); ok {
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{
			"destination": i.d.destination, "status": string(r.Status),
		}).Counter(MetricDeliveries).Inc(1)
		kv := []any{"status", r.Status, "attempts", len(r.Attempts)}
		if r.Receipt != nil {
			kv = append(kv, "resource_id", r.Receipt.ResourceID)
		}
		if r.Error != "" {
			kv = append(kv, "cause", r.Error)
		}
		logger.Info("delivery finished", kv...)
	}
	return res, err
}

type observedOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	d *observedDelivery
}

func (o *observedOutbound) GetLogger(ctx workflow.Context) log.Logger {
	if o.d.key == "" {
		return o.Next.GetLogger(ctx)
	}
	return log.With(o.Next.GetLogger(ctx), o.d.fields()...)
}

func (o *observedOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	f := o.Next.ExecuteActivity(ctx, activityType, args...)
	if activityType != workflows.ActivityAttempt || len(args) != 1 {
		return f
	}
	req, ok := args[0].(activities.Request)
	if !ok {
		return f
	}
	o.d.attempt = req.Attempt
	// A coroutine of its own reads the result, so the workflow's future is
	// handed back untouched (a wrapper would break selectors).
	workflow.Go(ctx, func(ctx workflow.Context) {
		var out activities.Outcome
		err := f.Get(ctx, &out)
		class := attemptClass(out, err)
		cause := out.Error
		if err != nil {
			cause = err.Error()
		}
		h := o.Next.GetMetricsHandler(ctx).WithTags(map[string]string{"destination": req.Destination})
		h.WithTags(map[string]string{"class": string(class)}).Counter(MetricAttempts).Inc(1)
		logger := workflow.GetLogger(ctx)
		switch class {
		case contract.ClassUnknown, contract.ClassServerError:
			h.Counter(MetricUnknownOutcomes).Inc(1)
			logger.Warn("attempt outcome unknown", "class", class, "error", cause)
		default:
			logger.Debug("attempt classified", "class", class)
		}
	})
	return f
}

// attemptClass is the class the workflow records for an attempt, including
// an attempt whose activity failed (see workflows' attempt).
func attemptClass(out activities.Outcome, err error) contract.Class {
	var appErr *temporal.ApplicationError
	switch {
	case err == nil:
		return out.Class
	case errors.As(err, &appErr) && appErr.Type() == activities.ErrUnknownDestination:
		return contract.ClassUnconfigured
	}
	return contract.ClassUnknown
}

func (o *observedOutbound) UpsertTypedSearchAttributes(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) error {
	err := o.Next.UpsertTypedSearchAttributes(ctx, updates...)
	if err == nil {
		if st, ok := temporal.NewSearchAttributes(updates...).GetKeyword(workflows.SAState); ok && st == string(workflows.StateAwaitingReview) {
			workflow.GetLogger(ctx).Warn("delivery awaiting review: a person must decide (courier review)")
		}
	}
	return err
}
