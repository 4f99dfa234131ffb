package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/abde64c9/courier/config"
	"github.com/abde64c9/courier/sandbox"
	"github.com/abde64c9/courier/worker"
)

func runSandbox(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: courier sandbox [--addr ADDR] [--db FILE]

Serves the sandbox ticket service: one destination per kind of provider
(helpdesk honours idempotency keys, ignoring ignores them, legacy has none,
crm can be searched by key), tickets kept in a SQLite file, and admin
endpoints to stage faults (POST /admin/faults) and read what was stored
(GET /admin/records?destination=NAME, /admin/requests?destination=NAME).

flags:
`)
		fs.PrintDefaults()
	}
	addr := fs.String("addr", config.DevSandboxAddr, "listen `ADDR`ess; 0.0.0.0:8081 to serve other hosts or containers")
	db := fs.String("db", "sandbox.db", "SQLite `FILE` for the tickets (created if missing, kept across restarts)")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	format := fs.String("log-format", "text", "log format: text or json")
	if err := parseCommandFlags(fs, args); err != nil {
		return err
	}
	logger, err := worker.NewLogger(os.Stderr, *level, *format)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	slog.SetDefault(logger) // the sandbox logs through the default logger
	err = sandbox.ListenAndServe(ctx, *addr, *db, sandbox.DefaultModes())
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "listen" {
		return fmt.Errorf("%w (pick another address with --addr)", err)
	}
	return err
}
