package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/activities/probe"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/worker"
)

func probeCommand() *cobra.Command {
	var file, payload string
	var asJSON bool
	c := &cobra.Command{
		Use:   "probe DESTINATION --destinations FILE [--payload JSON|@file] [--json]",
		Short: "check that a destination honours its declared contract",
		Long: "Checks that a destination does what its contract in the destinations file declares,\n" +
			"through the adapter a worker would use (no Temporal needed). It sends a probe operation\n" +
			"(operation " + probe.Operation + ", a business id unique to the run, a payload saying it is a\n" +
			"probe) and, by dedup kind:\n\n" +
			"  key, unique-commit  sends it twice with the same key: the second must replay the first\n" +
			"                      receipt; two effects is a contract violation (the key is ignored)\n" +
			"  lookup              looks the fresh key up (not found), sends once, looks up again until\n" +
			"                      found, measuring how long the effect takes to appear: longer than the\n" +
			"                      declared settle is a contract violation\n" +
			"  none                sends once (a second send would be a second effect)\n\n" +
			"The effects it creates are listed so you can delete them.",
		Example:     "  courier probe ignoring --destinations lab/config/destinations.dev.json",
		Args:        cli.OneArg("DESTINATION", "a destination of the destinations file"),
		Annotations: cli.Exits(cli.CodeOK, cli.CodeError, cli.CodeUsage, cli.CodeRejected, cli.CodeViolation),
	}
	c.Flags().StringVar(&file, "destinations", "", "destinations `file` the workers use")
	cli.Required(c, "destinations")
	_ = c.MarkFlagFilename("destinations", "json")
	c.Flags().StringVar(&payload, "payload", "", "probe payload, a JSON object or @`file`, for destinations that validate theirs;\n"+
		"{key} and {business_id} in its strings become the probe's, for a lookup that matches a field the caller sets\n"+
		"(default: {\"request_id\": <probe id>, \"subject\": \"Courier probe ...\", \"courier_probe\": true})")
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	c.RunE = func(c *cobra.Command, args []string) error {
		return runProbe(c.Context(), args[0], file, payload, asJSON)
	}
	return c
}

// runProbe probes destination name of the destinations file and prints
// the report.
func runProbe(ctx context.Context, name, file, payload string, asJSON bool) (err error) {
	var o probe.Options
	if payload != "" {
		if o.Payload, err = readPayload(payload); err != nil {
			return err
		}
	}
	cfg, err := checkDestination(file, name)
	if err != nil {
		return err
	}
	d := cfg.Destinations[name]
	// Only this destination's adapter: another's missing secret is not
	// this probe's business.
	ads, err := worker.OpenAdapters(destinations.Config{Destinations: map[string]destinations.Destination{name: d}}, nil)
	if err != nil {
		return err
	}
	defer ads.Close()

	r, err := probe.Run(ctx, name, d, ads.ByName[name], o)
	if err != nil {
		return cli.UsageError("%w", err)
	}
	if asJSON {
		err = cli.PrintJSON(os.Stdout, r)
	} else {
		err = printProbe(os.Stdout, r)
	}
	if err != nil {
		return err
	}
	switch r.Verdict {
	case probe.Passed:
		return nil
	case probe.Violation:
		return &cli.ExitError{Code: cli.CodeViolation, Err: fmt.Errorf("destination %q breaks its contract (dedup %s)", name, d.Contract.Dedup)}
	case probe.Rejected:
		return &cli.ExitError{Code: cli.CodeRejected, Err: fmt.Errorf("destination %q refused the probe payload", name)}
	}
	return &cli.ExitError{Code: cli.CodeError, Err: fmt.Errorf("probe of %q inconclusive", name)}
}

func printProbe(w io.Writer, r probe.Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "destination  %s (dedup %s)\n", r.Destination, r.Dedup)
	fmt.Fprintf(&b, "probe        operation %s, business id %s, key %s\n", r.Operation, r.BusinessID, r.Key)
	fmt.Fprintf(&b, "checked      %s\n", r.Checked)
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "  %-32s", s.Action)
		switch {
		case s.Found != nil:
			fmt.Fprintf(&b, " found=%t", *s.Found)
		case s.Class != "":
			fmt.Fprintf(&b, " %s", s.Class)
		}
		if s.StatusCode != 0 {
			fmt.Fprintf(&b, " (HTTP %d)", s.StatusCode)
		}
		if s.ResourceID != "" {
			fmt.Fprintf(&b, " %s", s.ResourceID)
		}
		if s.Error != "" {
			fmt.Fprintf(&b, " %s", s.Error)
		}
		b.WriteString("\n")
		for _, r := range s.Read {
			fmt.Fprintf(&b, "  %-32s read %s %s = %s\n", "", r.Field, r.Pointer, r.Value)
		}
	}
	if r.Settle != "" {
		appeared := "not found"
		if r.Appeared != "" {
			appeared = "appeared to the lookup " + r.Appeared + " after the send was answered"
		}
		fmt.Fprintf(&b, "settle       declared %s; %s\n", r.Settle, appeared)
	}
	fmt.Fprintf(&b, "verdict      %s\n", r.Verdict)
	fmt.Fprintf(&b, "finding      %s\n", r.Finding)
	for _, warn := range r.Warnings {
		fmt.Fprintf(&b, "warning      %s\n", warn)
	}
	if len(r.Effects) > 0 {
		fmt.Fprintf(&b, "effects      %s (probe effects: safe to delete)\n", strings.Join(r.Effects, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
