package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/abde64c9/courier/codec"
)

func runCodecServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("codec-server", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8089", "address to serve /encode and /decode on")
	origins := fs.String("ui-origin", "http://localhost:8233", "comma-separated web UI origins allowed to call it")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: courier codec-server [flags]\n\n"+
			"Serves the payload codec so the Temporal web UI can show encrypted payloads to\n"+
			"operators who hold the key. Keys come from %s or %s (+ %s).\n\n", codec.EnvKeyFile, codec.EnvKey, codec.EnvKeyID)
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)

	keys, ok, err := codec.KeysFromEnv()
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no key: set %s (lines id:base64-key) or %s", codec.EnvKeyFile, codec.EnvKey)
	}
	c, err := codec.New(keys)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: *addr, Handler: c.Handler(strings.Split(*origins, ",")...), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	slog.New(slog.NewTextHandler(os.Stderr, nil)).Info("codec server", "addr", *addr, "active_key", keys.Active,
		"ui_setting", "set the web UI's codec endpoint to http://"+*addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
