package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/connect/codec"
	"github.com/abde64c9/courier/internal/cli"
)

func codecServerCommand() *cobra.Command {
	var (
		addr, origins, tokenFile     string
		tlsCert, tlsKey, tlsClientCA string
		allowedHosts                 []string
		noAuth                       bool
		maxBody                      int64
	)
	c := &cobra.Command{
		Use:   "codec-server [flags]",
		Short: "serve the payload codec for the Temporal web UI",
		Long: fmt.Sprintf("Serves the payload codec (POST /encode, POST /decode) so the Temporal web UI and CLI can show\n"+
			"encrypted payloads and failures to operators who hold the key. Keys come from %s or %s (+ %s).\n\n"+
			"Callers need a bearer token: --token-file (one per line, several while rotating) or %s.\n"+
			"Only --insecure-no-auth on a loopback address serves without one. Requests must name the server\n"+
			"(Host: --addr or --allowed-host) and, from a browser, come from a --ui-origin.\n\n"+
			"With --tls-cert and --tls-key it serves https only; --tls-client-ca also requires client certificates.",
			codec.EnvKeyFile, codec.EnvKey, codec.EnvKeyID, codec.EnvServerToken),
		Example: "  COURIER_CODEC_KEY=... courier codec-server --token-file codec-tokens --addr 127.0.0.1:8089\n" +
			"  temporal workflow show -w ID --codec-endpoint http://127.0.0.1:8089 --codec-auth \"Bearer $(head -1 codec-tokens)\"",
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:8089", "address to serve /encode and /decode on")
	c.Flags().StringVar(&origins, "ui-origin", "http://localhost:8233,http://127.0.0.1:8233",
		"comma-separated web UI origins allowed to call it from a browser (empty: none)")
	c.Flags().StringVar(&tokenFile, "token-file", "", "`FILE` of accepted bearer tokens, one per line (also "+codec.EnvServerToken+")")
	c.Flags().StringSliceVar(&allowedHosts, "allowed-host", nil, "Host header values accepted besides --addr's (name or name:port), e.g. a proxy's")
	c.Flags().BoolVar(&noAuth, "insecure-no-auth", false, "serve without a token; only on a loopback --addr, for your own machine")
	c.Flags().Int64Var(&maxBody, "max-body", codec.DefaultMaxBody, "largest request body in `bytes`")
	c.Flags().StringVar(&tlsCert, "tls-cert", os.Getenv(codec.EnvServerTLSCert), "serve https with this certificate (`FILE`, PEM: certificate then intermediates; also "+codec.EnvServerTLSCert+")")
	c.Flags().StringVar(&tlsKey, "tls-key", os.Getenv(codec.EnvServerTLSKey), "the certificate's private key (`FILE`, PEM; also "+codec.EnvServerTLSKey+")")
	c.Flags().StringVar(&tlsClientCA, "tls-client-ca", os.Getenv(codec.EnvServerTLSClientCA), "require client certificates signed by these CAs (`FILE`, PEM; also "+codec.EnvServerTLSClientCA+")")
	c.RunE = func(c *cobra.Command, _ []string) error {
		keys, ok, err := codec.KeysFromEnv()
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no key: set %s (lines id:base64-key) or %s", codec.EnvKeyFile, codec.EnvKey)
		}
		// The web UI shows history of every age, from before encryption too.
		keys.RefusePlaintext = false
		cd, err := codec.New(keys)
		if err != nil {
			return err
		}
		var tokens []string
		if tokenFile != "" {
			if tokens, err = codec.ReadTokens(tokenFile); err != nil {
				return fmt.Errorf("--token-file: %w", err)
			}
		}
		if t := strings.TrimSpace(os.Getenv(codec.EnvServerToken)); t != "" {
			tokens = append(tokens, t)
		}
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		srv, err := codec.NewServer(cd, codec.ServerOptions{
			Addr: addr, Tokens: tokens, NoAuth: noAuth, AllowedHosts: allowedHosts,
			UIOrigins: strings.Split(origins, ","), MaxBody: maxBody, Log: log,
			TLSCert: tlsCert, TLSKey: tlsKey, TLSClientCA: tlsClientCA,
		})
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		go func() {
			<-c.Context().Done()
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		scheme := "http"
		if srv.TLSConfig != nil {
			scheme = "https"
		}
		log.Info("codec server", "addr", l.Addr().String(), "active_key", keys.Active, "tokens", len(tokens),
			"insecure_no_auth", noAuth, "tls", srv.TLSConfig != nil, "client_certs", tlsClientCA != "",
			"ui_origins", origins, "ui_setting", "set the web UI's codec endpoint to "+scheme+"://"+addr)
		if err := codec.Serve(srv, l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	return c
}
