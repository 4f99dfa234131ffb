// Command courier runs Courier: the worker, a local dev stack, and the
// commands services and operators use. Flags and wiring only; the logic
// lives in the packages.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{
	"worker":       {"run a worker: deliveries and their activities", runWorker},
	"dev":          {"run everything locally: dev server, web UI, worker, sandbox destinations", runDev},
	"sandbox":      {"serve the sandbox destinations (a ticket service for trying Courier)", runSandbox},
	"deliver":      {"start (or join) a delivery and print its result", runDeliver},
	"review":       {"decide a delivery awaiting review: retry, delivered or abandon", runReview},
	"status":       {"print a delivery's status", runStatus},
	"list":         {"list deliveries, e.g. those awaiting review", runList},
	"probe":        {"check that a destination honours its declared contract", runProbe},
	"faultlab":     {"run every seed fault case and print the report (JSON)", runFaultlab},
	"bench":        {"measure Courier against Temporal's own ceiling", runBench},
	"soak":         {"chaos soak: kill workers, restart the server, count effects", runSoak},
	"codec-server": {"serve the payload codec for the Temporal web UI", runCodecServer},
}

// exitError carries a specific exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "courier: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, os.Args[2:]); err != nil {
		code := 1
		if e, ok := err.(*exitError); ok {
			code = e.code
		}
		if err.Error() != "" {
			fmt.Fprintf(os.Stderr, "courier %s: %v\n", os.Args[1], err)
		}
		os.Exit(code)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: courier COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'courier COMMAND -h' for a command's flags.")
}
