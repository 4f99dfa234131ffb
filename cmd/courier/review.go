package main

import (
	"context"
	"fmt"
	"os"

	"github.com/abde64c9/courier/workflows"
)

func runReview(ctx context.Context, args []string) error {
	fs := newFlagSet("review", "KEY --decision retry|delivered|abandon --reviewer NAME --note TEXT [--resource-id ID]",
		"Decides a delivery awaiting review, through the workflow's validated update: a decision\n"+
			"the workflow cannot act on (malformed, not an allowed reviewer, a delivery not awaiting\n"+
			"review) is refused with the reason and changes nothing.\n\n"+
			"  delivered  you found the effect at the destination: give its --resource-id\n"+
			"  retry      you checked it is not there: Courier sends again, with a fresh retry budget\n"+
			"  abandon    give up: the delivery ends as abandoned\n\n"+
			"Prints the recorded decision as JSON (with --wait, the delivery's status once it moves on).")
	var d workflows.ReviewDecision
	fs.StringVar(&d.Decision, "decision", "", "retry, delivered or abandon (required)")
	fs.StringVar(&d.Reviewer, "reviewer", "", "who is deciding, `name` (required; checked against the workers' reviewers list)")
	fs.StringVar(&d.Note, "note", "", "why: what you checked, for the audit trail (required)")
	fs.StringVar(&d.ResourceID, "resource-id", "", "the `id` of the effect you found (required with --decision delivered)")
	wait := fs.Bool("wait", false, "wait for the delivery to finish or stop again, print its status, exit as deliver does")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	key, err := oneKey("review", pos)
	if err != nil {
		return err
	}
	if err := requireFlags([2]string{"decision", d.Decision}, [2]string{"reviewer", d.Reviewer},
		[2]string{"note", d.Note}); err != nil {
		return err
	}
	if err := d.Validate(); err != nil {
		return usageError("invalid decision: %w", err)
	}

	s, closeClient, err := newStarter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	rec, err := s.Review(ctx, key, d)
	if err != nil {
		return startError(err)
	}
	if !*wait {
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
