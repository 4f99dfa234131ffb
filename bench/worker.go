package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// The ceiling: a bare workflow with one no-op activity, on a task queue of
// its own so it never competes with deliveries for a poller.
const (
	BareTaskQueue    = "courier-bench-bare"
	BareWorkflowType = "CourierBenchBare"
	NoopActivityType = "CourierBenchNoop"
)

// BareWorkflow runs one no-op activity with the delivery's input, so both
// sides carry the same payload through history.
func BareWorkflow(ctx workflow.Context, in workflows.DeliveryInput) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var out string
	err := workflow.ExecuteActivity(ctx, NoopActivityType, in).Get(ctx, &out)
	return out, err
}

// Noop is the bare workflow's activity.
func Noop(context.Context, workflows.DeliveryInput) (string, error) { return "ok", nil }

// EnvWorker holds a WorkerConfig (JSON) when a process is the benchmark's
// worker subprocess: the command and the tests re-execute their own binary
// with it set.
const EnvWorker = "COURIER_BENCH_WORKER"

// readyLine is what a worker subprocess prints once it polls.
const readyLine = "courier-bench-worker ready"

// WorkerConfig is what a worker subprocess needs to join the benchmark.
type WorkerConfig struct {
	HostPort   string `json:"host_port,omitempty"` // empty: the standard client environment
	Namespace  string `json:"namespace,omitempty"`
	SandboxURL string `json:"sandbox_url"`
	LedgerPath string `json:"ledger_path"`
	// LogLevel of the worker's slog logger on stderr.
	LogLevel slog.Level `json:"log_level"`
}

// IsWorkerProcess reports whether this process was started as the
// benchmark's worker.
func IsWorkerProcess() bool { return os.Getenv(EnvWorker) != "" }

// ServeWorker runs the worker subprocess: Courier's workers for the bench
// destinations plus the bare workflow's, until ctx is done or its parent
// closes stdin (so a dying benchmark never leaves a worker behind).
func ServeWorker(ctx context.Context) error {
	var cfg WorkerConfig
	if err := json.Unmarshal([]byte(os.Getenv(EnvWorker)), &cfg); err != nil {
		return fmt.Errorf("%s: %w", EnvWorker, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	opts, err := clientOptions(logger, cfg.HostPort, cfg.Namespace)
	if err != nil {
		return err
	}
	// Courier's side is the production worker process, interceptor and
	// metrics included; the bare worker shares its client and options.
	p, err := worker.StartProcess(ctx, worker.ProcessOptions{
		Config: Destinations(cfg.SandboxURL, cfg.LedgerPath), Logger: logger, Client: &opts,
		Worker: WorkerOptions(),
	})
	if err != nil {
		return err
	}
	bare := sdkworker.New(p.Client(), BareTaskQueue, worker.WithDefaultPollers(WorkerOptions()))
	bare.RegisterWorkflowWithOptions(BareWorkflow, workflow.RegisterOptions{Name: BareWorkflowType})
	bare.RegisterActivityWithOptions(Noop, activity.RegisterOptions{Name: NoopActivityType})
	if err := bare.Start(); err != nil {
		_ = p.Stop()
		return fmt.Errorf("worker: start the bare worker: %w", err)
	}
	fmt.Fprintln(os.Stdout, readyLine)
	<-ctx.Done()
	bare.Stop()
	return p.Stop()
}

// WorkerOptions are the options of both sides' workers, the same for the
// ceiling and for Courier: what `courier worker` runs with.
func WorkerOptions() sdkworker.Options { return sdkworker.Options{} }

// clientOptions reads the standard client environment; hostPort, when set,
// points it at the benchmark's own dev server instead.
func clientOptions(logger *slog.Logger, hostPort, namespace string) (client.Options, error) {
	opts, err := connect.ClientOptions(logger)
	if err != nil {
		return client.Options{}, err
	}
	if hostPort != "" {
		opts.HostPort = hostPort
		opts.Namespace = namespace
	}
	return opts, nil
}

// workerProc is a running worker subprocess.
type workerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
}

// startWorker starts exe (this binary) as a worker subprocess and waits
// until it polls.
func startWorker(ctx context.Context, exe string, cfg WorkerConfig, stderr io.Writer) (*workerProc, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "bench")
	cmd.Env = append(os.Environ(), EnvWorker+"="+string(raw))
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker subprocess %s: %w", exe, err)
	}
	p := &workerProc{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	ready := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		ok := false
		for s.Scan() {
			if !ok && strings.TrimSpace(s.Text()) == readyLine {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		p.done <- cmd.Wait()
	}()
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	select {
	case ok := <-ready:
		if ok {
			return p, nil
		}
		p.stop()
		return nil, errors.New("worker subprocess exited before it was ready (its log is above)")
	case <-t.C:
	case <-ctx.Done():
	}
	p.stop()
	return nil, errors.New("worker subprocess not ready within a minute")
}

func (p *workerProc) pid() int { return p.cmd.Process.Pid }

// stop closes the worker's stdin (it drains and exits), killing it if it
// does not within 15 seconds.
func (p *workerProc) stop() {
	_ = p.stdin.Close()
	t := time.NewTimer(15 * time.Second)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
