// Package lab is the one stack Courier's labs run on: a Temporal server (a
// dev server of its own, or the one the environment names), the sandbox
// destinations, a destinations file, real `courier worker` processes
// (ready when their /healthz answers, killed and restarted by PID), an
// effect counter that reads the destinations' own stores, and a careful
// scripted reviewer. `courier-lab dev`, `courier-lab bench`, `courier-lab soak`, the
// real-server fault cases and the tests that need a stack all start here;
// no product package imports it.
package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/starter"
)

// Files in a stack's folder.
const (
	TemporalDB = "temporal.db"
	SandboxDB  = "sandbox.db"
	LedgerDB   = "ledger.db"
	// OutcomesDB is the workers' outcome ledger (not the ledger
	// destination's table, LedgerDB).
	OutcomesDB       = "outcomes.db"
	DestinationsFile = "destinations.json"
)

// Options of a stack.
type Options struct {
	// Dir keeps the stack's files; empty is a temporary folder, removed by
	// Close.
	Dir string
	// Temporal chooses the server. Its DBFile defaults to Dir's temporal.db
	// when Persist is set.
	Temporal TemporalOptions
	// Persist keeps the dev server in a SQLite file in Dir.
	Persist bool
	// SandboxAddr is where the sandbox listens; empty: a free loopback port.
	SandboxAddr string
	// SandboxModes are the sandbox's services; nil: sandbox.DefaultModes.
	SandboxModes map[string]sandbox.Mode
	// Destinations makes the workers' destinations file for the sandbox's
	// URL and Dir; nil: the lab's table (Destinations) under CaseBudget.
	Destinations func(sandboxURL, dir string) (destinations.Config, error)
	// Courier is the courier binary the workers run; Workers how many start
	// with the stack, each with WorkerArgs.
	Courier    string
	Workers    int
	WorkerArgs []string
	// WorkerLog receives the workers' output; nil discards it.
	WorkerLog io.Writer
}

// Stack is a running lab stack.
type Stack struct {
	o        Options
	tempDir  bool
	Dir      string
	Temporal *Temporal
	Sandbox  *Sandbox
	// Config is the destinations file at ConfigPath the workers serve.
	Config     destinations.Config
	ConfigPath string
	// Ledger is the workers' outcome ledger, a SQLite file in Dir.
	Ledger  string
	Effects *Effects
	Starter *starter.Client
	Workers []*Worker
}

// Start brings a stack up; on error, nothing it started is left running.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	s := &Stack{o: o, Dir: o.Dir}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "courier-lab-"); err != nil {
			return s, err
		}
		s.tempDir = true
	} else if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return s, fmt.Errorf("lab folder: %w", err)
	}
	if s.Sandbox, err = StartSandbox(filepath.Join(s.Dir, SandboxDB), o.SandboxAddr, o.SandboxModes); err != nil {
		return s, err
	}
	if o.Destinations == nil {
		o.Destinations = func(url, dir string) (destinations.Config, error) {
			return Destinations(url, filepath.Join(dir, LedgerDB), CaseBudget), nil
		}
	}
	if s.Config, err = o.Destinations(s.Sandbox.URL, s.Dir); err != nil {
		return s, err
	}
	s.ConfigPath = filepath.Join(s.Dir, DestinationsFile)
	s.Ledger = "sqlite:" + filepath.Join(s.Dir, OutcomesDB)
	if err := WriteDestinations(s.ConfigPath, s.Config); err != nil {
		return s, err
	}
	if s.Effects, err = OpenEffects(s.Sandbox.Server, s.Config); err != nil {
		return s, err
	}
	to := o.Temporal
	if o.Persist && to.DBFile == "" {
		to.DBFile = filepath.Join(s.Dir, TemporalDB)
	}
	if s.Temporal, err = StartTemporal(ctx, to); err != nil {
		return s, err
	}
	s.Starter = starter.NewWithOptions(s.Temporal.Client(), client.Options{Namespace: s.Temporal.Namespace})
	for range o.Workers {
		if _, err := s.StartWorker(ctx, o.WorkerArgs...); err != nil {
			return s, err
		}
	}
	return s, nil
}

// StartWorker starts one more `courier worker` over the stack's
// destinations file, with args added to its flags.
func (s *Stack) StartWorker(ctx context.Context, args ...string) (*Worker, error) {
	w, err := StartWorker(ctx, WorkerOptions{
		Courier: s.o.Courier, Destinations: s.ConfigPath, Temporal: s.Temporal, Args: args, Log: s.o.WorkerLog,
		Ledger: s.Ledger,
	})
	if err != nil {
		return nil, err
	}
	s.Workers = append(s.Workers, w)
	return w, nil
}

// Close stops the workers gracefully, the server if it is the lab's, and
// the sandbox, and removes a temporary folder.
func (s *Stack) Close() error {
	var errs []error
	for _, w := range s.Workers {
		select {
		case <-w.Done():
		default:
			_, err := w.Stop(stopGrace)
			errs = append(errs, err)
		}
	}
	if s.Temporal != nil {
		s.Temporal.Close()
	}
	if s.Effects != nil {
		s.Effects.Close()
	}
	if s.Sandbox != nil {
		errs = append(errs, s.Sandbox.Close())
	}
	if s.tempDir {
		errs = append(errs, os.RemoveAll(s.Dir))
	}
	return errors.Join(errs...)
}

// stopGrace is how long a worker may take to stop: its in-flight attempts
// finish or are cut short and reported.
const stopGrace = 30 * time.Second
