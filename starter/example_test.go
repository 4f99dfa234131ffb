package starter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// These examples run in `go test` against a real dev server with a Courier
// worker and the sandbox destinations (see main_test.go), found through
// TEMPORAL_ADDRESS like any service would find its Temporal.

// connectStarter connects the way Example does, for the other examples.
func connectStarter(ctx context.Context) (*starter.Client, func()) {
	c, err := connect.Dial(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		log.Fatal(err)
	}
	return starter.New(c), c.Close
}

// Deliver a ticket to the helpdesk, then ask for it again (a retry, a
// second instance of the service): the second call sends nothing and gets
// the first receipt.
func Example() {
	ctx := context.Background()
	// Temporal's standard client environment (TEMPORAL_ADDRESS,
	// TEMPORAL_NAMESPACE, TLS and API key) and Courier's payload codec keys,
	// if any. Logs go to stderr.
	c, err := connect.Dial(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s := starter.New(c)

	in := workflows.DeliveryInput{
		Operation: opkey.Operation{
			Tenant: "acme", Destination: "helpdesk", Operation: "create-ticket", BusinessID: "example-001",
		},
		Payload: json.RawMessage(`{"request_id": "example-001", "subject": "Move the workshop booking"}`),
	}
	first, err := s.Deliver(ctx, in)
	if err != nil {
		log.Fatal(err)
	}
	again, err := s.Deliver(ctx, in)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.Status, again.Status)
	fmt.Println("same receipt:", first.Receipt.ResourceID == again.Receipt.ResourceID)
	fmt.Println("key:", first.Key == opkey.Key(in.Operation))
	// Output:
	// created duplicate
	// same receipt: true
	// key: true
}

// The same operation with another payload is a conflict: the first payload
// was (or is being) delivered, and nothing is sent for the second.
func ExampleConflictError() {
	ctx := context.Background()
	s, closeClient := connectStarter(ctx) // connect as in Example
	defer closeClient()

	op := opkey.Operation{Tenant: "acme", Destination: "helpdesk", Operation: "create-ticket", BusinessID: "example-002"}
	if _, err := s.Deliver(ctx, workflows.DeliveryInput{
		Operation: op, Payload: json.RawMessage(`{"request_id": "example-002", "subject": "Order lunch"}`),
	}); err != nil {
		log.Fatal(err)
	}
	_, err := s.Deliver(ctx, workflows.DeliveryInput{
		Operation: op, Payload: json.RawMessage(`{"request_id": "example-002", "subject": "Order dinner"}`),
	})
	var conflict *starter.ConflictError
	if errors.As(err, &conflict) {
		fmt.Println("conflict for", conflict.Key == opkey.Key(op), "- nothing was sent")
	}
	// Output:
	// conflict for true - nothing was sent
}

// Start a delivery without waiting for it, e.g. from a request handler,
// and wait for it elsewhere by its key.
func ExampleClient_Start() {
	ctx := context.Background()
	s, closeClient := connectStarter(ctx) // connect as in Example
	defer closeClient()

	in := workflows.DeliveryInput{
		Operation: opkey.Operation{Tenant: "acme", Destination: "ledger", Operation: "book-payment", BusinessID: "example-003"},
		Payload:   json.RawMessage(`{"amount_cents": 12500, "currency": "EUR"}`),
	}
	h, err := s.Start(ctx, in)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("workflow ID is delivery-<key>:", h.WorkflowID == "delivery-"+h.Key)
	// Starting it again joins the same delivery.
	again, err := s.Start(ctx, in)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("joined:", again.Joined, again.RunID == h.RunID)

	st, err := s.Wait(ctx, h.Key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Status, st.Operation.BusinessID)
	// Output:
	// workflow ID is delivery-<key>: true
	// joined: true true
	// created example-003
}

// The "lossy" sandbox destination has no deduplication and loses the
// response after creating the ticket: the outcome is unknown, so the
// delivery stops for a person instead of sending again. The operator
// finds the ticket at the destination and records it.
func ExampleClient_Review() {
	ctx := context.Background()
	s, closeClient := connectStarter(ctx) // connect as in Example
	defer closeClient()

	st, err := s.Deliver(ctx, workflows.DeliveryInput{
		Operation: opkey.Operation{Tenant: "acme", Destination: "lossy", Operation: "create-ticket", BusinessID: "example-004"},
		Payload:   json.RawMessage(`{"request_id": "example-004", "subject": "Call back the customer"}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.State)
	fmt.Println(st.Review.Evidence)

	// A malformed decision is refused before anything is sent.
	_, err = s.Review(ctx, st.Key, workflows.ReviewDecision{Decision: "delivered", Reviewer: "alice"})
	fmt.Println(err)

	rec, err := s.Review(ctx, st.Key, workflows.ReviewDecision{
		Decision: workflows.DecisionDelivered, Reviewer: "alice",
		Note: "found it in the helpdesk", ResourceID: "ticket-1",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("accepted:", rec.Accepted)
	final, err := s.Wait(ctx, st.Key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(final.Status, final.Receipt.ResourceID)
	// Output:
	// awaiting_review
	// attempt 1: unknown_outcome (connection closed after the request was written: EOF); destination "lossy" (dedup none) cannot deduplicate a retry
	// invalid request: resource_id: required with decision delivered (the id of the effect you found)
	// accepted: true
	// delivered_by_review ticket-1
}

// An operator's view: what is waiting, and why. Visibility lags the
// deliveries by a moment, so a delivery that parked a second ago may not
// be listed yet. (No output is checked: it depends on the server.)
func ExampleClient_ListAwaitingReview() {
	ctx := context.Background()
	s, closeClient := connectStarter(ctx) // connect as in Example
	defer closeClient()

	waiting, err := s.ListAwaitingReview(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range waiting {
		st, err := s.Status(ctx, d.Key)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %s → %s (%s) since %s: %s\n",
			d.Key, d.Operation, d.Destination, d.BusinessID, st.Review.Requested.Format("15:04"), st.Review.Evidence)
	}
}

// After an outage, decide every delivery parked at one destination with one
// Temporal batch job, and count from each delivery how it took the
// decision. NewWithOptions gives the job the client's namespace and payload
// codec.
func ExampleClient_ReviewBulk() {
	ctx := context.Background()
	opts, err := connect.ClientOptions(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		log.Fatal(err)
	}
	c, err := connect.DialWith(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s := starter.NewWithOptions(c, opts)

	for _, id := range []string{"example-bulk-1", "example-bulk-2", "example-bulk-3"} {
		if _, err := s.Deliver(ctx, workflows.DeliveryInput{
			Operation: opkey.Operation{Tenant: "acme", Destination: "lossy", Operation: "bulk-ticket", BusinessID: id},
			Payload:   json.RawMessage(`{"request_id": "` + id + `", "subject": "Call back the customer"}`),
		}); err != nil {
			log.Fatal(err)
		}
	}
	filter := starter.BulkFilter{Destination: "lossy", Operation: "bulk-ticket"}
	var p starter.BulkPreview
	for p.Matched < 3 { // visibility lags the deliveries by a moment
		if p, err = s.PreviewBulk(ctx, filter, 1); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(p.Matched, "awaiting review, e.g.", p.Sample[0].Evidence)

	rep, err := s.ReviewBulk(ctx, p, starter.BulkDecision{
		Decision: workflows.DecisionAbandon, Reviewer: "alice", Note: "the customer cancelled"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Via, "sent", rep.Sent)
	fmt.Println("accepted", rep.Accepted, "ignored", rep.Ignored)
	// Output:
	// 3 awaiting review, e.g. attempt 1: unknown_outcome (connection closed after the request was written: EOF); destination "lossy" (dedup none) cannot deduplicate a retry
	// batch signal sent 3
	// accepted 3 ignored 0
}
