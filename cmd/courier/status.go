package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/starter"
)

func statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status KEY",
		Short: "print a delivery's status",
		Long: `Prints a delivery's status as JSON: its state, every attempt, the story of events, the
evidence of a review and the receipt. KEY is the key ` + "`courier deliver`" + ` printed, or the
workflow ID delivery-KEY. A run the server terminated shows as terminated, with the run and
when, not as the state it was stopped in. The exit status is 0 whatever the delivery's state.`,
		Example:     "  courier status 3f0c9a4e-1b2d-5c6e-8f70-9a1b2c3d4e5f",
		Args:        keyArg,
		Annotations: cli.Exits(cli.CodeOK, cli.CodeError, cli.CodeUsage, cli.CodeUnknownKey),
		RunE: func(c *cobra.Command, args []string) error {
			key, _ := starter.ParseKey(args[0]) // keyArg checked it
			ctx := c.Context()
			return withStarter(ctx, func(s *starter.Client) error {
				st, err := s.Status(ctx, key)
				if err != nil {
					return startError(err)
				}
				if h := st.Hold; h != nil {
					fmt.Fprintf(os.Stderr, "%s: %s\n", strings.ReplaceAll(h.State, "_", " "), h.Reason)
				}
				if st.Status.EndedUnfinished() {
					fmt.Fprintln(os.Stderr, stopped(st))
				}
				return cli.PrintJSON(os.Stdout, st)
			})
		},
	}
}

// keyArg takes the one KEY argument of status and review: a delivery key
// or its workflow ID.
func keyArg(c *cobra.Command, args []string) error {
	if err := cli.OneArg("KEY", "the key `courier deliver` printed, or its workflow ID")(c, args); err != nil {
		return err
	}
	if _, err := starter.ParseKey(args[0]); err != nil {
		return cli.UsageError("%w", err)
	}
	return nil
}
