package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/abde64c9/courier/devserver"
	"github.com/abde64c9/courier/soak"
)

func runSoak(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: courier soak [--deliveries N] [--seed N] [--json]

Chaos soak on this machine, loopback only: N deliveries over all four dedup
kinds with random sandbox faults, two 'courier worker' processes SIGKILLed
and restarted at random moments, and the Temporal dev server stopped and
started again on its SQLite file. Then every delivery's status (Temporal)
is checked against the effects the destinations stored. Exits 1 on any
duplicate, lost delivery or other violation.

flags:
`)
		fs.PrintDefaults()
	}
	deliveries := fs.Int("deliveries", soak.DefaultDeliveries, "deliveries to make")
	seed := fs.Int64("seed", 0, "random seed for the plan and the chaos; 0 picks one (printed)")
	asJSON := fs.Bool("json", false, "print the summary as one JSON object")
	rate := fs.Float64("rate", soak.DefaultRate, "deliveries started per second (sets how long the chaos lasts)")
	kills := fs.Int("kills", soak.DefaultKills, "worker SIGKILLs")
	faults := fs.Float64("faults", soak.DefaultFaultRatio, "sandbox faults injected per delivery")
	timeout := fs.Duration("timeout", soak.DefaultTimeout, "bound on the whole run")
	dir := fs.String("dir", "", "keep the run's files (SQLite databases, logs) here; default a temporary folder, kept only on failure")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	if err := parseCommandFlags(fs, args); err != nil {
		return err
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1_000_000
	}
	if _, err := devserver.Ensure(ctx, os.Stderr); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program, to run it as the workers: %w", err)
	}
	var progress io.Writer = os.Stderr
	if *quiet {
		progress = io.Discard
	}
	sum, err := soak.Run(ctx, soak.Options{
		Deliveries: *deliveries, Seed: *seed, Rate: *rate, Kills: *kills, FaultRatio: *faults,
		Timeout: *timeout, Dir: *dir, Courier: exe,
		Log:    progress,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else if err := sum.WriteTable(os.Stdout); err != nil {
		return err
	}
	if sum.Failed() {
		return &exitError{code: 1, err: errors.New("the soak found violations")}
	}
	return nil
}
