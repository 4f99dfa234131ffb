package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/internal/text"
	"github.com/abde64c9/courier/starter"
)

func listCommand() *cobra.Command {
	var o starter.ListOptions
	var asJSON bool
	var destinations string
	c := &cobra.Command{
		Use:   "list [--state STATE] [--destination D] [flags]",
		Short: "list deliveries, e.g. those awaiting review",
		Long: "Lists deliveries, newest first, from Temporal's visibility store by their search\n" +
			"attributes (CourierState, CourierDestination): the same list as the web UI with the\n" +
			"query printed on stderr. Visibility lags a moment behind the deliveries.\n\n" +
			"States: " + strings.Join(starter.ListStates, ", ") + ".\n" +
			"A delivery looking up its effect shows as delivering.",
		Example: `  courier list --state awaiting_review
  courier list --destination helpdesk --limit 10 --json`,
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	f := c.Flags()
	f.StringVar(&o.State, "state", "", "only deliveries in this `state`, e.g. awaiting_review")
	f.StringVar(&o.Destination, "destination", "", "only deliveries to this destination `name`")
	f.IntVar(&o.Limit, "limit", 100, "at most `n` deliveries (0: all)")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	f.StringVar(&destinations, "destinations", "", "destinations `file`: check --destination is in it")
	cli.Choices(c, "state", starter.ListStates...)
	_ = c.MarkFlagFilename("destinations", "json")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if o.State != "" && !slices.Contains(starter.ListStates, o.State) {
			return cli.UsageError("--state %q unknown; use one of %s", o.State, strings.Join(starter.ListStates, ", "))
		}
		if o.Limit < 0 {
			return cli.UsageError("--limit must not be negative")
		}
		if o.Destination != "" {
			if _, err := checkDestination(destinations, o.Destination); err != nil {
				return err
			}
		}
		ctx := c.Context()
		return withStarter(ctx, func(s *starter.Client) error { return list(ctx, s, o, asJSON) })
	}
	return c
}

// list prints the deliveries o selects: a table, or JSON.
func list(ctx context.Context, s *starter.Client, o starter.ListOptions, asJSON bool) error {
	ds, err := s.List(ctx, o)
	if err != nil {
		return startError(err)
	}
	noun := "deliveries"
	if len(ds) == 1 {
		noun = "delivery"
	}
	fmt.Fprintf(os.Stderr, "%d %s where %s\n", len(ds), noun, o.Query())
	if asJSON {
		if ds == nil {
			ds = []starter.Delivery{}
		}
		return cli.PrintJSON(os.Stdout, ds)
	}
	if len(ds) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSTATE\tDESTINATION\tOPERATION\tBUSINESS ID\tSTARTED")
	for _, d := range ds {
		state := d.State
		if d.Held != "" {
			state = d.Held // "paused: <reason>"
		}
		// Search attributes any client may set: no terminal escape passes.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", text.Printable(d.Key), text.Printable(state),
			text.Printable(d.Destination), text.Printable(d.Operation), text.Printable(d.BusinessID),
			d.Started.Local().Format(time.DateTime))
	}
	return tw.Flush()
}
