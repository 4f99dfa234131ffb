package lab

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/abde64c9/courier/lab/sandbox"
)

// Sandbox is the sandbox destinations served on loopback.
type Sandbox struct {
	*sandbox.Server
	// URL is its base URL, e.g. http://127.0.0.1:8787.
	URL  string
	http *http.Server
}

// StartSandbox opens the sandbox's store at dbPath and serves it on addr
// (empty: a free loopback port).
func StartSandbox(dbPath, addr string, modes map[string]sandbox.Mode) (*Sandbox, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if modes == nil {
		modes = sandbox.DefaultModes()
	}
	// Listening first: holding the port is the only sure check it is free.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sandbox: cannot listen on %s: %w", addr, err)
	}
	sb, err := sandbox.Open(dbPath, modes)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &Sandbox{Server: sb, URL: "http://" + ln.Addr().String(),
		http: &http.Server{Handler: sb.Handler(), ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.http.Serve(ln) }()
	return s, nil
}

// Close ends staged delays, then stops serving and closes the store.
func (s *Sandbox) Close() error {
	err := s.Server.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.http.Shutdown(ctx) != nil {
		_ = s.http.Close()
	}
	return err
}
