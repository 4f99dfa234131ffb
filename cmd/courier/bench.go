package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/abde64c9/courier/bench"
)

func runBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	asJSON := fs.Bool("json", false, "print one JSON object (figures and targets) instead of Markdown")
	jsonOut := fs.String("json-out", "", "also write the JSON object to this file")
	smoke := fs.Bool("smoke", false, "a few seconds of every phase at tiny sizes: checks the command, not the targets")
	duration := fs.Duration("duration", 0, "how long each side runs per round (default 5s)")
	lead := fs.Duration("lead", 0, "how long each side runs per round before it is measured (default 1s)")
	rounds := fs.Int("rounds", 0, "interleaved rounds per concurrency (default 4)")
	conc := fs.String("concurrency", "", "comma-separated concurrencies (default 1,16,64)")
	parked := fs.Int("parked", 0, "deliveries parked for review and resolved (default 1000)")
	storm := fs.Int("storm", 0, "callers starting one operation at once (default 64)")
	phases := fs.String("phases", "", "comma-separated phases to run (default all): "+strings.Join(bench.AllPhases, ","))
	keep := fs.Bool("keep", false, "keep the temporary directory with the databases")
	verbose := fs.Bool("v", false, "show the dev server's and the worker's output")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: courier bench [flags]\n\n"+
			"Starts a Temporal dev server with a SQLite file (or uses TEMPORAL_ADDRESS), the sandbox on\n"+
			"loopback and a worker subprocess, then measures Courier against a bare one-activity workflow\n"+
			"and direct HTTP POSTs. Progress goes to stderr; exit status 1 when a target fails.\n\nflags:")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the courier binary to run as the worker: %w", err)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	o := bench.Options{
		Window: *duration, Lead: *lead, Rounds: *rounds, Parked: *parked, Storm: *storm, KeepDir: *keep, Courier: exe,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		Progress: os.Stderr,
	}
	if *verbose {
		o.Log = os.Stderr
	}
	if *smoke {
		o = bench.Smoke(o)
	}
	if *conc != "" {
		o.Concurrency = nil
		for _, f := range strings.Split(*conc, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("--concurrency: %q is not a positive number", f)
			}
			o.Concurrency = append(o.Concurrency, n)
		}
	}
	if *phases != "" {
		o.Phases = strings.Split(*phases, ",")
	}

	started := time.Now()
	rep, err := bench.Run(ctx, o)
	if err != nil {
		return err
	}
	raw, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	raw = append(raw, '\n')
	if *jsonOut != "" {
		if err := os.WriteFile(*jsonOut, raw, 0o644); err != nil {
			return err
		}
	}
	if *asJSON {
		if _, err := os.Stdout.Write(raw); err != nil {
			return err
		}
	} else {
		rep.Markdown(os.Stdout)
	}
	if failed := rep.Failed(); len(failed) > 0 {
		fmt.Fprintf(os.Stderr, "courier bench: %d of %d targets failed (%s)\n", len(failed), len(rep.Targets), time.Since(started).Round(time.Second))
		return &exitError{code: 1, err: errors.New("")}
	}
	return nil
}
