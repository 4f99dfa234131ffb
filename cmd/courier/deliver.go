package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

func deliverCommand() *cobra.Command {
	var in workflows.DeliveryInput
	var payload, destinations string
	var noWait bool
	c := &cobra.Command{
		Use:   "deliver --destination D --operation O --id ID --payload JSON|@file [flags]",
		Short: "start (or join) a delivery and print its result",
		Long: `Delivers one business operation exactly once in effect: starts its delivery, or joins the
one already started for the same (tenant, destination, operation, id), and prints the
result as JSON once it finishes or stops for review. Asking again with the same payload
prints the first delivery's receipt as "duplicate"; with another payload it is a conflict
and nothing is sent. Temporal is found through TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE.`,
		Example: `  courier deliver --destination helpdesk --operation create-ticket --id order-1 --payload '{"subject": "Call back"}'
  courier deliver --destination helpdesk --operation create-ticket --id order-1 --payload @ticket.json --no-wait`,
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.CodeOK, cli.CodeError, cli.CodeUsage, cli.CodeConflict, cli.CodeRejected, cli.CodeAwaiting, cli.CodeNotDelivered, cli.CodeStopped),
	}
	f := c.Flags()
	f.StringVar(&in.Destination, "destination", "", "destination `name`, as in the workers' destinations file")
	f.StringVar(&in.Operation.Operation, "operation", "", "operation `name`, e.g. create-ticket")
	f.StringVar(&in.BusinessID, "id", "", "business `id` that makes the operation unique, e.g. an order number")
	f.StringVar(&payload, "payload", "", "the payload: a JSON object, or @`file` holding one")
	cli.Required(c, "destination", "operation", "id", "payload")
	f.StringVar(&in.Tenant, "tenant", "", "`tenant`, part of the key")
	f.BoolVar(&noWait, "no-wait", false, "print the delivery's key and workflow ID once started, without waiting for the result")
	f.StringVar(&destinations, "destinations", "", "destinations `file`: check the destination is in it before sending")
	_ = c.MarkFlagFilename("destinations", "json")
	c.RunE = func(c *cobra.Command, _ []string) (err error) {
		if in.Payload, err = readPayload(payload); err != nil {
			return err
		}
		if err := in.Operation.Validate(); err != nil {
			return cli.UsageError("%w", err)
		}
		if _, err := checkDestination(destinations, in.Destination); err != nil {
			return err
		}
		ctx := c.Context()
		return withStarter(ctx, func(s *starter.Client) error { return deliver(ctx, s, in, noWait) })
	}
	return c
}

// deliver starts or joins in's delivery and prints its handle (noWait) or
// its result, exiting with the outcome.
func deliver(ctx context.Context, s *starter.Client, in workflows.DeliveryInput, noWait bool) error {
	if noWait {
		h, err := s.Start(ctx, in)
		if err != nil {
			return startError(err)
		}
		return cli.PrintJSON(os.Stdout, h)
	}
	st, err := s.Deliver(ctx, in)
	var conflict *starter.ConflictError
	if errors.As(err, &conflict) {
		// Nothing ran for this request; say so in the same shape as a result.
		res := workflows.DeliveryResult{
			Key: conflict.Key, Fingerprint: conflict.RequestFingerprint, Status: workflows.StatusConflict,
			Attempts: []workflows.Attempt{}, Events: []workflows.Event{}, Error: conflict.Error(),
		}
		st = workflows.DeliveryStatus{State: res.StateOr(""), Operation: in.Operation, DeliveryResult: res}
		if perr := cli.PrintJSON(os.Stdout, st); perr != nil {
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
	if err := cli.PrintJSON(os.Stdout, st); err != nil {
		return err
	}
	return outcome(st)
}
