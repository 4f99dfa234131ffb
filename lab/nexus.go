package lab

import (
	"context"
	"errors"
	"fmt"

	"github.com/abde64c9/courier/workflows"
	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
)

// NexusTenant is the tenant the lab's Nexus endpoint serves, and
// CallerNamespace the namespace its example callers run in.
const (
	NexusTenant     = "acme"
	CallerNamespace = "orders"
)

// NexusEndpoint is the name the lab gives the tenant's endpoint.
func NexusEndpoint(tenant string) string { return "courier-" + tenant }

// EnsureNexusEndpoint makes the tenant's endpoint (NexusEndpoint)
// route to its task queue in Courier's namespace ns, creating it or
// correcting its target, and returns its name.
func EnsureNexusEndpoint(ctx context.Context, c client.Client, ns, tenant string) (string, error) {
	name := NexusEndpoint(tenant)
	return name, EnsureEndpoint(ctx, c, name, ns, workflows.NexusTaskQueue(tenant))
}

// EnsureEndpoint makes the Nexus endpoint name route to taskQueue in
// namespace ns, creating it or correcting its target.
func EnsureEndpoint(ctx context.Context, c client.Client, name, ns, taskQueue string) error {
	spec := &nexuspb.EndpointSpec{
		Name: name,
		Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{Worker: &nexuspb.EndpointTarget_Worker{
			Namespace: ns, TaskQueue: taskQueue,
		}}},
	}
	ops := c.OperatorService()
	list, err := ops.ListNexusEndpoints(ctx, &operatorservice.ListNexusEndpointsRequest{Name: name, PageSize: 1})
	if err != nil {
		return fmt.Errorf("nexus endpoint %s: %w", name, err)
	}
	for _, e := range list.GetEndpoints() {
		w := e.GetSpec().GetTarget().GetWorker()
		if w.GetNamespace() == ns && w.GetTaskQueue() == taskQueue {
			return nil
		}
		_, err := ops.UpdateNexusEndpoint(ctx, &operatorservice.UpdateNexusEndpointRequest{Id: e.GetId(), Version: e.GetVersion(), Spec: spec})
		if err != nil {
			return fmt.Errorf("nexus endpoint %s: %w", name, err)
		}
		return nil
	}
	if _, err := ops.CreateNexusEndpoint(ctx, &operatorservice.CreateNexusEndpointRequest{Spec: spec}); err != nil {
		return fmt.Errorf("nexus endpoint %s: %w", name, err)
	}
	return nil
}

// EnsureCallerNamespace registers namespace ns for callers (no Courier
// search attributes: nothing of Courier runs there) and waits until it
// answers.
func EnsureCallerNamespace(ctx context.Context, c client.Client, ns string) error {
	ws := c.WorkflowService()
	_, err := ws.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(namespaceRetention),
		Description: "callers of Courier through its Nexus endpoint",
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return retry(ctx, func() error {
		_, err := ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
		return err
	}, "namespace "+ns)
}
