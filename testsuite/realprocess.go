package testsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/abde64c9/courier/activities/sqldest"
	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/internal/lab/faults"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// EnvRealProcess names the role of a helper process a RealLab started:
// "worker" or "deliver". A program that can be a RealLab's Process checks
// it first (see RealProcessRole).
const EnvRealProcess = "COURIER_REAL_PROCESS"

// Helper process roles and their inputs.
const (
	roleWorker  = "worker"
	roleDeliver = "deliver"
	// envDestinations is the destinations file a worker process serves.
	envDestinations = "COURIER_REAL_DESTINATIONS"
	// envExitAfterCommit makes a worker process exit with this code right
	// after its first SQL commit, before the attempt reports anything.
	envExitAfterCommit = "COURIER_REAL_EXIT_AFTER_COMMIT"
	// envInput is the delivery a deliver process asks for (JSON).
	envInput = "COURIER_REAL_INPUT"
	// envParentPipe: stdin is a pipe from the lab; its end means the lab is
	// gone, and a helper must not outlive it (a stray worker would take the
	// task queue's work).
	envParentPipe = "COURIER_REAL_PARENT_PIPE"
)

// RealProcessRole is this process's helper role, empty when it is not one.
func RealProcessRole() string { return os.Getenv(EnvRealProcess) }

// RealProcessMain runs this process's helper role: a Courier worker until
// ctx is done (or its fault hook exits the process), or one delivery request
// whose status it prints on stdout as JSON. Logs go to stderr.
func RealProcessMain(ctx context.Context) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if os.Getenv(envParentPipe) != "" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
	switch role := RealProcessRole(); role {
	case roleWorker:
		return workerProcess(ctx, logger)
	case roleDeliver:
		return deliverProcess(ctx, logger)
	default:
		return fmt.Errorf("%s=%q: use %s or %s", EnvRealProcess, role, roleWorker, roleDeliver)
	}
}

func workerProcess(ctx context.Context, logger *slog.Logger) error {
	cfg, err := contract.Load(os.Getenv(envDestinations))
	if err != nil {
		return err
	}
	ads, err := worker.OpenAdapters(cfg)
	if err != nil {
		return err
	}
	defer ads.Close()
	if s := os.Getenv(envExitAfterCommit); s != "" {
		code, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%s=%q: want an exit code: %w", envExitAfterCommit, s, err)
		}
		for name, ad := range ads.ByName {
			if _, ok := ad.(*sqldest.Adapter); ok {
				crashing := faults.Wrap(ad)
				crashing.AfterEffect = func() { os.Exit(code) }
				ads.ByName[name] = crashing
			}
		}
	}
	c, err := dialEnv(ctx, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	ws := worker.New(c, cfg, worker.NewActivities(c, cfg, ads), sdkworker.Options{
		// A crashed worker leaves its cached workflows on its sticky queue;
		// a short timeout hands them to the next worker quickly.
		StickyScheduleToStartTimeout: time.Second,
	})
	return worker.Run(ctx, ws)
}

func deliverProcess(ctx context.Context, logger *slog.Logger) error {
	var in workflows.DeliveryInput
	if err := json.Unmarshal([]byte(os.Getenv(envInput)), &in); err != nil {
		return fmt.Errorf("%s: want a delivery input as JSON: %w", envInput, err)
	}
	c, err := dialEnv(ctx, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := starter.New(c).Deliver(ctx, in)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(st)
}

// dialEnv connects with Temporal's standard client environment.
func dialEnv(ctx context.Context, logger *slog.Logger) (client.Client, error) {
	opts, err := connect.ClientOptions(logger)
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", opts.HostPort, err)
	}
	return c, nil
}

// process is a helper process a case started.
type process struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	done   chan struct{}
	err    error
}

// spawn starts this program again in a helper role, with env added to its
// environment.
func (l *RealLab) spawn(role string, env ...string) (*process, error) {
	if len(l.Process) == 0 {
		return nil, errors.New("this lab has no helper process command (RealLab.Process)")
	}
	cmd := exec.Command(l.Process[0], l.Process[1:]...)
	cmd.Env = append(os.Environ(), EnvRealProcess+"="+role, envParentPipe+"=1")
	if l.HostPort != "" {
		cmd.Env = append(cmd.Env, "TEMPORAL_ADDRESS="+l.HostPort)
	}
	if l.Namespace != "" {
		cmd.Env = append(cmd.Env, "TEMPORAL_NAMESPACE="+l.Namespace)
	}
	cmd.Env = append(cmd.Env, env...)
	p := &process{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout = &p.stdout
	cmd.Stderr = l.Log
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	// The pipe's write end stays open in this process (cmd holds it) until
	// the helper exits or this process dies: see envParentPipe.
	if _, err := cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s process: %w", role, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// wait waits for the process to exit and returns its exit code.
func (p *process) wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		p.kill()
		return -1, fmt.Errorf("process %d did not exit: %w", p.cmd.Process.Pid, ctx.Err())
	}
	var exit *exec.ExitError
	if p.err != nil && !errors.As(p.err, &exit) {
		return -1, p.err
	}
	return p.cmd.ProcessState.ExitCode(), nil
}

// stop asks the process to stop, and kills it if it does not in time.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.kill()
	}
}

func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// writeDestinations writes cfg as a destinations file for a worker process.
func writeDestinations(path string, cfg contract.Config) error {
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
