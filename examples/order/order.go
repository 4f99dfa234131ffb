// Command order is an example caller of Courier: an order workflow that
// creates the order's ticket at a destination exactly once, from workflow
// code. Workflow Order runs in Courier's namespace and delivers through a
// child workflow (courierwf.Deliver); OrderViaNexus runs in any namespace
// and delivers through a tenant's Nexus endpoint (courierwf.NexusDeliver),
// which is all it needs access to.
//
//	go run ./examples/order worker                   # the caller's worker (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE)
//	go run ./examples/order place --id A-1           # one order, in Courier's namespace
//	go run ./examples/order place --id A-2 --endpoint courier-acme   # through Nexus, from another namespace
package main

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/courierwf"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// TaskQueue is where the order workflows run.
const TaskQueue = "orders"

// Order is one order to place.
type Order struct {
	ID      string `json:"id"`
	Subject string `json:"subject"`
	// Destination receives the order's ticket; Courier's dev stack has
	// helpdesk (deduplicates by key) and legacy (cannot: an unknown outcome
	// parks for a review).
	Destination string `json:"destination"`
	// Tenant is the order's tenant in Courier's namespace; through Nexus
	// the endpoint decides it instead.
	Tenant string `json:"tenant,omitempty"`
	// Endpoint is the Nexus endpoint for OrderViaNexus.
	Endpoint string `json:"endpoint,omitempty"`
}

// Placed is an order's outcome.
type Placed struct {
	OrderID  string                   `json:"order_id"`
	Delivery workflows.DeliveryResult `json:"delivery"`
}

// operation is the business operation of the order's ticket: one per
// order, so a retried or replayed order asks for the same one.
const operation = "create-order-ticket"

// ticket is the ticket's payload.
type ticket struct {
	RequestID string `json:"request_id"`
	Subject   string `json:"subject"`
}

func payload(o Order) (json.RawMessage, error) {
	// A struct's fields encode in one order: deterministic, though the
	// check cannot tell (encoding/json caches by reflection).
	//workflowcheck:ignore
	return json.Marshal(ticket{RequestID: o.ID, Subject: o.Subject})
}

// OrderWorkflow places o and creates its ticket through a child delivery.
func OrderWorkflow(ctx workflow.Context, o Order) (Placed, error) {
	p, err := payload(o)
	if err != nil {
		return Placed{}, err
	}
	res, err := courierwf.Deliver(ctx, workflows.DeliveryInput{
		Operation: opkey.Operation{Tenant: o.Tenant, Destination: o.Destination, Operation: operation, BusinessID: o.ID},
		Payload:   p,
	})
	if err != nil {
		return Placed{OrderID: o.ID, Delivery: res}, fmt.Errorf("order %s: ticket: %w", o.ID, err)
	}
	return Placed{OrderID: o.ID, Delivery: res}, nil
}

// OrderViaNexus places o and creates its ticket through the Nexus endpoint
// o.Endpoint, which fixes the tenant.
func OrderViaNexus(ctx workflow.Context, o Order) (Placed, error) {
	p, err := payload(o)
	if err != nil {
		return Placed{}, err
	}
	res, err := courierwf.NexusDeliver(ctx, o.Endpoint, courierwf.NexusInput{
		Destination: o.Destination, Operation: operation, BusinessID: o.ID, Payload: p,
	}, workflow.NexusOperationOptions{
		// A parked delivery waits for a person: give up after a week, and
		// stop waiting (the delivery goes on) when the order is canceled.
		ScheduleToCloseTimeout: 7 * 24 * time.Hour,
		CancellationType:       workflow.NexusOperationCancellationTypeAbandon,
	})
	if err != nil {
		return Placed{OrderID: o.ID, Delivery: res}, fmt.Errorf("order %s: ticket: %w", o.ID, err)
	}
	return Placed{OrderID: o.ID, Delivery: res}, nil
}
