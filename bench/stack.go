package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/devserver"
	"github.com/abde64c9/courier/internal/lab"
	"github.com/abde64c9/courier/sandbox"
)

// The destinations the benchmark delivers to (testsuite's fault-case file).
const (
	DestKey          = lab.DestHelpdesk // dedup key, the sandbox's helpdesk
	DestUniqueCommit = lab.DestLedger   // dedup unique-commit, SQLite
	DestNone         = lab.DestLegacy   // dedup none, parks on an unknown outcome
)

// attemptTimeout replaces the fault cases' short attempt timeout: under load
// a loaded machine must not turn a slow answer into a retry.
const attemptTimeout = 10 * time.Second

// Destinations is the bench's destinations file for a sandbox at sandboxURL
// and a ledger database at ledgerPath.
func Destinations(sandboxURL, ledgerPath string) contract.Config {
	cfg := lab.Destinations(sandboxURL, ledgerPath, lab.CaseBudget)
	for name, d := range cfg.Destinations {
		d.Contract.Retry.AttemptTimeout = contract.Duration(attemptTimeout)
		cfg.Destinations[name] = d
	}
	return cfg
}

// stack is what one benchmark run starts: a dev server (unless
// TEMPORAL_ADDRESS names one), the sandbox on loopback, a client for the
// callers' side, and the worker subprocess.
type stack struct {
	opts      Options
	dir       string
	server    serverHandle
	hostPort  string // empty when the standard environment names the server
	namespace string
	serverPID int // 0 when the server is not ours
	// metricsURL is the server's Prometheus endpoint; empty when not ours.
	metricsURL string

	sandbox    *sandbox.Server
	http       *http.Server
	sandboxURL string
	ledgerPath string

	client client.Client
	worker *workerProc
}

type serverHandle interface{ Stop() error }

func startStack(ctx context.Context, o Options) (s *stack, err error) {
	s = &stack{opts: o}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.dir, err = os.MkdirTemp("", "courier-bench-"); err != nil {
		return s, err
	}

	external := os.Getenv("TEMPORAL_ADDRESS") != ""
	if !external {
		o.progress("starting the Temporal dev server (SQLite file in %s)", s.dir)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return s, err
		}
		metricsPort := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		srv, err := devserver.Start(ctx, devserver.Options{
			DBFile:        filepath.Join(s.dir, "temporal.db"),
			MetricsPort:   metricsPort,
			Log:           o.Log,
			ClientOptions: client.Options{Logger: sdkLogger(o.Logger)},
		})
		if err != nil {
			return s, err
		}
		s.server = srv
		srv.Client().Close() // the benchmark dials its own, like any caller
		s.hostPort, s.namespace = srv.FrontendHostPort(), "default"
		s.serverPID = childPID("temporal")
		s.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	}
	copts, err := clientOptions(o.Logger, s.hostPort, s.namespace)
	if err != nil {
		return s, err
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if s.client, err = client.DialContext(dctx, copts); err != nil {
		return s, fmt.Errorf("dial Temporal at %s: %w", copts.HostPort, err)
	}

	s.ledgerPath = filepath.Join(s.dir, "ledger.db")
	if s.sandbox, err = sandbox.Open(filepath.Join(s.dir, "sandbox.db"), sandbox.DefaultModes()); err != nil {
		return s, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return s, fmt.Errorf("sandbox: %w", err)
	}
	s.sandboxURL = "http://" + ln.Addr().String()
	s.http = &http.Server{Handler: s.sandbox.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()

	if err := s.startWorker(ctx); err != nil {
		return s, err
	}
	return s, nil
}

func (s *stack) workerConfig() WorkerConfig {
	return WorkerConfig{
		HostPort: s.hostPort, Namespace: s.namespace,
		SandboxURL: s.sandboxURL, LedgerPath: s.ledgerPath,
		LogLevel: s.opts.workerLogLevel(),
	}
}

func (s *stack) startWorker(ctx context.Context) error {
	exe := s.opts.WorkerExe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("find this binary to start the worker: %w", err)
		}
	}
	w, err := startWorker(ctx, exe, s.workerConfig(), s.opts.Log)
	if err != nil {
		return err
	}
	s.worker = w
	return nil
}

// restartWorker replaces the worker subprocess with a fresh one, so a
// memory figure is the worker's alone, not left over from earlier phases.
func (s *stack) restartWorker(ctx context.Context) error {
	if s.worker != nil {
		s.worker.stop()
		s.worker = nil
	}
	return s.startWorker(ctx)
}

func (s *stack) close() {
	if s.worker != nil {
		s.worker.stop()
	}
	if s.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.http.Shutdown(ctx)
		cancel()
	}
	if s.sandbox != nil {
		_ = s.sandbox.Close()
	}
	if s.client != nil {
		s.client.Close()
	}
	if s.server != nil {
		if err := s.server.Stop(); err != nil {
			s.opts.Logger.Warn("stop the dev server", "error", err)
		}
	}
	if s.dir != "" && !s.opts.KeepDir {
		_ = os.RemoveAll(s.dir)
	}
}

// procStat is a process's CPU time and memory, from /proc.
type procStat struct {
	cpu time.Duration
	rss int64 // bytes
	hwm int64 // peak RSS, bytes
}

// clockTick is USER_HZ, 100 on every Linux the benchmark runs on.
const clockTick = 10 * time.Millisecond

// readProc reads /proc/<pid>/stat and status; pid 0 reads nothing.
func readProc(pid int) (procStat, error) {
	if pid == 0 {
		return procStat{}, nil
	}
	var ps procStat
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ps, err
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return ps, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	ps.cpu = time.Duration(ut+st) * clockTick
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ps, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			ps.rss = kb << 10
		case "VmHWM":
			ps.hwm = kb << 10
		}
	}
	return ps, nil
}

// childPID finds this process's child whose command name is comm, or 0.
func childPID(comm string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	me := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		open, end := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(string(stat[end+1:]))
		if len(f) < 2 || string(stat[open+1:end]) != comm {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == me {
			return pid
		}
	}
	return 0
}

// discardLogger logs nothing: for a nil Options.Logger.
func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var selfPID = os.Getpid()

// workerLogLevel is info when the worker's output is shown, else warnings.
func (o Options) workerLogLevel() slog.Level {
	if o.Log != io.Discard {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}
