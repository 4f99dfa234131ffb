package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/worker"
)

// dial connects to Temporal with the standard client environment, and says
// how to get a server when there is none.
func dial(ctx context.Context, logger *slog.Logger) (client.Client, error) {
	opts, err := worker.ClientOptions(logger)
	if err != nil {
		return nil, err
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (namespace %q): %w\n"+
			"start one locally with `make dev` (courier dev), or set TEMPORAL_ADDRESS", opts.HostPort, opts.Namespace, err)
	}
	return c, nil
}
