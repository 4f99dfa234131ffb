package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

func workerCommand() *cobra.Command {
	var o worker.ProcessOptions
	var destinationsFile string
	c := &cobra.Command{
		Use:   "worker --destinations FILE [--nexus-tenant TENANT]... [--metrics ADDR] [--log-level LEVEL] [--log-format text|json]",
		Short: "run a worker: deliveries and their activities",
		Long: `Runs Delivery workflows and their attempts. Connects with Temporal's standard
client environment: TEMPORAL_ADDRESS (default localhost:7233),
TEMPORAL_NAMESPACE (default "default"), TEMPORAL_API_KEY, TEMPORAL_TLS_*,
TEMPORAL_PROFILE. Stops gracefully on SIGINT or SIGTERM.`,
		Example:     "  courier worker --destinations config/destinations.dev.json --metrics :9090",
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	c.Flags().StringVar(&destinationsFile, "destinations", "", "destinations `file` (JSON), e.g. config/destinations.dev.json")
	c.Flags().StringSliceVar(&o.NexusTenants, "nexus-tenant", nil, "serve Nexus operations for this `tenant` on task queue "+workflows.NexusTaskQueuePrefix+"<tenant> (repeatable); its endpoint decides the tenant")
	c.Flags().StringVar(&o.MetricsAddr, "metrics", "", "serve Prometheus metrics on `ADDR` (/metrics, and /healthz), e.g. :9090; empty: off")
	cli.Required(c, "destinations")
	_ = c.MarkFlagFilename("destinations", "json")
	logs := cli.AddLogFlags(c, true)
	c.RunE = func(c *cobra.Command, _ []string) (err error) {
		if o.Logger, err = logs.Logger(); err != nil {
			return err
		}
		if o.Config, err = destinations.Load(destinationsFile); err != nil {
			return fmt.Errorf("%w\nfix the destinations file; see the configuration reference in the README", err)
		}
		return worker.Serve(c.Context(), o)
	}
	return c
}
