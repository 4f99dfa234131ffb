package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/starter/httpapi"
)

// envAPIConfig names the API's configuration file when --config is not given.
const envAPIConfig = "COURIER_API_CONFIG"

func apiCommand() *cobra.Command {
	var o httpapi.Options
	var configFlag, addr, destinationsFlag, tlsCert, tlsKey, clientCA string
	c := &cobra.Command{
		Use:   "api --config FILE [--addr ADDR] [--destinations FILE] [--wait DURATION]",
		Short: "serve the HTTP API: deliveries over plain HTTP with an Idempotency-Key",
		Long: `Serves Courier's HTTP API (docs/api.md): POST a payload with an Idempotency-Key header
to start or join a delivery, GET its status, GET the destinations' gates; /v1/openapi.json
describes it, /healthz, /readyz (Temporal answers) and /metrics serve operators. Each caller
sends Authorization: Bearer <token>; the configuration file (--config, else $` + envAPIConfig + `)
binds each token's SHA-256 to one tenant (make it with courier api hash-token). Temporal is
found through Temporal's standard client environment. Stops gracefully on SIGINT or SIGTERM,
answering every request it accepted.`,
		Example: "  courier api --config api.json --addr 127.0.0.1:8088 --destinations lab/config/destinations.dev.json\n" +
			"  courier api hash-token --new",
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	f := c.Flags()
	f.StringVar(&configFlag, "config", "", "the API's configuration `file` (JSON): tokens' hashes and their tenants, rate limit (required, unless $"+envAPIConfig+" names it)")
	f.StringVar(&addr, "addr", "127.0.0.1:8088", "`address` to serve on")
	f.StringVar(&destinationsFlag, "destinations", "", "the workers' destinations `file`: refuse other destinations (default $"+envDestinations+"; empty: any)")
	f.DurationVar(&o.Wait, "wait", httpapi.DefaultWait, "longest a POST waits for its delivery to settle before it answers 202 (`DURATION`)")
	f.StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this certificate `file` (PEM, with --tls-key); without it, plain HTTP for a TLS proxy in front")
	f.StringVar(&tlsKey, "tls-key", "", "the certificate's private key `file` (PEM)")
	f.StringVar(&clientCA, "client-ca", "", "with --tls-cert, verify client certificates against these CA certificates (`file`, PEM): a caller's certificate in the file's cert_sha256 then speaks for its tenant")
	_ = c.MarkFlagFilename("config", "json")
	_ = c.MarkFlagFilename("destinations", "json")
	logs := cli.AddLogFlags(c, true)
	c.RunE = func(c *cobra.Command, _ []string) (err error) {
		if o.Logger, err = logs.Logger(); err != nil {
			return err
		}
		path := configFlag
		if path == "" {
			path = os.Getenv(envAPIConfig)
		}
		if path == "" {
			return cli.UsageError("--config is required, or %s: the file that binds tokens to tenants (see %s -h)", envAPIConfig, c.CommandPath())
		}
		if o.Config, err = httpapi.LoadConfig(path); err != nil {
			return err
		}
		if file, from := destinationsFile(destinationsFlag); file != "" {
			var cfg destinations.Config
			if cfg, err = loadDestinations(file, from); err != nil {
				return err
			}
			o.Destinations = &cfg
		}
		opts, err := connect.ClientOptions(o.Logger)
		if err != nil {
			return err
		}
		// Lazy: the API serves (readiness 503, starts refused) while
		// Temporal is away, and connects once it answers.
		tc, err := client.NewLazyClient(opts)
		if err != nil {
			return err
		}
		defer tc.Close()
		o.Temporal, o.Starter = tc, starter.NewWithOptions(tc, opts)
		srv, err := httpapi.New(o)
		if err != nil {
			return err
		}
		if (tlsCert == "") != (tlsKey == "") {
			return cli.UsageError("--tls-cert and --tls-key go together: give both, or neither for plain HTTP")
		}
		var tlsConfig *tls.Config
		if tlsCert != "" {
			cert, err := tls.LoadX509KeyPair(tlsCert, tlsKey)
			if err != nil {
				return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", tlsCert, tlsKey, err)
			}
			tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
		if clientCA != "" {
			if tlsConfig == nil {
				return cli.UsageError("--client-ca needs --tls-cert and --tls-key: client certificates come over TLS")
			}
			caPEM, err := os.ReadFile(clientCA)
			if err != nil {
				return fmt.Errorf("--client-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(caPEM) {
				return fmt.Errorf("--client-ca %s: no PEM certificate in it", clientCA)
			}
			// Callers without a certificate still present a token.
			tlsConfig.ClientCAs, tlsConfig.ClientAuth = pool, tls.VerifyClientCertIfGiven
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w (choose another with --addr)", addr, err)
		}
		if tlsConfig != nil {
			ln = tls.NewListener(ln, tlsConfig)
		} else if ip, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(ip).IsLoopback() {
			o.Logger.Warn("api: serving plain HTTP beyond this machine: bearer tokens cross the network in clear unless a TLS proxy is in front (or use --tls-cert and --tls-key)",
				"address", ln.Addr().String())
		}
		return srv.Serve(c.Context(), ln)
	}
	c.AddCommand(hashTokenCommand())
	return c
}

func hashTokenCommand() *cobra.Command {
	var fresh bool
	var certFile string
	c := &cobra.Command{
		Use:   "hash-token [--new | --cert FILE]",
		Short: "print the SHA-256 of a bearer token, for the API's configuration file",
		Long: `Reads a bearer token from stdin (one line) and prints the hash the API's configuration
file stores as token_sha256. With --new, makes a random token and prints it (give it to the
caller, once) and its hash on the next line. The token never goes on the command line.
With --cert, prints a client certificate's hash (of its DER), the file's cert_sha256.`,
		Example:     "  courier api hash-token < token.txt\n  courier api hash-token --new\n  courier api hash-token --cert client.pem",
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	c.Flags().BoolVar(&fresh, "new", false, "make a new random token and print it, then its hash")
	c.Flags().StringVar(&certFile, "cert", "", "print the hash of the client certificate in this `file` (PEM)")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if certFile != "" {
			b, err := os.ReadFile(certFile)
			if err != nil {
				return err
			}
			block, _ := pem.Decode(b)
			if block == nil || block.Type != "CERTIFICATE" {
				return fmt.Errorf("%s: no PEM CERTIFICATE in it", certFile)
			}
			_, err = fmt.Fprintln(c.OutOrStdout(), httpapi.HashCert(block.Bytes))
			return err
		}
		if fresh {
			token := httpapi.NewToken()
			_, err := fmt.Fprintf(c.OutOrStdout(), "%s\n%s\n", token, httpapi.HashToken(token))
			return err
		}
		line, err := bufio.NewReader(c.InOrStdin()).ReadString('\n')
		if err != nil && line == "" {
			return errors.New("no token on stdin: pipe one in (courier api hash-token < token.txt), or use --new")
		}
		token := strings.TrimSpace(line)
		if token == "" {
			return errors.New("the token on stdin is empty")
		}
		_, err = fmt.Fprintln(c.OutOrStdout(), httpapi.HashToken(token))
		return err
	}
	return c
}
