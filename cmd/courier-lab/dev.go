package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab/devstack"
)

func devCommand() *cobra.Command {
	var o devstack.Options
	c := &cobra.Command{
		Use:   "dev [--dir DIR] [--port N] [--ui-port N] [--sandbox ADDR] [--nats ADDR] [--mail ADDR] [--metrics ADDR] [--api ADDR]",
		Short: "run everything locally: dev server, web UI, worker, sandbox destinations",
		Long: `Runs Courier on this machine, no Docker: the Temporal dev server (SQLite file,
web UI, Courier's search attributes), the sandbox destinations, a NATS server
with JetStream and a mail sink, and a worker over the sample destinations
file (one destination of each dedup kind, a NATS stream and email), and
the HTTP API (courier api) for tenant acme. It
builds the pinned Temporal CLI into bin/ on first use, prints the web UI
address and commands to try, and keeps its state in DIR, so the next
'courier-lab dev' finds the deliveries from before. Ctrl-C stops everything
(exit status 0).`,
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	c.Flags().StringVar(&o.Dir, "dir", devstack.DefaultDir, "state `folder`: SQLite files and the server log")
	c.Flags().IntVar(&o.Port, "port", devstack.DefaultPort, "Temporal server gRPC `port` (on 127.0.0.1)")
	c.Flags().IntVar(&o.UIPort, "ui-port", devstack.DefaultUIPort, "Temporal web UI `port` (on 127.0.0.1)")
	c.Flags().StringVar(&o.SandboxAddr, "sandbox", devstack.DefaultSandboxAddr, "sandbox destinations' listen `address`")
	c.Flags().StringVar(&o.NATSAddr, "nats", devstack.DefaultNATSAddr, "the events destination's NATS server (JetStream) listen `address`")
	c.Flags().StringVar(&o.MailAddr, "mail", devstack.DefaultMailAddr, "the mail destination's mail sink (SMTP) listen `address`")
	c.Flags().StringVar(&o.MetricsAddr, "metrics", devstack.DefaultMetricsAddr, "worker metrics listen `address`; empty: off")
	c.Flags().StringVar(&o.APIAddr, "api", devstack.DefaultAPIAddr, "HTTP API listen `address` (courier api, tenant acme, token in DIR/api.token); empty: off")
	_ = c.MarkFlagDirname("dir")
	logs := cli.AddLogFlags(c, false)
	c.RunE = func(c *cobra.Command, _ []string) (err error) {
		if o.Logger, err = logs.Logger(); err != nil {
			return err
		}
		o.Progress, o.WorkerLog = os.Stderr, os.Stderr
		// Ctrl-C is how it stops: it ends with status 0, and so do the
		// make and go run in front of it, which then never see the SIGINT.
		release := devstack.HoldTerminal()
		defer release()
		return devstack.Run(c.Context(), o, os.Stdout)
	}
	return c
}
