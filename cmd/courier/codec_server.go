package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/codec"
	"github.com/abde64c9/courier/internal/cli"
)

func codecServerCommand() *cobra.Command {
	var addr, origins string
	c := &cobra.Command{
		Use:   "codec-server [flags]",
		Short: "serve the payload codec for the Temporal web UI",
		Long: fmt.Sprintf("Serves the payload codec so the Temporal web UI can show encrypted payloads to\n"+
			"operators who hold the key. Keys come from %s or %s (+ %s).", codec.EnvKeyFile, codec.EnvKey, codec.EnvKeyID),
		Example:     "  COURIER_CODEC_KEY=... courier codec-server --addr 127.0.0.1:8089 --ui-origin http://localhost:8233",
		Args:        cli.NoArgs,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:8089", "address to serve /encode and /decode on")
	c.Flags().StringVar(&origins, "ui-origin", "http://localhost:8233", "comma-separated web UI origins allowed to call it")
	c.RunE = func(c *cobra.Command, _ []string) error {
		keys, ok, err := codec.KeysFromEnv()
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no key: set %s (lines id:base64-key) or %s", codec.EnvKeyFile, codec.EnvKey)
		}
		cd, err := codec.New(keys)
		if err != nil {
			return err
		}
		srv := &http.Server{Addr: addr, Handler: cd.Handler(strings.Split(origins, ",")...), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-c.Context().Done()
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		slog.New(slog.NewTextHandler(os.Stderr, nil)).Info("codec server", "addr", addr, "active_key", keys.Active,
			"ui_setting", "set the web UI's codec endpoint to http://"+addr)
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	return c
}
