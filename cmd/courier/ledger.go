package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/activities/ledger"
	"github.com/abde64c9/courier/activities/ledger/sqlstore"
	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
)

func ledgerCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "ledger init|show|backfill",
		Short: "the outcome ledger: set it up, read a key's row, fill it from closed runs",
		Long: `The outcome ledger is Courier's own record of every operation's outcome, kept after
the namespace's retention removes the run: a repeat of the operation answers what the first
one did (or parks, where it is not known) instead of sending again. Workers name it with
--ledger or $COURIER_LEDGER: sqlite:PATH for workers on one host, postgres://... for
workers on several.`,
		Args: cli.NoArgs,
	}
	var url string
	c.PersistentFlags().StringVar(&url, "ledger", "", "the outcome ledger's `URL` (sqlite:PATH or postgres://...); default $"+envLedger)
	need := func() (string, error) {
		if u := ledgerURL(url); u != "" {
			return u, nil
		}
		return "", cli.UsageError("--ledger is required, or %s: the outcome ledger's URL the workers use (sqlite:PATH or postgres://...)", envLedger)
	}
	open := func(ctx context.Context) (ledger.Store, error) {
		u, err := need()
		if err != nil {
			return nil, err
		}
		return sqlstore.Open(ctx, u)
	}
	c.AddCommand(&cobra.Command{
		Use:   "init",
		Short: "create the ledger's schema and table (the deployment's setup step)",
		Long: `Creates the ledger's table (in PostgreSQL, in schema courier_ledger) if it is missing.
Workers open a SQLite ledger themselves; on PostgreSQL their role may lack the right to
create it, so the deployment's setup step runs this first, as it sets up Temporal's schemas.`,
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
		RunE: func(c *cobra.Command, _ []string) error {
			u, err := need()
			if err != nil {
				return err
			}
			return sqlstore.Init(c.Context(), u)
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "show KEY",
		Short: "print the ledger's row for a delivery's key",
		Long: `Prints, as JSON, what the ledger holds for KEY: its status (created, duplicate,
delivered_by_review; abandoned or pending when the outcome is not known), fingerprint,
receipt, the run that decided it, the verified principal of a deciding review, and when.
With the payload codec on, the receipt is decrypted with the same key environment as
every command's.`,
		Example:     "  courier ledger show 3f0c9a4e-1b2d-5c6e-8f70-9a1b2c3d4e5f --ledger sqlite:.courier/outcomes.db",
		Args:        keyArg,
		Annotations: cli.Exits(cli.CodeOK, cli.CodeError, cli.CodeUsage, cli.CodeUnknownKey),
		RunE: func(c *cobra.Command, args []string) error {
			key, _ := starter.ParseKey(args[0])
			ctx := c.Context()
			l, err := open(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			e, ok, err := l.Get(ctx, key)
			if err != nil {
				return err
			}
			if !ok {
				return &cli.ExitError{Code: cli.CodeUnknownKey, Err: fmt.Errorf("the outcome ledger (%s) holds no row for %s", l.Where(), key)}
			}
			opts, err := connect.ClientOptions(cli.StderrLogger())
			if err != nil {
				return err
			}
			row := ledgerRow{Entry: e}
			if len(e.Receipt) > 0 {
				if row.Receipt, err = activities.DecodeReceipt(opts.DataConverter, e.Receipt); err != nil {
					return fmt.Errorf("the receipt of %s: %w", key, err)
				}
			}
			return cli.PrintJSON(os.Stdout, row)
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "backfill",
		Short: "fill the ledger from the closed deliveries the namespace still holds",
		Long: `Reads every closed Delivery run the namespace still holds and writes its outcome to
the ledger where the ledger has no row for its key: a delivered one with its receipt, one
that may have applied its operation (abandoned, terminated, timed out) as not known. Runs
that provably applied nothing are left out. An existing deployment run it once when it
adds a ledger, so its memory starts from everything Temporal still remembers.`,
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			l, err := open(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			tc, opts, err := dial(ctx, cli.StderrLogger())
			if err != nil {
				return err
			}
			defer tc.Close()
			started := time.Now()
			rep, err := worker.Backfill(ctx, tc, l, opts.DataConverter)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "backfilled %s from %d closed runs in %s: %d written, %d already held, %d skipped\n",
				l.Where(), rep.Runs, time.Since(started).Round(time.Millisecond), rep.Written, rep.Kept, rep.Skipped)
			return cli.PrintJSON(os.Stdout, rep)
		},
	})
	return c
}

// ledgerRow is a ledger row as courier ledger show prints it: the receipt
// decoded.
type ledgerRow struct {
	ledger.Entry
	Receipt json.RawMessage `json:"receipt,omitempty"`
}
