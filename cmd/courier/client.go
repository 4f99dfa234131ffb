package main

import (
	"context"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/starter"
)

// dialTimeout bounds a command's wait for Temporal: a person is waiting.
const dialTimeout = 5 * time.Second

// dial reads Temporal's client environment once (connect.ClientOptions)
// and connects with it; the options say where it connected.
func dial(ctx context.Context, logger *slog.Logger) (client.Client, client.Options, error) {
	opts, err := connect.ClientOptions(logger)
	if err != nil {
		return nil, opts, err
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := connect.DialWith(ctx, opts)
	return c, opts, err
}

// withStarter dials Temporal (see dial) and runs f with a client for
// deliveries.
func withStarter(ctx context.Context, f func(*starter.Client) error) error {
	c, opts, err := dial(ctx, cli.StderrLogger())
	if err != nil {
		return err
	}
	defer c.Close()
	return f(starter.NewWithOptions(c, opts))
}
