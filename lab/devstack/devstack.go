// Package devstack runs Courier on one machine without Docker: the lab
// stack (the pinned Temporal dev server in a SQLite file, the sandbox
// destinations, a `courier worker` process over the sample destinations
// file) with deliveries kept for 30 days and the web UI server (without
// start and reset), all keeping their state in one folder so the next run
// finds it again. It is what `courier-lab dev` runs.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/config"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/sandbox"
)

// Defaults of `courier-lab dev`. Fixed ports keep the web UI address stable.
const (
	DefaultDir         = ".courier"
	DefaultPort        = 7233
	DefaultUIPort      = 8233
	DefaultSandboxAddr = config.DevSandboxAddr
	DefaultNATSAddr    = config.DevNATSAddr
	DefaultMailAddr    = config.DevMailAddr
	DefaultMetricsAddr = "127.0.0.1:9090"
	// Namespace is the dev server's namespace.
	Namespace = "default"
	// host is where everything listens: nothing is exposed off the machine.
	host = "127.0.0.1"
)

// Files under the state folder.
const (
	TemporalDB  = lab.TemporalDB
	TemporalLog = "temporal.log"
	SandboxDB   = lab.SandboxDB
	// NATSDir keeps the NATS server's streams, MailDir the mails the sink
	// accepted (one .eml file each).
	NATSDir = "nats"
	MailDir = "mail"
)

// Options of a dev stack.
type Options struct {
	// Dir keeps the state: the server's and the sandbox's SQLite files, the
	// ledger destination's database and the server's log.
	Dir string
	// Port is the Temporal frontend's gRPC port; UIPort the web UI's.
	Port, UIPort int
	// SandboxAddr is where the sandbox destinations listen; NATSAddr the
	// NATS server of the events destination, MailAddr the mail sink of the
	// mail destination. Empty: a free loopback port.
	SandboxAddr, NATSAddr, MailAddr string
	// MetricsAddr serves the worker's Prometheus metrics; empty: off.
	MetricsAddr string
	// APIAddr serves the HTTP API (`courier api`) for tenant
	// lab.NexusTenant; empty: off.
	APIAddr string
	// Courier is the courier binary the worker process runs; empty: the
	// one beside this program, or one built into Dir (lab.FindCourier).
	Courier string
	// Logger receives the stack's client logs, and its level is the
	// worker's; nil discards.
	Logger *slog.Logger
	// WorkerLog receives the worker process's log; nil discards.
	WorkerLog io.Writer
	// Progress receives what takes a while (building the Temporal CLI); nil
	// discards.
	Progress io.Writer
}

// Stack is a running dev stack.
type Stack struct {
	o         Options
	lab       *lab.Stack
	ui        *devserver.UI
	serverLog *os.File
	metrics   string // the worker's metrics address; empty when off
	apiAddr   string // the HTTP API's address; empty when off
	api       *api
	endpoint  string // the Nexus endpoint of lab.NexusTenant
	nats      *lab.NATS
	mail      *lab.MailSink
	started   time.Time
}

// Start brings the stack up: ports are checked first, so a taken one is
// reported with the flag that moves it before anything starts.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	// The stack's options are the one copy Start fills in: the banner
	// reports the courier binary Start found, which the worker runs.
	s := &Stack{o: opts, started: time.Now()}
	o := &s.o
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Dir == "" {
		o.Dir = DefaultDir
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
		s.metrics = o.MetricsAddr
		ln.Close()
	}
	if o.APIAddr != "" {
		ln, err := net.Listen("tcp", o.APIAddr)
		if err != nil {
			return nil, fmt.Errorf("HTTP API: cannot listen on %s: %w (free it, pick another address with --api, or turn it off with --api '')", o.APIAddr, err)
		}
		s.apiAddr = o.APIAddr
		ln.Close()
	}
	// The lab listens on it, but only after making the state folder: a
	// taken address is reported before anything exists.
	ln, err := net.Listen("tcp", o.SandboxAddr)
	if err != nil {
		return nil, fmt.Errorf("sandbox: cannot listen on %s: %w (free it, or pick another address with --sandbox)", o.SandboxAddr, err)
	}
	ln.Close()
	for _, a := range []struct{ addr, flag, what string }{
		{o.NATSAddr, "--nats", "the NATS server"}, {o.MailAddr, "--mail", "the mail sink"},
	} {
		if a.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", a.addr)
		if err != nil {
			return nil, fmt.Errorf("%s: cannot listen on %s: %w (free it, or pick another address with %s)", a.what, a.addr, err, a.flag)
		}
		ln.Close()
	}

	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	if _, err := devserver.Ensure(ctx, o.Progress); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	if s.nats, err = lab.StartNATS(o.NATSAddr, filepath.Join(o.Dir, NATSDir), config.DevNATSWindow); err != nil {
		return nil, err
	}
	if s.mail, err = lab.StartMailSink(lab.MailSinkOptions{Addr: o.MailAddr, Dir: filepath.Join(o.Dir, MailDir)}); err != nil {
		return nil, err
	}
	if o.Courier == "" {
		fmt.Fprintln(o.Progress, "finding the courier binary the worker runs (building it on first use)...")
		if o.Courier, err = lab.FindCourier(filepath.Join(o.Dir, "bin")); err != nil {
			return nil, err
		}
	}
	if s.serverLog, err = os.OpenFile(filepath.Join(o.Dir, TemporalLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	fmt.Fprintf(o.Progress, "starting the Temporal dev server on %s (log: %s)...\n", s.hostPort(), s.serverLog.Name())
	ls, err := lab.Start(ctx, lab.Options{
		Dir:         o.Dir,
		Persist:     true,
		Temporal:    lab.TemporalOptions{HostPort: s.hostPort(), Log: s.serverLog, Logger: o.Logger},
		SandboxAddr: o.SandboxAddr,
		Destinations: func(sandboxURL, dir string) (destinations.Config, error) {
			cfg, err := Destinations(sandboxURL, dir)
			return atAddresses(cfg, s.nats.URL, s.mail.Addr), err
		},
	})
	if err != nil { // lab.Start has stopped what it started
		return nil, fmt.Errorf("%w (see %s)", err, s.serverLog.Name())
	}
	s.lab = ls

	if err := keepDeliveries(ctx, s.Client()); err != nil {
		return nil, err
	}
	// Other teams' workflows reach Courier through an endpoint that fixes
	// their tenant; the example callers run in a namespace of their own.
	if s.endpoint, err = lab.EnsureNexusEndpoint(ctx, s.Client(), Namespace, lab.NexusTenant); err != nil {
		return nil, err
	}
	if err := lab.EnsureCallerNamespace(ctx, s.Client(), lab.CallerNamespace); err != nil {
		return nil, err
	}
	// The dev server's bundled UI takes no settings: this one does not offer
	// to start or reset a delivery again.
	if s.ui, err = devserver.StartUI(ctx, devserver.UIOptions{
		Dir: filepath.Join(o.Dir, "ui"), Temporal: s.hostPort(), Port: o.UIPort, Log: s.serverLog,
	}); err != nil {
		return nil, fmt.Errorf("%w (see %s)", err, s.serverLog.Name())
	}

	// The worker starts once the retention is set, which it logs. It reads
	// the payload codec from the environment it inherits, as the deliver and
	// review commands do; only its server is this one.
	if s.metrics, err = definite(s.metrics); err != nil {
		return nil, err
	}
	w, err := lab.StartWorker(ctx, lab.WorkerOptions{
		Courier: o.Courier, Destinations: s.lab.ConfigPath, Temporal: s.lab.Temporal, Ledger: s.lab.Ledger,
		MetricsAddr: s.metrics, Args: []string{"--log-level", levelOf(o.Logger), "--nexus-tenant", lab.NexusTenant}, Log: o.WorkerLog,
	})
	if err != nil {
		return nil, err
	}
	s.lab.Workers = append(s.lab.Workers, w)
	if s.apiAddr != "" {
		if s.apiAddr, err = definite(s.apiAddr); err != nil {
			return nil, err
		}
		if s.api, err = s.startAPI(ctx, s.apiAddr); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// definite picks the port of an address that asks for any (port 0) just
// before the process that listens on it starts: picked at the start, it
// could be taken by one of the ports the servers started since pick for
// themselves.
func definite(addr string) (string, error) {
	if _, port, err := net.SplitHostPort(addr); addr == "" || err != nil || port != "0" {
		return addr, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// levelOf is the lowest level l logs, as `courier worker --log-level`
// takes it.
func levelOf(l *slog.Logger) string {
	for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn} {
		if l.Enabled(context.Background(), lv) {
			return strings.ToLower(lv.String())
		}
	}
	return "error"
}

// Destinations is the embedded sample destinations file, its URLs moved to
// the sandbox at sandboxURL and its SQLite files into dir; legacy's
// reviewers are the dev reviewer, whose key is kept in dir.
func Destinations(sandboxURL, dir string) (destinations.Config, error) {
	cfg, err := destinations.Parse(config.Dev)
	if err != nil {
		return destinations.Config{}, fmt.Errorf("embedded destinations.dev.json: %w", err)
	}
	from := "http://" + config.DevSandboxAddr
	for name, d := range cfg.Destinations {
		if rest, ok := strings.CutPrefix(d.URL, from); ok {
			d.URL = sandboxURL + rest
		}
		if rest, ok := strings.CutPrefix(d.LookupURL, from); ok {
			d.LookupURL = sandboxURL + rest
		}
		if d.Adapter == destinations.AdapterSQL && d.Driver == "sqlite" && !filepath.IsAbs(d.DSN) {
			d.DSN = filepath.Join(dir, filepath.Base(d.DSN))
		}
		cfg.Destinations[name] = d
	}
	return cfg, signedReviews(&cfg, dir)
}

// atAddresses points the dev file's NATS and mail destinations at the NATS
// server and the mail sink that run.
func atAddresses(cfg destinations.Config, natsURL, mailAddr string) destinations.Config {
	for name, d := range cfg.Destinations {
		if d.NATS != nil && d.NATS.URL == "nats://"+config.DevNATSAddr {
			n := *d.NATS
			n.URL = natsURL
			d.NATS = &n
		}
		if d.SMTP != nil && d.SMTP.Addr == config.DevMailAddr {
			m := *d.SMTP
			m.Addr = mailAddr
			d.SMTP = &m
		}
		cfg.Destinations[name] = d
	}
	return cfg
}

// NATS is the events destination's NATS server, to read what its stream
// kept.
func (s *Stack) NATS() *lab.NATS { return s.nats }

// Mail is the mail sink, to read what it kept.
func (s *Stack) Mail() *lab.MailSink { return s.mail }

// Retention is how long `courier-lab dev` keeps finished deliveries, and so
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
		return fmt.Errorf("port %d for %s is taken: %w\nis another `courier-lab dev` or Temporal server running? Stop it, or pick another port with %s",
			port, what, err, flag)
	}
	return ln.Close()
}

func (s *Stack) hostPort() string { return net.JoinHostPort(host, strconv.Itoa(s.o.Port)) }

// Address is the server's frontend, as TEMPORAL_ADDRESS takes it.
func (s *Stack) Address() string { return s.hostPort() }

// Client is a Temporal client of the stack's server.
func (s *Stack) Client() client.Client { return s.lab.Temporal.Client() }

// SandboxURL is the sandbox's base URL.
func (s *Stack) SandboxURL() string { return s.lab.Sandbox.URL }

// Sandbox is the running sandbox, to inspect what it stored.
func (s *Stack) Sandbox() *sandbox.Server { return s.lab.Sandbox.Server }

// UIURL is the web UI's address.
func (s *Stack) UIURL() string { return fmt.Sprintf("http://%s:%d", host, s.o.UIPort) }

// MetricsURL is the worker's metrics endpoint, empty when off.
func (s *Stack) MetricsURL() string {
	if s.metrics != "" {
		return "http://" + s.metrics + "/metrics"
	}
	return ""
}

// NexusEndpoint is the endpoint through which workflows of other
// namespaces deliver for tenant lab.NexusTenant.
func (s *Stack) NexusEndpoint() string { return s.endpoint }

// Stop stops the web UI, the worker (letting in-flight attempts finish),
// the server and the sandbox, keeping every file for the next start.
func (s *Stack) Stop() error {
	var errs []error
	if s.api != nil {
		errs = append(errs, s.api.stop())
	}
	if s.ui != nil {
		errs = append(errs, s.ui.Stop())
	}
	if s.lab != nil {
		errs = append(errs, s.lab.Close())
	}
	if s.mail != nil {
		errs = append(errs, s.mail.Close())
	}
	if s.nats != nil {
		s.nats.Close()
	}
	if s.serverLog != nil {
		errs = append(errs, s.serverLog.Close())
	}
	return errors.Join(errs...)
}

// Run starts the stack, prints the banner to out and runs until ctx is
// done (Ctrl-C or SIGTERM), then stops everything and says so in one line.
// Being stopped is how it ends, so it returns nil then, also when ctx ends
// while it starts: only a failure to start or to stop is an error.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	s, err := Start(ctx, o)
	if err != nil {
		if ctx.Err() != nil { // Start has stopped what it started
			fmt.Fprintf(out, "\n%s\n", Goodbye(o.Dir))
			return nil
		}
		return err
	}
	fmt.Fprint(out, s.Banner())
	<-ctx.Done()
	fmt.Fprintln(out) // off the line a terminal echoes ^C on
	if err := s.Stop(); err != nil {
		return fmt.Errorf("stopping: %w (the state in %s is kept)", err, o.Dir)
	}
	fmt.Fprintln(out, Goodbye(o.Dir))
	return nil
}

// Goodbye is the line `courier-lab dev` ends with once it has stopped.
func Goodbye(dir string) string {
	return fmt.Sprintf("courier-lab dev: stopped; state kept in %s, where the next start resumes", dir)
}
