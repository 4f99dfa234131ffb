package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

func runDeliver(ctx context.Context, args []string) error {
	fs := newFlagSet("deliver", "--destination D --operation O --id ID --payload JSON|@file [flags]",
		"Delivers one business operation exactly once in effect: starts its delivery, or joins the\n"+
			"one already started for the same (tenant, destination, operation, id), and prints the\n"+
			"result as JSON once it finishes or stops for review. Asking again with the same payload\n"+
			"prints the first delivery's receipt as \"duplicate\"; with another payload it is a conflict\n"+
			"and nothing is sent. Temporal is found through TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE.")
	var in workflows.DeliveryInput
	fs.StringVar(&in.Destination, "destination", "", "destination `name`, as in the workers' destinations file (required)")
	fs.StringVar(&in.Operation.Operation, "operation", "", "operation `name`, e.g. create-ticket (required)")
	fs.StringVar(&in.BusinessID, "id", "", "business `id` that makes the operation unique, e.g. an order number (required)")
	fs.StringVar(&in.Tenant, "tenant", "", "`tenant`, part of the key")
	payload := fs.String("payload", "", "the payload: a JSON object, or @`file` holding one (required)")
	noWait := fs.Bool("no-wait", false, "print the delivery's key and workflow ID once started, without waiting for the result")
	destinations := fs.String("destinations", "", "destinations `file`: check the destination is in it before sending")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("unexpected argument %q: deliver takes flags only (see -h)", pos[0])
	}
	if err := requireFlags([2]string{"destination", in.Destination}, [2]string{"operation", in.Operation.Operation},
		[2]string{"id", in.BusinessID}, [2]string{"payload", *payload}); err != nil {
		return err
	}
	if in.Payload, err = readPayload(*payload); err != nil {
		return err
	}
	if err := in.Operation.Validate(); err != nil {
		return usageError("%w", err)
	}
	if _, err := checkDestination(*destinations, in.Destination); err != nil {
		return err
	}

	s, closeClient, err := connect(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	if *noWait {
		h, err := s.Start(ctx, in)
		if err != nil {
			return startError(err)
		}
		return printJSON(os.Stdout, h)
	}
	st, err := s.Deliver(ctx, in)
	var conflict *starter.ConflictError
	if errors.As(err, &conflict) {
		// Nothing ran for this request; say so in the same shape as a result.
		st = workflows.DeliveryStatus{
			State: workflows.State(workflows.StatusConflict), Operation: in.Operation,
			DeliveryResult: workflows.DeliveryResult{
				Key: conflict.Key, Fingerprint: conflict.RequestFingerprint, Status: workflows.StatusConflict,
				Attempts: []workflows.Attempt{}, Events: []workflows.Event{}, Error: conflict.Error(),
			},
		}
		if perr := printJSON(os.Stdout, st); perr != nil {
			return perr
		}
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("stopped waiting; the delivery goes on in Temporal: follow it with `courier status %s`",
			opkey.Key(in.Operation))
	}
	if err != nil {
		return startError(err)
	}
	if err := printJSON(os.Stdout, st); err != nil {
		return err
	}
	return outcome(st)
}
