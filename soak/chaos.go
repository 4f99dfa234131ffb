package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/abde64c9/courier/sandbox"
)

// workerSlot is one of the worker processes. A supervisor keeps it running:
// after the soak kills it, it comes back after the delay the kill chose; a
// process that exits by itself (it could not reach a stopped server, say)
// is started again a second later.
type workerSlot struct {
	n        int
	cmd      []string
	hostPort string
	log      io.Writer

	mu       sync.Mutex
	proc     *exec.Cmd
	running  bool
	back     time.Duration // restart delay after our kill; 0: not killed by us
	exits    int           // exits the soak did not cause
	stopping bool
	done     chan struct{} // closed when the supervisor ends
}

// start starts the process and its supervisor.
func (w *workerSlot) start() error {
	w.done = make(chan struct{})
	exited, err := w.spawn()
	if err != nil {
		return err
	}
	go w.supervise(exited)
	return nil
}

func (w *workerSlot) spawn() (<-chan struct{}, error) {
	cmd := exec.Command(w.cmd[0], w.cmd[1:]...)
	cmd.Env = workerEnv(w.hostPort)
	cmd.Stdout, cmd.Stderr = w.log, w.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %d (%s): %w", w.n, strings.Join(w.cmd, " "), err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	w.mu.Lock()
	w.proc, w.running = cmd, true
	w.mu.Unlock()
	return exited, nil
}

func (w *workerSlot) supervise(exited <-chan struct{}) {
	defer close(w.done)
	for {
		<-exited
		w.mu.Lock()
		w.running = false
		delay := w.back
		w.back = 0
		if delay == 0 && !w.stopping {
			w.exits++
			delay = time.Second
		}
		stopping := w.stopping
		w.mu.Unlock()
		if stopping {
			return
		}
		time.Sleep(delay)
		if w.isStopping() {
			return
		}
		var err error
		if exited, err = w.spawn(); err != nil {
			// The binary itself is gone: nothing a retry can fix.
			fmt.Fprintln(w.log, "soak:", err)
			return
		}
	}
}

func (w *workerSlot) isStopping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopping
}

// kill SIGKILLs the process if it runs and has it restarted after back.
func (w *workerSlot) kill(back time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.running || w.stopping {
		return false
	}
	w.back = back
	// SIGKILL: no graceful stop, attempts die mid-flight.
	return w.proc.Process.Signal(syscall.SIGKILL) == nil
}

// stop ends the supervisor and asks the process to stop gracefully.
func (w *workerSlot) stop() {
	w.mu.Lock()
	if w.stopping {
		w.mu.Unlock()
		<-w.done
		return
	}
	w.stopping = true
	proc, running := w.proc, w.running
	w.mu.Unlock()
	if running {
		_ = proc.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
			return
		case <-time.After(20 * time.Second):
			_ = proc.Process.Kill()
		}
	}
	<-w.done
}

func (w *workerSlot) unexpectedExits() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exits
}

// workerEnv is this process's environment with the Temporal address of the
// soak's dev server; any other TEMPORAL_* setting (TLS, API key, profile)
// would point the worker elsewhere.
func workerEnv(hostPort string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TEMPORAL_") })
	return append(env, "TEMPORAL_ADDRESS="+hostPort, "TEMPORAL_NAMESPACE=default")
}

// chaos kills worker processes at random moments of the window, and stops
// and restarts the dev server once in its middle.
func (r *run) chaos(ctx context.Context, window time.Duration) {
	type event struct {
		at   time.Duration
		kill bool
	}
	var events []event
	for range r.o.Kills {
		events = append(events, event{at: r.between(window/20, window*19/20), kill: true})
	}
	events = append(events, event{at: r.between(window*35/100, window*65/100)})
	slices.SortFunc(events, func(a, b event) int { return int(a.at - b.at) })

	began := time.Now()
	for _, e := range events {
		select {
		case <-time.After(time.Until(began.Add(e.at))):
		case <-ctx.Done():
			return
		}
		if e.kill {
			r.killWorker(ctx)
		} else if err := r.restartServer(ctx); err != nil {
			r.violation("dev server restart: %v", err)
			return
		}
	}
}

// killWorker SIGKILLs a running worker process, waiting a little for one
// when both are down.
func (r *run) killWorker(ctx context.Context) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		w := r.workers[r.intn(len(r.workers))]
		if w.kill(r.between(300*time.Millisecond, 2*time.Second)) {
			r.mu.Lock()
			r.sum.WorkerKills++
			n := r.sum.WorkerKills
			r.mu.Unlock()
			r.logf("kill %d: SIGKILL worker %d", n, w.n)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.logf("no worker process was up to kill")
}

func (r *run) restartServer(ctx context.Context) error {
	r.logf("stopping the dev server")
	r.server.stop()
	time.Sleep(r.between(time.Second, 3*time.Second))
	var errs []error
	for range 3 {
		err := r.server.start(ctx)
		if err == nil {
			r.mu.Lock()
			r.sum.ServerRestarts++
			r.mu.Unlock()
			r.logf("dev server started again on %s with the same SQLite file", r.server.hostPort)
			return nil
		}
		errs = append(errs, err)
		time.Sleep(2 * time.Second)
	}
	return errors.Join(errs...)
}

// injectFaults queues sandbox faults at random moments of the window, at
// random HTTP destinations. A queued fault hits whichever request comes
// next; the request logs show which ones did.
func (r *run) injectFaults(ctx context.Context, window time.Duration) {
	n := int(float64(r.o.Deliveries) * r.o.FaultRatio)
	if n == 0 {
		return
	}
	var at []time.Duration
	for range n {
		at = append(at, r.between(0, window))
	}
	slices.Sort(at)
	dests := []string{DestKey, DestLookup, DestNone}
	began := time.Now()
	for _, t := range at {
		select {
		case <-time.After(time.Until(began.Add(t))):
		case <-ctx.Done():
			return
		}
		dest := dests[r.intn(len(dests))]
		var f sandbox.Fault
		switch r.intn(4) {
		case 0:
			f = sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}
		case 1:
			f = sandbox.Fault{Kind: sandbox.FaultDelayAfterCommit, Delay: faultDelay}
		case 2:
			f = sandbox.Fault{Kind: sandbox.FaultDelayBeforeCommit, Delay: faultDelay}
		default:
			f = sandbox.Fault{Kind: sandbox.FaultFail503, Count: 2 + r.intn(3)} // a burst
		}
		if err := r.sandbox.Inject(sandboxName[dest], f); err != nil {
			r.violation("inject %s at %s: %v", f.Kind, dest, err)
			return
		}
		r.mu.Lock()
		r.sum.Faults.add(f.Kind)
		r.mu.Unlock()
	}
}
