package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab/bench"
)

func benchCommand() *cobra.Command {
	var o bench.Options
	var asJSON, smoke, verbose bool
	var jsonOut, conc, phases, serverPIDs, serverMetrics string
	c := &cobra.Command{
		Use:   "bench [flags]",
		Short: "measure Courier against Temporal's own ceiling",
		Long: `Starts a Temporal dev server with a SQLite file (or uses TEMPORAL_ADDRESS), the sandbox on
loopback and a worker subprocess, then measures Courier against a bare one-activity workflow
and direct HTTP POSTs. Progress goes to stderr; exit status 1 when a target fails.

On an external server (TEMPORAL_ADDRESS, in TEMPORAL_NAMESPACE: best a namespace of its own,
created if missing, and a server nothing else uses meanwhile), --server-pid and
--server-metrics name the server process on this machine and its Prometheus endpoint, so
its CPU time and its work per workflow are measured as on the dev server. On a server of
several nodes, name each node's, comma-separated: the figures are their sums.`,
		Example: `  courier-lab bench --smoke
  courier-lab bench --phases parked --parked 10000
  TEMPORAL_ADDRESS=127.0.0.1:7233 TEMPORAL_NAMESPACE=bench courier-lab bench \
    --server-pid "$(cat temporal.pid)" --server-metrics http://127.0.0.1:8000/metrics
  TEMPORAL_ADDRESS=127.0.0.1:7233 TEMPORAL_NAMESPACE=bench courier-lab bench --phases throughput \
    --server-pid 4100,4200 --server-metrics http://127.0.0.1:8000/metrics,http://127.0.0.1:8001/metrics`,
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	f := c.Flags()
	f.BoolVar(&asJSON, "json", false, "print one JSON object (figures and targets) instead of Markdown")
	f.StringVar(&jsonOut, "json-out", "", "also write the JSON object to this file")
	f.BoolVar(&smoke, "smoke", false, "a few seconds of every phase at tiny sizes: checks the command, not the targets")
	f.DurationVar(&o.Window, "duration", 0, "how long each side runs per round (default 5s)")
	f.DurationVar(&o.Lead, "lead", 0, "how long each side runs per round before it is measured (default 1s)")
	f.IntVar(&o.Rounds, "rounds", 0, "interleaved rounds per concurrency (default 4)")
	f.StringVar(&conc, "concurrency", "", "comma-separated concurrencies (default 1,16,64)")
	f.IntVar(&o.Parked, "parked", 0, "deliveries parked for review and resolved (default 1000)")
	f.IntVar(&o.Storm, "storm", 0, "callers starting one operation at once (default 64)")
	f.StringVar(&phases, "phases", "", "comma-separated phases to run (default all): "+strings.Join(bench.AllPhases, ","))
	f.BoolVar(&o.KeepDir, "keep", false, "keep the temporary directory with the databases")
	f.BoolVarP(&verbose, "verbose", "v", false, "show the dev server's and the worker's output")
	f.StringVar(&serverPIDs, "server-pid", "", "on an external server (TEMPORAL_ADDRESS), its process on this machine, for its CPU time; "+
		"comma-separated, one per node, to sum several")
	f.StringVar(&serverMetrics, "server-metrics", "", "on an external server (TEMPORAL_ADDRESS), its Prometheus endpoint, "+
		"e.g. http://127.0.0.1:8000/metrics, for its work per workflow; comma-separated, one per node, to sum several")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if (serverPIDs != "" || serverMetrics != "") && os.Getenv("TEMPORAL_ADDRESS") == "" {
			return cli.UsageError("--server-pid and --server-metrics are for an external server: set TEMPORAL_ADDRESS to it " +
				"(the bench reads a dev server of its own by itself)")
		}
		var err error
		if o.ServerPIDs, err = positiveInts("--server-pid", serverPIDs, "a process id"); err != nil {
			return err
		}
		if serverMetrics != "" {
			for _, m := range strings.Split(serverMetrics, ",") {
				o.ServerMetrics = append(o.ServerMetrics, strings.TrimSpace(m))
			}
		}
		concurrency, err := positiveInts("--concurrency", conc, "a positive number")
		if err != nil {
			return err
		}
		courier, done, err := courierBinary()
		if err != nil {
			return err
		}
		defer done()
		o.Courier = courier
		level := slog.LevelWarn
		if verbose {
			level = slog.LevelInfo
			o.Log = os.Stderr
		}
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
		o.Progress = os.Stderr
		if smoke {
			o = bench.Smoke(o)
		}
		if concurrency != nil {
			o.Concurrency = concurrency
		}
		if phases != "" {
			o.Phases = strings.Split(phases, ",")
		}

		started := time.Now()
		rep, err := bench.Run(c.Context(), o)
		if err != nil {
			return err
		}
		raw, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		raw = append(raw, '\n')
		if jsonOut != "" {
			if err := os.WriteFile(jsonOut, raw, 0o644); err != nil {
				return err
			}
		}
		if asJSON {
			if _, err := os.Stdout.Write(raw); err != nil {
				return err
			}
		} else {
			rep.Markdown(os.Stdout)
		}
		if failed := rep.Failed(); len(failed) > 0 {
			fmt.Fprintf(os.Stderr, "courier-lab bench: %d of %d targets failed (%s)\n", len(failed), len(rep.Targets), time.Since(started).Round(time.Second))
			return &cli.ExitError{Code: cli.CodeError, Err: errors.New("")}
		}
		return nil
	}
	return c
}

// positiveInts parses a flag's comma-separated list of positive numbers;
// an empty value is none.
func positiveInts(flag, value, what string) ([]int, error) {
	if value == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(value, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, cli.UsageError("%s: %q is not %s", flag, f, what)
		}
		out = append(out, n)
	}
	return out, nil
}
