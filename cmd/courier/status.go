package main

import (
	"context"
	"os"

	"github.com/abde64c9/courier/starter"
)

func runStatus(ctx context.Context, args []string) error {
	fs := newFlagSet("status", "KEY",
		"Prints a delivery's status as JSON: its state, every attempt, the story of events, the\n"+
			"evidence of a review and the receipt. KEY is the key `courier deliver` printed, or the\n"+
			"workflow ID delivery-KEY. The exit status is 0 whatever the delivery's state.")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	key, err := oneKey("status", pos)
	if err != nil {
		return err
	}
	s, closeClient, err := newStarter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	st, err := s.Status(ctx, key)
	if err != nil {
		return startError(err)
	}
	return printJSON(os.Stdout, st)
}

// oneKey takes the single KEY argument of status and review.
func oneKey(cmd string, pos []string) (string, error) {
	switch len(pos) {
	case 0:
		return "", usageError("missing KEY: courier %s KEY (the key `courier deliver` printed, or its workflow ID)", cmd)
	case 1:
	default:
		return "", usageError("one KEY expected, got %d arguments: %q", len(pos), pos)
	}
	key, err := starter.ParseKey(pos[0])
	if err != nil {
		return "", usageError("%w", err)
	}
	return key, nil
}
