package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab/config"
	"github.com/abde64c9/courier/lab/sandbox"
)

func sandboxCommand() *cobra.Command {
	var addr, db string
	c := &cobra.Command{
		Use:   "sandbox [--addr ADDR] [--db FILE]",
		Short: "serve the sandbox destinations (a ticket service for trying Courier)",
		Long: `Serves the sandbox ticket service: one destination per kind of provider
(helpdesk honours idempotency keys, ignoring ignores them, legacy has none,
crm can be searched by key), one per vendor dialect of examples/destinations
(stripe, stripe-ignoring, adyen, paypal, square, webhooks, things, search, entries), tickets
kept in a SQLite file, and admin
endpoints to stage faults (POST /admin/faults) and read what was stored
(GET /admin/records?destination=NAME, /admin/requests?destination=NAME).`,
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	c.Flags().StringVar(&addr, "addr", config.DevSandboxAddr, "listen `ADDR`ess; 0.0.0.0:8081 to serve other hosts or containers")
	c.Flags().StringVar(&db, "db", "sandbox.db", "SQLite `FILE` for the tickets (created if missing, kept across restarts)")
	logs := cli.AddLogFlags(c, true)
	c.RunE = func(c *cobra.Command, _ []string) error {
		logger, err := logs.Logger()
		if err != nil {
			return err
		}
		slog.SetDefault(logger) // the sandbox logs through the default logger
		err = sandbox.ListenAndServe(c.Context(), addr, db, sandbox.DevModes())
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "listen" {
			return fmt.Errorf("%w (pick another address with --addr)", err)
		}
		return err
	}
	return c
}
