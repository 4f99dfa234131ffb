package main

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/soak"
)

func soakCommand() *cobra.Command {
	var o soak.Options
	var asJSON, quiet bool
	c := &cobra.Command{
		Use:   "soak [--deliveries N] [--seed N] [--json]",
		Short: "chaos soak: kill workers, restart the server, count effects",
		Long: `Chaos soak on this machine, loopback only: N deliveries over all four dedup
kinds with random sandbox faults, two 'courier worker' processes SIGKILLed
and restarted at random moments, and the Temporal dev server stopped and
started again on its SQLite file. Then every delivery's status (Temporal)
is checked against the effects the destinations stored. Exits 1 on any
duplicate, lost delivery or other violation.

With TEMPORAL_ADDRESS set, the soak runs against that server instead, in
TEMPORAL_NAMESPACE (created, with Courier's search attributes, if missing;
give each soak a namespace of its own), and --restart-server names the
command that restarts it mid-run; without one, the server is not restarted.`,
		Example: `  courier-lab soak --deliveries 100 --json --seed 42
  TEMPORAL_ADDRESS=127.0.0.1:7233 TEMPORAL_NAMESPACE=soak-1 courier-lab soak \
    --restart-server 'kill -9 $(cat node1.pid); ./start-node1.sh'`,
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	f := c.Flags()
	f.IntVar(&o.Deliveries, "deliveries", soak.DefaultDeliveries, "deliveries to make")
	f.Int64Var(&o.Seed, "seed", 0, "random seed for the plan and the chaos; 0 picks one (printed)")
	f.BoolVar(&asJSON, "json", false, "print the summary as one JSON object")
	f.Float64Var(&o.Rate, "rate", soak.DefaultRate, "deliveries started per second (sets how long the chaos lasts)")
	f.IntVar(&o.Kills, "kills", soak.DefaultKills, "worker SIGKILLs")
	f.Float64Var(&o.FaultRatio, "faults", soak.DefaultFaultRatio, "sandbox faults injected per delivery")
	f.DurationVar(&o.Timeout, "timeout", soak.DefaultTimeout, "bound on the whole run")
	f.StringVar(&o.Dir, "dir", "", "keep the run's files (SQLite databases, logs) here; default a temporary folder, kept only on failure")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	f.StringVar(&o.Pause, "pause", "", "pause this `destination` for part of the run and resume it (e.g. helpdesk)")
	f.StringVar(&o.RestartServer, "restart-server", "", "on an external server (TEMPORAL_ADDRESS), a shell command run mid-soak to restart it, "+
		"within "+soak.RestartTimeout.String()+"; a server it starts in the background should send its output elsewhere")
	_ = c.MarkFlagDirname("dir")
	c.RunE = func(c *cobra.Command, _ []string) error {
		ctx := c.Context()
		if o.Seed == 0 {
			o.Seed = time.Now().UnixNano() % 1_000_000
		}
		external := os.Getenv("TEMPORAL_ADDRESS") != ""
		if o.RestartServer != "" && !external {
			return cli.UsageError("--restart-server restarts an external server: set TEMPORAL_ADDRESS to it " +
				"(the soak restarts a dev server of its own by itself)")
		}
		if !external {
			if _, err := devserver.Ensure(ctx, os.Stderr); err != nil {
				return err
			}
		}
		o.UseEnvironment = true
		courier, done, err := courierBinary()
		if err != nil {
			return err
		}
		defer done()
		o.Courier = courier
		o.Log = os.Stderr
		if quiet {
			o.Log = io.Discard
		}
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		sum, err := soak.Run(ctx, o)
		if err != nil {
			return err
		}
		if asJSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(sum); err != nil {
				return err
			}
		} else if err := sum.WriteTable(os.Stdout); err != nil {
			return err
		}
		if sum.Failed() {
			return &cli.ExitError{Code: cli.CodeError, Err: errors.New("the soak found violations")}
		}
		return nil
	}
	return c
}
