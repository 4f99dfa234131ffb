package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/abde64c9/courier/testsuite"
)

func runFaultlab(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("faultlab", flag.ExitOnError)
	mode := fs.String("mode", "testenv", "testenv (Temporal test environment) or real (a real dev server, real processes)")
	_ = fs.Parse(args)

	var rep testsuite.LabReport
	var err error
	switch *mode {
	case "testenv":
		rep, err = testsuite.RunTestEnv(ctx)
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
