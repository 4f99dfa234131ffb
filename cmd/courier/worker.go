package main

import (
	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

func workerCommand() *cobra.Command {
	var o worker.ProcessOptions
	var destinationsFlag string
	c := &cobra.Command{
		Use:   "worker --destinations FILE [--nexus-tenant TENANT]... [--metrics ADDR] [--log-level LEVEL] [--log-format text|json]",
		Short: "run a worker: deliveries and their activities",
		Long: `Runs Delivery workflows and their attempts. Connects with Temporal's standard
client environment: TEMPORAL_ADDRESS (default localhost:7233),
TEMPORAL_NAMESPACE (default "default"), TEMPORAL_API_KEY, TEMPORAL_TLS_*,
TEMPORAL_PROFILE. The destinations file is --destinations, else $COURIER_DESTINATIONS
(which courier destination status reads too). The outcome ledger is --ledger,
else $COURIER_LEDGER: without one, a repeat of an operation is recognised only
while the namespace keeps its run. Stops gracefully on SIGINT or SIGTERM.`,
		Example: "  courier worker --destinations lab/config/destinations.dev.json --metrics :9090\n" +
			"  export COURIER_DESTINATIONS=lab/config/destinations.dev.json; courier worker",
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	c.Flags().StringVar(&destinationsFlag, "destinations", "", "destinations `file` (JSON), e.g. lab/config/destinations.dev.json (required, unless $"+envDestinations+" names it)")
	c.Flags().StringSliceVar(&o.NexusTenants, "nexus-tenant", nil, "serve Nexus operations for this `tenant` on task queue "+workflows.NexusTaskQueuePrefix+"<tenant> (repeatable); its endpoint decides the tenant")
	c.Flags().StringVar(&o.MetricsAddr, "metrics", "", "serve Prometheus metrics on `ADDR` (/metrics, and /healthz), e.g. :9090; empty: off")
	var ledgerFlag string
	c.Flags().StringVar(&ledgerFlag, "ledger", "", "the outcome ledger's `URL`: sqlite:PATH (workers on one host) or postgres://... (several); default $"+envLedger+"; empty: none")
	c.Flags().DurationVar(&o.LedgerRetention, "ledger-retention", 0, "how long the ledger keeps an outcome (`DURATION`, e.g. 8760h); default $"+envLedgerRetention+"; 0: for ever")
	_ = c.MarkFlagFilename("destinations", "json")
	logs := cli.AddLogFlags(c, true)
	c.RunE = func(c *cobra.Command, _ []string) (err error) {
		if o.Logger, err = logs.Logger(); err != nil {
			return err
		}
		file, from := destinationsFile(destinationsFlag)
		if file == "" {
			return cli.UsageError("--destinations is required, or %s: the destinations file (JSON) this worker serves (see %s -h)\n"+
				"for example:\n%s", envDestinations, c.CommandPath(), c.Example)
		}
		if o.Config, err = loadDestinations(file, from); err != nil {
			return err
		}
		if o.LedgerRetention, err = ledgerRetention(o.LedgerRetention); err != nil {
			return err
		}
		o.Ledger = ledgerURL(ledgerFlag)
		return worker.Serve(c.Context(), o)
	}
	return c
}
