package main

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/deploy"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab"
)

func issuerCommand() *cobra.Command {
	var addr, dir string
	var ttl time.Duration
	c := &cobra.Command{
		Use:   "issuer [--addr ADDR] [--dir DIR] [--ttl D]",
		Short: "serve a signing key's JWKS and mint a token per role (the lab's identity provider)",
		Long: `Stands in for an identity provider where the Temporal server checks every
caller (the native topology and docker-compose): creates an ES256 signing key
in DIR (kept across restarts), writes a token per role there, ROLE.token and
ROLE.toml (a Temporal client profile: TEMPORAL_CONFIG_FILE), and serves the
key's JWKS at /.well-known/jwks.json, which the server's authorizer reads.

Roles (permissions claim):
` + rolesHelp() + `
Tokens are minted again at every start, valid for --ttl.`,
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:8082", "listen `ADDR`ess; 0.0.0.0:8082 to serve other containers")
	c.Flags().StringVar(&dir, "dir", "issuer", "`DIR`ectory of the signing key and the tokens")
	c.Flags().DurationVar(&ttl, "ttl", 7*24*time.Hour, "how long a token is valid")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if ttl <= 0 {
			return cli.UsageError("--ttl %s: a token must be valid for some time", ttl)
		}
		is, err := lab.LoadIssuer(dir)
		if err != nil {
			return err
		}
		if err := is.WriteTokens(dir, ttl); err != nil {
			return err
		}
		err = is.Serve(c.Context(), addr, deploy.JWKSPath)
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "listen" {
			return fmt.Errorf("%w (pick another address with --addr)", err)
		}
		return err
	}
	return c
}

func rolesHelp() string {
	var s string
	for _, r := range lab.Roles {
		s += fmt.Sprintf("  %-9s %v  %s\n", r.Name, r.Permissions, r.What)
	}
	return s
}
