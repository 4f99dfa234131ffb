package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/abde64c9/courier/devstack"
	"github.com/abde64c9/courier/worker"
)

func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: courier dev [--dir DIR] [--port N] [--ui-port N] [--sandbox ADDR] [--metrics ADDR]

Runs Courier on this machine, no Docker: the Temporal dev server (SQLite file,
web UI, Courier's search attributes), the sandbox destinations and a worker
over the sample destinations file (one destination of each dedup kind). It
builds the pinned Temporal CLI into bin/ on first use, prints the web UI
address and commands to try, and keeps its state in DIR, so the next
'courier dev' finds the deliveries from before. Ctrl-C stops everything.

flags:
`)
		fs.PrintDefaults()
	}
	var o devstack.Options
	fs.StringVar(&o.Dir, "dir", devstack.DefaultDir, "state `folder`: SQLite files and the server log")
	fs.IntVar(&o.Port, "port", devstack.DefaultPort, "Temporal server gRPC `port` (on 127.0.0.1)")
	fs.IntVar(&o.UIPort, "ui-port", devstack.DefaultUIPort, "Temporal web UI `port` (on 127.0.0.1)")
	fs.StringVar(&o.SandboxAddr, "sandbox", devstack.DefaultSandboxAddr, "sandbox destinations' listen `address`")
	fs.StringVar(&o.MetricsAddr, "metrics", devstack.DefaultMetricsAddr, "worker metrics listen `address`; empty: off")
	level := fs.String("log-level", "info", "worker log level: debug, info, warn or error")
	if err := parseCommandFlags(fs, args); err != nil {
		return err
	}
	logger, err := worker.NewLogger(os.Stderr, *level, "text")
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if o.Courier, err = os.Executable(); err != nil {
		return err
	}
	o.Logger, o.WorkerLog, o.Progress = logger, os.Stderr, os.Stderr
	return devstack.Run(ctx, o, os.Stdout)
}
