// Package soak is Courier's chaos soak: many deliveries over every dedup
// kind while the sandbox injects faults, worker processes are SIGKILLed and
// restarted, and the Temporal dev server is stopped and started again on its
// SQLite file. On an external server (TEMPORAL_ADDRESS), a command of the
// caller's restarts the server instead, or nothing does. At the end it counts
// the effects each destination stored in its own database and checks them
// against what Temporal says happened. Everything is bounded in time. Lab
// only: courier-lab soak runs it.
package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// Defaults of a soak.
const (
	DefaultDeliveries = 500
	DefaultRate       = 5 // deliveries started per second
	DefaultKills      = 6
	DefaultTimeout    = 20 * time.Minute
	// DefaultFaultRatio is sandbox faults injected per delivery.
	DefaultFaultRatio = 0.2
	// validationRatio is the share of HTTP deliveries sent with a payload
	// the destination refuses (no subject).
	validationRatio = 0.05
	// workers is how many worker processes poll the task queues.
	workers = 2
	// reviewSettle is how long a delivery must have been parked before the
	// reviewer looks at the destination: a request written by a worker that
	// was just killed may still be landing.
	reviewSettle = 2 * time.Second
	// RestartTimeout bounds the restart command, and then the wait for the
	// server to answer again.
	RestartTimeout = 2 * time.Minute
)

// dests are the soak's destinations. The lab's file has more, which the
// soak never delivers to.
var dests = lab.OneOfEachDedup

// budget is the soak destinations' retry budget.
var budget = lab.OutageBudget

// faultDelay is past an attempt's timeout, so a delayed answer is an
// unknown outcome.
var faultDelay = 2 * budget.AttemptTimeout

// Options configure a soak.
type Options struct {
	Deliveries int
	Seed       int64
	// Rate is deliveries started per second; it sets how long the chaos
	// lasts (Deliveries / Rate seconds).
	Rate float64
	// Kills is how many times a worker process is SIGKILLed (DefaultKills
	// is the command's default; zero is none).
	Kills int
	// FaultRatio is sandbox faults injected per delivery (zero: none;
	// the command's default is DefaultFaultRatio).
	FaultRatio float64
	// Courier is the courier binary the worker processes run.
	Courier string
	// Dir holds the run's files (Temporal's and the destinations' SQLite
	// files, logs). Empty: a temporary folder, removed after a clean run.
	Dir string
	// Log receives progress lines; nil discards them. Worker processes and
	// the dev server log to files in Dir.
	Log io.Writer
	// Logger is the soak's own Temporal client's logger; nil discards.
	Logger *slog.Logger
	// Timeout bounds the whole run.
	Timeout time.Duration
	// UseEnvironment runs the soak against the server TEMPORAL_ADDRESS
	// names, in TEMPORAL_NAMESPACE (created if missing), when it names
	// one; the worker processes get the same environment. The namespace
	// should be the soak's own: other workers polling it would take its
	// deliveries.
	UseEnvironment bool
	// RestartServer is a shell command (sh -c) run, on an external server,
	// where the soak would restart a dev server of its own: for example
	// one that SIGKILLs a server node and starts it again. It must finish
	// within RestartTimeout; a server it starts in the background should
	// have its output redirected. Empty: no server restart on an external
	// server.
	RestartServer string
	// Pause, when set, names a destination an operator pauses for part of
	// the run (from a fifth to past half of the start window) and resumes:
	// nothing may reach it while paused, and its deliveries still end
	// with one effect each.
	Pause string
}

func (o *Options) defaults() error {
	if o.Deliveries == 0 {
		o.Deliveries = DefaultDeliveries
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Deliveries < 0 || o.Deliveries > 100_000:
		return fmt.Errorf("deliveries: %d; use 1 to 100000", o.Deliveries)
	case o.Rate < 0:
		return errors.New("rate must be positive")
	case o.Kills < 0:
		return errors.New("kills must not be negative")
	case o.FaultRatio < 0:
		return errors.New("fault ratio must not be negative")
	case o.Courier == "":
		return errors.New("no courier binary to run as the workers")
	case o.RestartServer != "" && (!o.UseEnvironment || os.Getenv("TEMPORAL_ADDRESS") == ""):
		return errors.New("a server restart command is for an external server: set TEMPORAL_ADDRESS " +
			"(a dev server of the soak's own it restarts by itself)")
	}
	return nil
}

// run is one soak's state.
type run struct {
	o     Options
	dir   string
	rng   *rand.Rand
	rngMu sync.Mutex

	stack   *lab.Stack
	workers []*workerSlot
	// serverLog is temporal.log in the run's folder: the dev server's
	// output, or the restart command's.
	serverLog *os.File

	deliveries []*delivery
	byKey      map[string]*delivery

	mu  sync.Mutex
	sum Summary
}

// delivery is one planned delivery.
type delivery struct {
	in      workflows.DeliveryInput
	key     string
	dedup   contract.Dedup
	invalid bool // sent with a payload the destination refuses
	started bool
}

// Run runs a soak and returns its summary. An error means the soak could
// not run; what it found is in Summary.Violations.
func Run(ctx context.Context, o Options) (Summary, error) {
	began := time.Now()
	if err := o.defaults(); err != nil {
		return Summary{}, err
	}
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	r := &run{o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x50a4)), byKey: map[string]*delivery{}}
	r.sum.Seed, r.sum.Deliveries, r.sum.Violations = o.Seed, o.Deliveries, []string{}
	keep := o.Dir != ""
	r.dir = o.Dir
	if r.dir == "" {
		d, err := os.MkdirTemp("", "courier-soak-")
		if err != nil {
			return Summary{}, err
		}
		r.dir = d
	} else if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return Summary{}, err
	} else if earlierRun(r.dir) {
		// Its deliveries would join the earlier run's.
		return Summary{}, fmt.Errorf("%s holds an earlier soak: use an empty folder", r.dir)
	}
	r.sum.Dir = r.dir

	err := r.soak(ctx, caller)
	r.sum.WallSeconds = time.Since(began).Round(time.Millisecond).Seconds()
	if err == nil && len(r.sum.Violations) == 0 && !keep {
		_ = os.RemoveAll(r.dir)
		r.sum.Dir = ""
	}
	return r.sum, err
}

// earlierRun reports whether dir holds a soak's stores (an external
// server's run has no temporal.db).
func earlierRun(dir string) bool {
	for _, name := range []string{lab.TemporalDB, lab.SandboxDB} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Log, "soak: "+format+"\n", args...)
}

// soak runs it all within ctx; caller is the caller's context, done when
// the soak is stopped rather than out of time.
func (r *run) soak(ctx, caller context.Context) error {
	closeStack, err := r.startStack(ctx)
	if err != nil {
		return err
	}
	defer closeStack()
	r.sum.Temporal = r.stack.Temporal.Info()
	switch {
	case r.sum.Temporal.Own:
		r.sum.ServerRestart = RestartDevServer
	case r.o.RestartServer != "":
		r.sum.ServerRestart, r.sum.RestartCommand = RestartByCommand, r.o.RestartServer
	default:
		r.sum.ServerRestart = RestartNone
	}
	r.plan()
	r.logf("%d deliveries at %.1f/s over %d destinations; %d worker processes; data in %s",
		r.o.Deliveries, r.o.Rate, len(dests), workers, r.dir)
	r.logf("Temporal: %s", r.sum.Temporal)

	window := time.Duration(float64(r.o.Deliveries) / r.o.Rate * float64(time.Second))
	rctx, stopReviewer := context.WithCancel(ctx)
	reviewer := &lab.Reviewer{
		Starter: r.stack.Starter, Effects: r.stack.Effects, Name: "soak", Settle: reviewSettle,
		Only: func(key string) bool { return r.byKey[key] != nil },
		Decided: func(string, workflows.ReviewDecision) {
			r.mu.Lock()
			r.sum.ReviewsSent++
			r.mu.Unlock()
		},
		Logf: r.logf,
	}
	reviewerDone := make(chan struct{})
	go func() {
		defer close(reviewerDone)
		reviewer.Run(rctx)
	}()

	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); r.pauseAndResume(ctx, window) }()
	go func() { defer wg.Done(); r.startAll(ctx) }()
	go func() { defer wg.Done(); r.chaos(ctx, window) }()
	go func() { defer wg.Done(); r.injectFaults(ctx, window) }()
	wg.Wait()
	r.logf("all deliveries started; %d worker kills, %d server restart(s); waiting for every delivery to settle",
		r.sum.WorkerKills, r.sum.ServerRestarts)

	settled := r.awaitSettled(ctx)
	stopReviewer()
	<-reviewerDone
	if err := caller.Err(); err != nil {
		return fmt.Errorf("soak interrupted: %w", err)
	}
	if !settled {
		r.logf("not every delivery settled before the time limit")
	}
	for _, w := range r.workers {
		w.stop()
		r.sum.WorkerExits += w.unexpectedExits()
	}
	// The checks read history and visibility only: no worker needed, and
	// their own time, even when the soak's ran out.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	return r.check(cctx)
}

// startStack starts the soak's lab stack in its folder: the sandbox, the
// lab's destinations file under the soak's budget, a dev server kept in a
// SQLite file there (the chaos stops and starts it on that file), and the
// worker processes under their supervisors. The server and the workers log
// to files in the folder. The returned func stops it all.
func (r *run) startStack(ctx context.Context) (stop func(), err error) {
	var logs []*os.File
	closeLogs := func() {
		for _, f := range logs {
			_ = f.Close()
		}
	}
	for _, name := range []string{"temporal.log", "workers.log"} {
		f, err := os.OpenFile(filepath.Join(r.dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			closeLogs()
			return nil, err
		}
		logs = append(logs, f)
	}
	r.stack, err = lab.Start(ctx, lab.Options{
		Dir: r.dir, Persist: true,
		Temporal: lab.TemporalOptions{UseEnvironment: r.o.UseEnvironment, Log: logs[0], Logger: r.o.Logger},
		Destinations: func(sandboxURL, dir string) (destinations.Config, error) {
			return lab.Destinations(sandboxURL, filepath.Join(dir, lab.LedgerDB), budget), nil
		},
		Courier: r.o.Courier, Workers: workers, WorkerArgs: []string{"--log-level", "warn"}, WorkerLog: logs[1],
	})
	if err != nil {
		closeLogs()
		return nil, err
	}
	r.serverLog = logs[0]
	for i, w := range r.stack.Workers {
		r.workers = append(r.workers, superviseWorker(i+1, w, r))
	}
	return func() {
		for _, w := range r.workers {
			w.stop()
		}
		_ = r.stack.Close()
		closeLogs()
	}, nil
}

// plan draws every delivery: its destination (all four dedup kinds), and
// whether its payload is one the destination will refuse. On an external
// server the business ids carry the run's start time too: an earlier soak
// with the same seed may have left its deliveries in the namespace.
func (r *run) plan() {
	prefix := fmt.Sprintf("soak-%d", r.o.Seed)
	if !r.stack.Temporal.Own {
		prefix += "-" + strconv.FormatInt(time.Now().UnixMilli(), 36)
	}
	for i := range r.o.Deliveries {
		name := dests[r.rng.IntN(len(dests))]
		d := r.stack.Config.Destinations[name]
		id := fmt.Sprintf("%s-%05d", prefix, i)
		subject := fmt.Sprintf("soak delivery %d", i)
		dl := &delivery{dedup: d.Contract.Dedup}
		// Validation failures come from the HTTP service; the ledger takes
		// any JSON object.
		if d.Adapter == destinations.AdapterHTTP && r.rng.Float64() < validationRatio {
			subject, dl.invalid = "", true
			r.sum.Faults.Validation++
		}
		dl.in = workflows.DeliveryInput{
			Operation: opkey.Operation{Tenant: "soak", Destination: name, Operation: "create-ticket", BusinessID: id},
			Payload:   lab.Ticket(id, subject),
		}
		dl.key = opkey.Key(dl.in.Operation)
		r.deliveries = append(r.deliveries, dl)
		r.byKey[dl.key] = dl
	}
}

func (r *run) intn(n int) int {
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	return r.rng.IntN(n)
}

func (r *run) between(lo, hi time.Duration) time.Duration {
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)+1))
}

// startAll starts the deliveries at the configured rate. A start that fails
// (the server is down) is retried: a start is idempotent, and one that did
// reach the server comes back as joined.
func (r *run) startAll(ctx context.Context) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / r.o.Rate))
	defer tick.Stop()
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, d := range r.deliveries {
		select {
		case <-tick.C:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.start(ctx, d)
		}()
	}
	wg.Wait()
}

func (r *run) start(ctx context.Context, d *delivery) {
	for attempt := 1; ; attempt++ {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := r.stack.Starter.Start(sctx, d.in)
		cancel()
		var invalid *starter.InvalidRequestError
		var conflict *starter.ConflictError
		switch {
		case err == nil:
			r.mu.Lock()
			d.started = true
			if attempt > 1 {
				r.sum.StartRetries += attempt - 1
			}
			r.mu.Unlock()
			return
		case errors.As(err, &invalid), errors.As(err, &conflict):
			r.violation("start of %s refused: %v", d.in.BusinessID, err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (r *run) violation(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sum.Violations = append(r.sum.Violations, fmt.Sprintf(format, args...))
}
