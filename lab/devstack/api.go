package devstack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/abde64c9/courier/deploy"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/starter/httpapi"
)

// Files of the dev HTTP API under the state folder: its token (for tenant
// lab.NexusTenant, made once) and its configuration, which holds only the
// token's hash.
const (
	APIToken  = "api.token"
	APIConfig = "api.json"
)

// DefaultAPIAddr is where `courier-lab dev` serves the HTTP API.
const DefaultAPIAddr = "127.0.0.1:8088"

// api is the dev stack's `courier api` process.
type api struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startAPI runs `courier api` on addr for tenant lab.NexusTenant, with a
// token kept in the state folder, and waits until it is ready.
func (s *Stack) startAPI(ctx context.Context, addr string) (*api, error) {
	token, err := s.apiToken()
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(s.o.Dir, APIConfig)
	if err := deploy.WriteAPIConfig(cfgPath, lab.NexusTenant, token); err != nil {
		return nil, err
	}
	log := s.o.WorkerLog
	if log == nil {
		log = io.Discard
	}
	a := &api{cmd: exec.Command(s.o.Courier, "api", "--config", cfgPath, "--addr", addr,
		"--destinations", s.lab.ConfigPath, "--log-level", levelOf(s.o.Logger)), done: make(chan struct{})}
	a.cmd.Env = s.lab.Temporal.Env(os.Environ())
	a.cmd.Stdout, a.cmd.Stderr = log, log
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start courier api: %w", err)
	}
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get("http://" + addr + httpapi.PathReady)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return a, nil
			}
		}
		select {
		case <-a.done:
			return nil, fmt.Errorf("courier api exited before it was ready (its log is above)")
		case <-ctx.Done():
			a.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			a.stop()
			return nil, fmt.Errorf("courier api on %s not ready within 30s: %v", addr, err)
		}
	}
}

// apiToken is the dev token, made on the first start and kept (0600).
func (s *Stack) apiToken() (string, error) { return deploy.APIToken(filepath.Join(s.o.Dir, APIToken)) }

// stop ends the process gracefully: it answers what it had accepted.
func (a *api) stop() error {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
		return nil
	case <-time.After(stopGrace):
		_ = a.cmd.Process.Kill()
		<-a.done
		return fmt.Errorf("courier api still running %s after SIGTERM: killed", stopGrace)
	}
}

// stopGrace is how long the API may take to answer what it accepted.
const stopGrace = 60 * time.Second

// APIURL is the HTTP API's base URL, empty when off.
func (s *Stack) APIURL() string {
	if s.apiAddr == "" {
		return ""
	}
	return "http://" + s.apiAddr
}

// APITokenPath is the dev API token's file.
func (s *Stack) APITokenPath() string { return absolute(filepath.Join(s.o.Dir, APIToken)) }
