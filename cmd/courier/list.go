package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/abde64c9/courier/starter"
)

func runList(ctx context.Context, args []string) error {
	fs := newFlagSet("list", "[--state STATE] [--destination D] [flags]",
		"Lists deliveries, newest first, from Temporal's visibility store by their search\n"+
			"attributes (CourierState, CourierDestination): the same list as the web UI with the\n"+
			"query printed on stderr. Visibility lags a moment behind the deliveries.\n\n"+
			"States: "+strings.Join(starter.ListStates, ", ")+".\n"+
			"A delivery waiting to retry or looking up its effect shows as delivering.")
	var o starter.ListOptions
	fs.StringVar(&o.State, "state", "", "only deliveries in this `state`, e.g. awaiting_review")
	fs.StringVar(&o.Destination, "destination", "", "only deliveries to this destination `name`")
	fs.IntVar(&o.Limit, "limit", 100, "at most `n` deliveries (0: all)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	destinations := fs.String("destinations", "", "destinations `file`: check --destination is in it")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("unexpected argument %q: list takes flags only (see -h)", pos[0])
	}
	if o.State != "" && !slices.Contains(starter.ListStates, o.State) {
		return usageError("--state %q unknown; use one of %s", o.State, strings.Join(starter.ListStates, ", "))
	}
	if o.Limit < 0 {
		return usageError("--limit must not be negative")
	}
	if o.Destination != "" {
		if _, err := checkDestination(*destinations, o.Destination); err != nil {
			return err
		}
	}

	s, closeClient, err := newStarter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	ds, err := s.List(ctx, o)
	if err != nil {
		return startError(err)
	}
	noun := "deliveries"
	if len(ds) == 1 {
		noun = "delivery"
	}
	fmt.Fprintf(os.Stderr, "%d %s where %s\n", len(ds), noun, o.Query())
	if *asJSON {
		if ds == nil {
			ds = []starter.Delivery{}
		}
		return printJSON(os.Stdout, ds)
	}
	if len(ds) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSTATE\tDESTINATION\tOPERATION\tBUSINESS ID\tSTARTED")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Key, d.State, d.Destination, d.Operation, d.BusinessID,
			d.Started.Local().Format(time.DateTime))
	}
	return tw.Flush()
}
