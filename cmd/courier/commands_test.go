package main

import "context"

// runWorker, runSandbox and runDev run one command as the binary would,
// returning its error instead of printing it.
func runWorker(ctx context.Context, args []string) error  { return run(ctx, "worker", args) }
func runSandbox(ctx context.Context, args []string) error { return run(ctx, "sandbox", args) }
func runDev(ctx context.Context, args []string) error     { return run(ctx, "dev", args) }

func run(ctx context.Context, name string, args []string) error {
	_, err := execute(ctx, append([]string{name}, args...))
	return err
}
