package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/testsuite"
)

func faultlabCommand() *cobra.Command {
	var mode string
	c := &cobra.Command{
		Use:   "faultlab [--mode testenv|real]",
		Short: "run every seed fault case and print the report (JSON)",
		Long: `Runs every seed fault case and prints the report as JSON on stdout; progress and logs go
to stderr. Exits 1 when the report is not PASS.`,
		Example: `  courier-lab faultlab
  courier-lab faultlab --mode real`,
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	c.Flags().StringVar(&mode, "mode", "testenv", "testenv (Temporal test environment) or real (a real Temporal server, real processes:\n"+
		"a dev server of its own, or the one at TEMPORAL_ADDRESS, whose namespace must have no other\n"+
		"Courier worker on the courier task queue, or that worker would run the cases' deliveries)")
	cli.Choices(c, "mode", "testenv", "real")
	c.RunE = func(c *cobra.Command, _ []string) error {
		var rep testsuite.LabReport
		var err error
		switch mode {
		case "testenv":
			rep, err = testsuite.RunTestEnv(c.Context())
		case "real":
			rep, err = faultlabReal(c.Context())
		default:
			return cli.UsageError("--mode %q: use testenv or real", mode)
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
			return &cli.ExitError{Code: cli.CodeError, Err: errors.New("")}
		}
		return nil
	}
	return c
}

// faultlabReal runs the cases against the server at TEMPORAL_ADDRESS, or a
// dev server of its own (building the Temporal CLI first if it is missing).
// Logs go to stderr: stdout is the report.
func faultlabReal(ctx context.Context) (testsuite.LabReport, error) {
	courier, done, err := courierBinary()
	if err != nil {
		return testsuite.LabReport{}, err
	}
	defer done()
	if os.Getenv("TEMPORAL_ADDRESS") == "" {
		if _, err := devserver.Ensure(ctx, os.Stderr); err != nil {
			return testsuite.LabReport{}, err
		}
	}
	return testsuite.RunReal(ctx, testsuite.RealOptions{Courier: courier, Logger: cli.StderrLogger(), Log: os.Stderr})
}
