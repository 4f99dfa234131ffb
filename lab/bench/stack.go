package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
)

// The destinations the benchmark delivers to, from the lab's table.
const (
	DestKey          = lab.DestHelpdesk // dedup key, the sandbox's helpdesk
	DestUniqueCommit = lab.DestLedger   // dedup unique-commit, SQLite
	DestNone         = lab.DestLegacy   // dedup none, parks on an unknown outcome
)

// budget is the fault cases' with a longer attempt timeout: a loaded
// machine must not turn a slow answer into a retry.
var budget = func() lab.Budget {
	b := lab.CaseBudget
	b.AttemptTimeout = 10 * time.Second
	return b
}()

// workerStopGrace bounds a worker's graceful stop before it is killed.
const workerStopGrace = 15 * time.Second

// stack is what one run starts: the lab's stack in the run's folder (a dev
// server on a SQLite file with its metrics on, unless TEMPORAL_ADDRESS
// names a server; the sandbox; one `courier worker`) and the bare
// workflow's worker.
type stack struct {
	*lab.Stack
	opts Options
	dir  string
	// serverPIDs and metricsURLs are the server's processes and
	// Prometheus endpoints, whose figures are summed: the dev server's, or
	// those Options name for an external one; empty when unknown.
	serverPIDs  []int
	metricsURLs []string
	bare        sdkworker.Worker
	// endpoint is the bench tenant's Nexus endpoint.
	endpoint string
}

func startStack(ctx context.Context, o Options) (s *stack, err error) {
	if o.Courier == "" {
		return nil, errors.New("bench: Options.Courier names no courier binary to run as the worker")
	}
	s = &stack{opts: o}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.dir, err = os.MkdirTemp("", "courier-bench-"); err != nil {
		return s, err
	}
	if os.Getenv("TEMPORAL_ADDRESS") == "" {
		o.progress("starting the Temporal dev server (SQLite file in %s)", s.dir)
	}
	level := "warn" // the worker logs at info when its output is shown
	if o.Log != io.Discard {
		level = "info"
	}
	ls, err := lab.Start(ctx, lab.Options{
		Dir: s.dir, Persist: true,
		Temporal: lab.TemporalOptions{UseEnvironment: true, Log: o.Log, Logger: o.Logger},
		Destinations: func(sandboxURL, dir string) (destinations.Config, error) {
			return lab.Destinations(sandboxURL, filepath.Join(dir, lab.LedgerDB), budget), nil
		},
		Courier: o.Courier, Workers: 1, WorkerLog: o.Log,
		WorkerArgs: []string{"--log-level", level, "--nexus-tenant", benchTenant},
	})
	if err != nil {
		return s, err
	}
	s.Stack = ls
	s.serverPIDs, s.metricsURLs = o.ServerPIDs, o.ServerMetrics
	if s.Temporal.Own {
		s.serverPIDs, s.metricsURLs = nil, nil
		if pid := s.Temporal.PID(); pid != 0 {
			s.serverPIDs = []int{pid}
		}
		if u := s.Temporal.MetricsURL(); u != "" {
			s.metricsURLs = []string{u}
		}
	}
	if s.endpoint, err = lab.EnsureNexusEndpoint(ctx, s.client(), s.Temporal.Namespace, benchTenant); err != nil {
		return s, err
	}
	if err = lab.EnsureEndpoint(ctx, s.client(), BareEndpoint, s.Temporal.Namespace, BareTaskQueue); err != nil {
		return s, err
	}
	s.bare, err = startBare(s.Temporal.Client())
	return s, err
}

// checkServer checks, before anything starts, that every PID and metrics
// address of the external server Options name is readable, and none is
// named twice (its figures would count twice).
func checkServer(ctx context.Context, o Options) error {
	if os.Getenv("TEMPORAL_ADDRESS") == "" && (len(o.ServerPIDs) > 0 || len(o.ServerMetrics) > 0) {
		return errors.New("bench: a server PID and metrics address are for an external server (TEMPORAL_ADDRESS); " +
			"the benchmark reads a dev server of its own by itself")
	}
	for i, pid := range o.ServerPIDs {
		if slices.Contains(o.ServerPIDs[:i], pid) {
			return fmt.Errorf("bench: server PID %d is named twice; name each server process once", pid)
		}
		if pid <= 0 {
			return fmt.Errorf("bench: server PID %d is not a process id; give the PID of the Temporal server process on this machine", pid)
		}
		if _, err := lab.ReadProc(pid); err != nil {
			return fmt.Errorf("bench: server PID %d: %w; give the PID of the Temporal server process on this machine", pid, err)
		}
	}
	for i, m := range o.ServerMetrics {
		if slices.Contains(o.ServerMetrics[:i], m) {
			return fmt.Errorf("bench: server metrics %s is named twice; name each node's endpoint once", m)
		}
		u, err := url.Parse(m)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("bench: server metrics %q: not an http URL; give its Prometheus endpoint, e.g. http://127.0.0.1:8000/metrics", m)
		}
		c, err := scrapeServer(ctx, m, "")
		if err != nil {
			return fmt.Errorf("bench: server metrics %s: %w", m, err)
		}
		if !c.persistence {
			return fmt.Errorf("bench: %s serves no %s metric: is it the Temporal server's Prometheus endpoint "+
				"(global.metrics.prometheus.listenAddress in its config)?", m, persistenceRequests)
		}
	}
	return nil
}

// client is the lab's Temporal client.
func (s *stack) client() client.Client { return s.Temporal.Client() }

// worker is the `courier worker` process.
func (s *stack) worker() *lab.Worker { return s.Workers[0] }

// restartWorker replaces the `courier worker` with a fresh process, so a
// memory figure is the worker's alone, not left over from earlier phases.
func (s *stack) restartWorker(ctx context.Context) error {
	if _, err := s.worker().Stop(workerStopGrace); err != nil {
		s.opts.Logger.Warn("stop the worker", "error", err)
	}
	w, err := s.worker().Restart(ctx)
	if err != nil {
		return err
	}
	s.Workers[0] = w
	return nil
}

func (s *stack) close() {
	if s.bare != nil {
		s.bare.Stop()
	}
	if s.Stack != nil {
		if err := s.Stack.Close(); err != nil {
			s.opts.Logger.Warn("stop the lab stack", "error", err)
		}
	}
	if s.dir != "" && !s.opts.KeepDir {
		_ = os.RemoveAll(s.dir)
	}
}
