package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/worker"
)

func runWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: courier worker --destinations FILE [--metrics ADDR] [--log-level LEVEL] [--log-format text|json]

Runs Delivery workflows and their attempts. Connects with Temporal's standard
client environment: TEMPORAL_ADDRESS (default localhost:7233),
TEMPORAL_NAMESPACE (default "default"), TEMPORAL_API_KEY, TEMPORAL_TLS_*,
TEMPORAL_PROFILE. Stops gracefully on SIGINT or SIGTERM.

flags:
`)
		fs.PrintDefaults()
	}
	destinations := fs.String("destinations", "", "destinations file (JSON), e.g. config/destinations.dev.json; required")
	metrics := fs.String("metrics", "", "serve Prometheus metrics on `ADDR` (/metrics, and /healthz), e.g. :9090; empty: off")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	format := fs.String("log-format", "text", "log format: text or json")
	if err := parseCommandFlags(fs, args); err != nil {
		return err
	}
	if *destinations == "" {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("--destinations is required, e.g. --destinations config/destinations.dev.json")}
	}
	logger, err := worker.NewLogger(os.Stderr, *level, *format)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	cfg, err := contract.Load(*destinations)
	if err != nil {
		return fmt.Errorf("%w\nfix the destinations file; see the configuration reference in the README", err)
	}
	return worker.Serve(ctx, worker.ProcessOptions{Config: cfg, Logger: logger, MetricsAddr: *metrics})
}

// parseCommandFlags parses a subcommand's flags. -h prints the usage and
// succeeds; a bad flag has been reported by the flag package already, so
// the error only carries the exit status.
func parseCommandFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return &exitError{code: 0, err: errors.New("")}
	case err != nil:
		return &exitError{code: 2, err: errors.New("")}
	case fs.NArg() > 0:
		fs.Usage()
		return &exitError{code: 2, err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}
