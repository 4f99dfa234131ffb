// Package soak is Courier's chaos soak: many deliveries over every dedup
// kind while the sandbox injects faults, worker processes are SIGKILLed and
// restarted, and the Temporal dev server is stopped and started again on its
// SQLite file. At the end it counts the effects each destination stored in
// its own database and checks them against what Temporal says happened.
// Everything runs on loopback and is bounded in time.
package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/abde64c9/courier/activities/sqldest"
	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/devserver"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/sandbox"
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
)

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
	// Worker is the command line of one worker process serving the
	// destinations file it is given, e.g. courier worker --destinations F.
	Worker func(destinations string) []string
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
	case o.Worker == nil:
		return errors.New("no worker command")
	}
	return nil
}

// run is one soak's state.
type run struct {
	o     Options
	dir   string
	rng   *rand.Rand
	rngMu sync.Mutex

	sandbox    *sandbox.Server
	sandboxURL string
	cfg        contract.Config
	cfgPath    string

	ledger *sqldest.Adapter

	server   *server
	temporal client.Client
	starter  *starter.Client
	workers  []*workerSlot

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
	} else if _, err := os.Stat(filepath.Join(r.dir, "temporal.db")); err == nil {
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

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Log, "soak: "+format+"\n", args...)
}

// soak runs it all within ctx; caller is the caller's context, done when
// the soak is stopped rather than out of time.
func (r *run) soak(ctx, caller context.Context) error {
	stopSandbox, err := r.startSandbox()
	if err != nil {
		return err
	}
	defer stopSandbox()
	r.cfg = Destinations(r.sandboxURL, filepath.Join(r.dir, "ledger.db"))
	r.cfgPath = filepath.Join(r.dir, "destinations.json")
	if err := writeConfig(r.cfgPath, r.cfg); err != nil {
		return err
	}
	// The soak reads the ledger as any other client of that database.
	if r.ledger, err = sqldest.Open(DestUnique, r.cfg.Destinations[DestUnique]); err != nil {
		return err
	}
	defer r.ledger.Close()
	r.plan()

	if r.server, err = startServer(ctx, r.dir, r.o.Logger); err != nil {
		return err
	}
	defer r.server.stop()
	// The soak's own client outlives each server process: it reconnects.
	co, err := connect.ClientOptions(r.o.Logger)
	if err != nil {
		return err
	}
	co.HostPort, co.Namespace = r.server.hostPort, "default"
	if r.temporal, err = client.DialContext(ctx, co); err != nil {
		return fmt.Errorf("connect to the dev server: %w", err)
	}
	defer r.temporal.Close()
	r.starter = starter.New(r.temporal)

	logFile, err := os.OpenFile(filepath.Join(r.dir, "workers.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	for i := range workers {
		w := &workerSlot{n: i + 1, cmd: r.o.Worker(r.cfgPath), hostPort: r.server.hostPort, log: logFile}
		if err := w.start(); err != nil {
			return err
		}
		r.workers = append(r.workers, w)
	}
	defer func() {
		for _, w := range r.workers {
			w.stop()
		}
	}()
	r.logf("%d deliveries at %.1f/s over %d destinations; 2 worker processes; data in %s",
		r.o.Deliveries, r.o.Rate, len(r.cfg.Destinations), r.dir)

	window := time.Duration(float64(r.o.Deliveries) / r.o.Rate * float64(time.Second))
	rctx, stopReviewer := context.WithCancel(ctx)
	reviewerDone := make(chan struct{})
	go func() {
		defer close(reviewerDone)
		r.reviewer(rctx)
	}()

	var wg sync.WaitGroup
	wg.Add(3)
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
		r.sum.WorkerExits += w.unexpectedExits()
		w.stop()
	}
	// The checks read history and visibility only: no worker needed, and
	// their own time, even when the soak's ran out.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	return r.check(cctx)
}

// plan draws every delivery: its destination (all four dedup kinds), and
// whether its payload is one the destination will refuse.
func (r *run) plan() {
	names := r.cfg.Names()
	for i := range r.o.Deliveries {
		name := names[r.rng.IntN(len(names))]
		d := r.cfg.Destinations[name]
		id := fmt.Sprintf("soak-%d-%05d", r.o.Seed, i)
		subject := fmt.Sprintf("soak delivery %d", i)
		dl := &delivery{dedup: d.Contract.Dedup}
		// Validation failures come from the HTTP service; the ledger takes
		// any JSON object.
		if d.Adapter == contract.AdapterHTTP && r.rng.Float64() < validationRatio {
			subject, dl.invalid = "", true
			r.sum.Faults.Validation++
		}
		payload, _ := json.Marshal(map[string]string{"request_id": id, "subject": subject})
		dl.in = workflows.DeliveryInput{
			Operation: opkey.Operation{Tenant: "soak", Destination: name, Operation: "create-ticket", BusinessID: id},
			Payload:   payload,
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
		_, err := r.starter.Start(sctx, d.in)
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

// startSandbox serves the sandbox destinations on a loopback port.
func (r *run) startSandbox() (stop func(), err error) {
	r.sandbox, err = sandbox.Open(filepath.Join(r.dir, "sandbox.db"), sandbox.DefaultModes())
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = r.sandbox.Close()
		return nil, err
	}
	srv := &http.Server{Handler: r.sandbox.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	r.sandboxURL = "http://" + ln.Addr().String()
	return func() {
		_ = r.sandbox.Close() // ends staged delays first
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// server is the dev server, restartable on the same port and SQLite file.
type server struct {
	opts     devserver.Options
	hostPort string
	mu       sync.Mutex
	srv      *sdktest.DevServer
}

func startServer(ctx context.Context, dir string, logger *slog.Logger) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hostPort := ln.Addr().String()
	_ = ln.Close()
	log, err := os.OpenFile(filepath.Join(dir, "temporal.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	s := &server{hostPort: hostPort, opts: devserver.Options{
		DBFile: filepath.Join(dir, "temporal.db"), HostPort: hostPort, Log: log,
		ClientOptions: client.Options{Logger: sdkLogger(logger)},
	}}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *server) start(ctx context.Context) error {
	srv, err := devserver.Start(ctx, s.opts)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	return nil
}

func (s *server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Client().Close()
		_ = s.srv.Stop()
		s.srv = nil
	}
}

// writeConfig writes cfg as the workers' destinations file, and reads it
// back the way a worker will, so a soak never runs on a file workers refuse.
func writeConfig(path string, cfg contract.Config) error {
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	if _, err := contract.Load(path); err != nil {
		return fmt.Errorf("soak destinations: %w", err)
	}
	return nil
}

func sdkLogger(l *slog.Logger) sdklog.Logger { return sdklog.NewStructuredLogger(l) }
