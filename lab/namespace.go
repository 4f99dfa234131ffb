package lab

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/abde64c9/courier/workflows"
)

// namespaceRetention is how long a lab namespace keeps finished deliveries.
const namespaceRetention = 3 * 24 * time.Hour

// EnsureNamespace creates namespace ns on c's server if it is missing and
// gives it Courier's search attributes, so each lab run can have a
// namespace of its own on a shared server. It is a no-op on a namespace
// that has them. A server answers for a new namespace only after its
// namespace cache refreshes, so each step is retried for a bounded time.
func EnsureNamespace(ctx context.Context, c client.Client, ns string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ws, ops := c.WorkflowService(), c.OperatorService()
	_, err := ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	var missing *serviceerror.NamespaceNotFound
	if errors.As(err, &missing) {
		_, err = ws.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(namespaceRetention),
			Description: "a Courier lab run's namespace",
		})
		var exists *serviceerror.NamespaceAlreadyExists
		if errors.As(err, &exists) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	attrs := map[string]enumspb.IndexedValueType{}
	for _, name := range workflows.SearchAttributeNames {
		attrs[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	return retry(ctx, func() error {
		have, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
		if err != nil {
			return err
		}
		add := map[string]enumspb.IndexedValueType{}
		for name, t := range attrs {
			if _, ok := have.GetCustomAttributes()[name]; !ok {
				add[name] = t
			}
		}
		if len(add) == 0 {
			// Listed is not yet known to the frontend that validates a
			// start: a query on them answers once it is.
			_, err := ws.CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{
				Namespace: ns, Query: workflows.SADestination.GetName() + ` = "x" AND ` + workflows.SAState.GetName() + ` = "x"`,
			})
			return err
		}
		_, err = ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: add})
		if err == nil {
			return errors.New("search attributes added; checking they are listed")
		}
		return err
	}, fmt.Sprintf("namespace %s: Courier's search attributes", ns))
}

// retry calls f every half second until it succeeds or ctx is done.
func retry(ctx context.Context, f func() error, what string) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (gave up: %v)", what, err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
