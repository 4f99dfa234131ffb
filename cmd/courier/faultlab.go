package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/abde64c9/courier/devserver"
	"github.com/abde64c9/courier/testsuite"
)

func runFaultlab(ctx context.Context, args []string) error {
	// The real mode runs this program again as its crashing worker and its
	// second client process.
	if testsuite.RealProcessRole() != "" {
		return testsuite.RealProcessMain(ctx)
	}
	fs := flag.NewFlagSet("faultlab", flag.ExitOnError)
	mode := fs.String("mode", "testenv", "testenv (Temporal test environment) or real (a real Temporal server, real processes:\n"+
		"a dev server of its own, or the one at TEMPORAL_ADDRESS, whose namespace must have no other\n"+
		"Courier worker on the courier task queue, or that worker would run the cases' deliveries)")
	_ = fs.Parse(args)

	var rep testsuite.LabReport
	var err error
	switch *mode {
	case "testenv":
		rep, err = testsuite.RunTestEnv(ctx)
	case "real":
		rep, err = faultlabReal(ctx)
	default:
		return fmt.Errorf("--mode %q: use testenv or real", *mode)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return err
	}
	if rep.Status != "PASS" {
		return &exitError{code: 1, err: errors.New("")}
	}
	return nil
}

// faultlabReal runs the cases against the server at TEMPORAL_ADDRESS, or a
// dev server of its own (building the Temporal CLI first if it is missing).
// Logs go to stderr: stdout is the report.
func faultlabReal(ctx context.Context) (testsuite.LabReport, error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	exe, err := os.Executable()
	if err != nil {
		return testsuite.LabReport{}, fmt.Errorf("find this program, to run its helper processes: %w", err)
	}
	o := testsuite.RealOptions{Process: []string{exe, "faultlab"}, Logger: logger, Log: os.Stderr}
	if os.Getenv("TEMPORAL_ADDRESS") != "" {
		c, opts, err := dial(ctx, logger)
		if err != nil {
			return testsuite.LabReport{}, err
		}
		defer c.Close()
		o.Client, o.Address = c, opts.HostPort
	} else if _, err := devserver.Ensure(ctx, os.Stderr); err != nil {
		return testsuite.LabReport{}, err
	}
	return testsuite.RunReal(ctx, o)
}
