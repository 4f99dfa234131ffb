package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

func reviewCommand() *cobra.Command {
	var d workflows.ReviewDecision
	var wait bool
	c := &cobra.Command{
		Use:   "review KEY --decision retry|delivered|abandon --reviewer NAME --note TEXT [--resource-id ID]",
		Short: "decide a delivery awaiting review: retry, delivered or abandon",
		Long: `Decides a delivery awaiting review, through the workflow's validated update: a decision
the workflow cannot act on (malformed, not an allowed reviewer, a delivery not awaiting
review) is refused with the reason and changes nothing.

  delivered  you found the effect at the destination: give its --resource-id
  retry      you checked it is not there: Courier sends again, with a fresh retry budget
  abandon    give up: the delivery ends as abandoned

Prints the recorded decision as JSON (with --wait, the delivery's status once it moves on).`,
		Example: `  courier review KEY --decision delivered --resource-id ticket-1 --reviewer alice --note "found it in the helpdesk"
  courier review KEY --decision retry --reviewer alice --note "not in the helpdesk" --wait`,
		Args: keyArg,
		Annotations: exits(codeOK, codeError, codeUsage, codeRejected, codeAwaiting, codeNotDelivered,
			codeUnknownKey, codeRefused),
	}
	f := c.Flags()
	f.StringVar(&d.Decision, "decision", "", "retry, delivered or abandon")
	f.StringVar(&d.Reviewer, "reviewer", "", "who is deciding, `name` (checked against the workers' reviewers list)")
	f.StringVar(&d.Note, "note", "", "why: what you checked, for the audit trail")
	required(c, "decision", "reviewer", "note")
	choices(c, "decision", workflows.DecisionRetry, workflows.DecisionDelivered, workflows.DecisionAbandon)
	f.StringVar(&d.ResourceID, "resource-id", "", "the `id` of the effect you found (required with --decision delivered)")
	f.BoolVar(&wait, "wait", false, "wait for the delivery to finish or stop again, print its status, exit as deliver does")
	c.RunE = func(c *cobra.Command, args []string) error {
		key, _ := starter.ParseKey(args[0]) // keyArg checked it
		if err := d.Validate(); err != nil {
			return usageError("invalid decision: %w", err)
		}
		ctx := c.Context()
		return withStarter(ctx, func(s *starter.Client) error { return review(ctx, s, key, d, wait) })
	}
	return c
}

// review records decision d on the delivery key and prints it or, with
// wait, the delivery's status once it moves on.
func review(ctx context.Context, s *starter.Client, key string, d workflows.ReviewDecision, wait bool) error {
	rec, err := s.Review(ctx, key, d)
	if err != nil {
		return startError(err)
	}
	if !wait {
		fmt.Fprintf(os.Stderr, "decision %s accepted; follow the delivery with: courier status %s\n", rec.Decision, key)
		return printJSON(os.Stdout, rec)
	}
	st, err := s.Wait(ctx, key)
	if err != nil {
		return startError(err)
	}
	if err := printJSON(os.Stdout, st); err != nil {
		return err
	}
	return outcome(st)
}
