// Package connect is how Courier's processes and services reach Temporal:
// Temporal's standard client environment, Courier's payload codec, and an
// error that says where it looked when no server answers. Any service may
// import it, as the worker and the commands do.
package connect

import (
	"context"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/connect/codec"
)

// ClientOptions reads Temporal's standard client environment
// (TEMPORAL_ADDRESS, default localhost:7233; TEMPORAL_NAMESPACE; TLS, API
// key, config profile) and the payload codec's keys (codec.FromEnv), which
// encrypt payloads and failure messages alike. The SDK logs to logger,
// unless it is nil.
func ClientOptions(logger *slog.Logger) (client.Options, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal client config: %w", err)
	}
	if opts.HostPort == "" {
		opts.HostPort = client.DefaultHostPort
	}
	// Payload encryption, when keys are configured: every process of a
	// namespace must agree on it, so it comes from the same environment.
	dc, err := codec.FromEnv()
	if err != nil {
		return client.Options{}, fmt.Errorf("payload encryption: %w", err)
	}
	if dc != nil {
		opts.DataConverter = dc
		// Failure messages and stack traces quote what a destination answered
		// or a reviewer wrote, so they are encrypted too; the SDK decodes them
		// again for workflow code and for callers that hold the key.
		opts.FailureConverter = temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
			DataConverter: dc, EncodeCommonAttributes: true,
		})
	}
	if logger != nil {
		opts.Logger = sdklog.NewStructuredLogger(logger)
	}
	return opts, nil
}

// Dial connects with ClientOptions. ctx bounds the dial.
func Dial(ctx context.Context, logger *slog.Logger) (client.Client, error) {
	opts, err := ClientOptions(logger)
	if err != nil {
		return nil, err
	}
	return DialWith(ctx, opts)
}

// DialWith connects with opts (from ClientOptions, with what the caller
// adds, such as a metrics handler), defaulting the address and namespace.
// When no server answers, the error names the address and how to get one.
// ctx bounds the dial.
func DialWith(ctx context.Context, opts client.Options) (client.Client, error) {
	if opts.HostPort == "" {
		opts.HostPort = client.DefaultHostPort
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (namespace %q): %w\n"+
			"start one locally with `courier-lab dev` (make dev), or set TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE",
			opts.HostPort, opts.Namespace, err)
	}
	return c, nil
}
