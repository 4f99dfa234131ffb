// Package devstack runs Courier on one machine without Docker: the pinned
// Temporal dev server (SQLite file, Courier's search attributes, deliveries
// kept for 30 days), the web UI server (without start and reset),
// the sandbox destinations and a worker over the sample destinations file,
// all keeping their state in one folder so the next run finds it again.
// It is what `courier dev` runs.
package devstack

import (
	"context"
	"errors"
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

	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/abde64c9/courier/config"
	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/devserver"
	"github.com/abde64c9/courier/sandbox"
	"github.com/abde64c9/courier/worker"
)

// Defaults of `courier dev`. Fixed ports keep the web UI address stable.
const (
	DefaultDir         = ".courier"
	DefaultPort        = 7233
	DefaultUIPort      = 8233
	DefaultSandboxAddr = config.DevSandboxAddr
	DefaultMetricsAddr = "127.0.0.1:9090"
	// Namespace is the dev server's namespace.
	Namespace = "default"
	// host is where everything listens: nothing is exposed off the machine.
	host = "127.0.0.1"
)

// Files under the state folder.
const (
	TemporalDB  = "temporal.db"
	TemporalLog = "temporal.log"
	SandboxDB   = "sandbox.db"
)

// Options of a dev stack.
type Options struct {
	// Dir keeps the state: the server's and the sandbox's SQLite files, the
	// ledger destination's database and the server's log.
	Dir string
	// Port is the Temporal frontend's gRPC port; UIPort the web UI's.
	Port, UIPort int
	// SandboxAddr is where the sandbox destinations listen.
	SandboxAddr string
	// MetricsAddr serves the worker's Prometheus metrics; empty: off.
	MetricsAddr string
	// Logger receives the worker's and the sandbox's logs; nil discards.
	Logger *slog.Logger
	// Progress receives what takes a while (building the Temporal CLI); nil
	// discards.
	Progress io.Writer
	// Command is how the printed examples invoke courier; empty: guessed.
	Command string
}

// Stack is a running dev stack.
type Stack struct {
	o          Options
	server     *testsuite.DevServer
	ui         *devserver.UI
	serverLog  *os.File
	sandbox    *sandbox.Server
	sandboxWeb *http.Server
	sandboxURL string
	worker     *worker.Process
	started    time.Time
}

// Start brings the stack up: ports are checked first, so a taken one is
// reported with the flag that moves it before anything starts.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.Command == "" {
		o.Command = guessCommand()
	}
	for _, p := range []struct {
		port int
		flag string
	}{{o.Port, "--port"}, {o.UIPort, "--ui-port"}} {
		if p.port <= 0 || p.port > 65535 {
			return nil, fmt.Errorf("%s %d: not a port number", p.flag, p.port)
		}
	}
	if o.Port == o.UIPort {
		return nil, fmt.Errorf("--port and --ui-port are both %d: pick two ports", o.Port)
	}
	if err := checkFree(o.Port, "--port", "the Temporal server (gRPC)"); err != nil {
		return nil, err
	}
	if err := checkFree(o.UIPort, "--ui-port", "the Temporal web UI"); err != nil {
		return nil, err
	}
	if o.MetricsAddr != "" {
		// The worker listens on it last, after the server has started: fail
		// before that instead.
		ln, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("worker metrics: cannot listen on %s: %w (free it, pick another address with --metrics, or turn metrics off with --metrics '')", o.MetricsAddr, err)
		}
		ln.Close()
	}

	s := &Stack{o: o, started: time.Now()}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	// The sandbox listens first: holding its port is the only sure check.
	ln, err := net.Listen("tcp", o.SandboxAddr)
	if err != nil {
		return nil, fmt.Errorf("sandbox: cannot listen on %s: %w (free it, or pick another address with --sandbox)", o.SandboxAddr, err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		ln.Close()
		return nil, fmt.Errorf("state folder: %w", err)
	}
	if s.sandbox, err = sandbox.Open(filepath.Join(o.Dir, SandboxDB), sandbox.DefaultModes()); err != nil {
		ln.Close()
		return nil, err
	}
	s.sandboxURL = "http://" + ln.Addr().String()
	s.sandboxWeb = &http.Server{Handler: s.sandbox.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.sandboxWeb.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Logger.Error("sandbox: serve", "error", err)
		}
	}()
	cfg, err := Destinations(s.sandboxURL, o.Dir)
	if err != nil {
		return nil, err
	}

	if _, err := devserver.Ensure(ctx, o.Progress); err != nil {
		return nil, err
	}
	if s.serverLog, err = os.OpenFile(filepath.Join(o.Dir, TemporalLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	fmt.Fprintf(o.Progress, "starting the Temporal dev server on %s (log: %s)...\n", s.hostPort(), s.serverLog.Name())
	if s.server, err = devserver.Start(ctx, devserver.Options{
		DBFile:        filepath.Join(o.Dir, TemporalDB),
		HostPort:      s.hostPort(),
		Log:           s.serverLog,
		ClientOptions: client.Options{Namespace: Namespace, Logger: sdklog.NewStructuredLogger(o.Logger)},
	}); err != nil {
		return nil, fmt.Errorf("%w (see %s)", err, s.serverLog.Name())
	}

	if err := keepDeliveries(ctx, s.server.Client()); err != nil {
		return nil, err
	}
	// The dev server's bundled UI takes no settings: this one does not offer
	// to start or reset a delivery again.
	if s.ui, err = devserver.StartUI(ctx, devserver.UIOptions{
		Dir: filepath.Join(o.Dir, "ui"), Temporal: s.hostPort(), Port: o.UIPort, Log: s.serverLog,
	}); err != nil {
		return nil, fmt.Errorf("%w (see %s)", err, s.serverLog.Name())
	}

	// The worker shares the deliver and review commands' payload codec (from
	// the environment), but never their server: it is this one.
	env, err := connect.ClientOptions(o.Logger)
	if err != nil {
		return nil, err
	}
	if s.worker, err = worker.StartProcess(ctx, worker.ProcessOptions{
		Config:      cfg,
		Logger:      o.Logger,
		Client:      &client.Options{HostPort: s.hostPort(), Namespace: Namespace, DataConverter: env.DataConverter},
		MetricsAddr: o.MetricsAddr,
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// Destinations is the embedded sample destinations file, its URLs moved to
// the sandbox at sandboxURL and its SQLite files into dir.
func Destinations(sandboxURL, dir string) (contract.Config, error) {
	cfg, err := contract.Parse(config.Dev)
	if err != nil {
		return contract.Config{}, fmt.Errorf("embedded destinations.dev.json: %w", err)
	}
	from := "http://" + config.DevSandboxAddr
	for name, d := range cfg.Destinations {
		if rest, ok := strings.CutPrefix(d.URL, from); ok {
			d.URL = sandboxURL + rest
		}
		if rest, ok := strings.CutPrefix(d.LookupURL, from); ok {
			d.LookupURL = sandboxURL + rest
		}
		if d.Adapter == contract.AdapterSQL && d.Driver == "sqlite" && !filepath.IsAbs(d.DSN) {
			d.DSN = filepath.Join(dir, filepath.Base(d.DSN))
		}
		cfg.Destinations[name] = d
	}
	return cfg, nil
}

// Retention is how long `courier dev` keeps finished deliveries, and so
// how long it recognises a repeated request as the same delivery.
const Retention = 30 * 24 * time.Hour

// keepDeliveries sets the namespace's retention to Retention when it is
// shorter (the dev server creates it with one day).
func keepDeliveries(ctx context.Context, c client.Client) error {
	desc, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: Namespace})
	if err != nil {
		return fmt.Errorf("describe namespace %s: %w", Namespace, err)
	}
	if desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration() >= Retention {
		return nil
	}
	_, err = c.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
		Namespace: Namespace,
		Config:    &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(Retention)},
	})
	if err != nil {
		return fmt.Errorf("set the retention of namespace %s to %s: %w", Namespace, Retention, err)
	}
	return nil
}

func checkFree(port int, flag, what string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d for %s is taken: %w\nis another `courier dev` or Temporal server running? Stop it, or pick another port with %s",
			port, what, err, flag)
	}
	return ln.Close()
}

func (s *Stack) hostPort() string { return net.JoinHostPort(host, strconv.Itoa(s.o.Port)) }

// Client is a Temporal client of the stack's server.
func (s *Stack) Client() client.Client { return s.worker.Client() }

// SandboxURL is the sandbox's base URL.
func (s *Stack) SandboxURL() string { return s.sandboxURL }

// Sandbox is the running sandbox, to inspect what it stored.
func (s *Stack) Sandbox() *sandbox.Server { return s.sandbox }

// UIURL is the web UI's address.
func (s *Stack) UIURL() string { return fmt.Sprintf("http://%s:%d", host, s.o.UIPort) }

// MetricsURL is the worker's metrics endpoint, empty when off.
func (s *Stack) MetricsURL() string {
	if a := s.worker.MetricsAddr(); a != "" {
		return "http://" + a + "/metrics"
	}
	return ""
}

// Stop stops the worker (letting in-flight attempts finish), the sandbox
// and the server, keeping every file for the next start.
func (s *Stack) Stop() error {
	var errs []error
	if s.worker != nil {
		errs = append(errs, s.worker.Stop())
	}
	if s.ui != nil {
		errs = append(errs, s.ui.Stop())
	}
	if s.sandboxWeb != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		errs = append(errs, s.sandboxWeb.Shutdown(ctx))
	}
	if s.sandbox != nil {
		errs = append(errs, s.sandbox.Close())
	}
	if s.server != nil {
		s.server.Client().Close()
		// Ctrl-C in a terminal reaches the server too, which may have
		// exited by now: that is a clean stop as well.
		if err := s.server.Stop(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("stop the Temporal dev server: %w", err))
		}
	}
	if s.serverLog != nil {
		errs = append(errs, s.serverLog.Close())
	}
	return errors.Join(errs...)
}

// Run starts the stack, prints the banner to out and runs until ctx is done.
func Run(ctx context.Context, o Options, out io.Writer) error {
	s, err := Start(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprint(out, s.Banner())
	<-ctx.Done()
	fmt.Fprintln(out, "\nstopping...")
	if err := s.Stop(); err != nil {
		return err
	}
	fmt.Fprintf(out, "stopped; the deliveries are kept in %s for the next `courier dev`\n", s.o.Dir)
	return nil
}
