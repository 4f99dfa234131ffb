package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
)

const (
	// restartWithin bounds how long a supervisor keeps trying to start its
	// worker again: while the server is stopped, a new process cannot
	// become ready.
	restartWithin = 2 * time.Minute
	// stopGrace is how long a worker may take to stop at the end.
	stopGrace = 20 * time.Second
)

// workerSlot is one of the worker processes. A supervisor keeps it running:
// after the soak kills it, it comes back after the delay the kill chose; a
// process that exits by itself (it could not reach a stopped server, say)
// is started again a second later.
type workerSlot struct {
	n      int
	r      *run
	cancel context.CancelFunc
	done   chan struct{} // closed when the supervisor ends

	mu       sync.Mutex
	w        *lab.Worker   // the running process; nil while it is down
	back     time.Duration // restart delay after our kill; 0: not killed by us
	exits    int           // exits the soak did not cause
	stopping bool
}

// superviseWorker starts the supervisor of w, a ready worker process.
func superviseWorker(n int, w *lab.Worker, r *run) *workerSlot {
	ctx, cancel := context.WithCancel(context.Background())
	s := &workerSlot{n: n, r: r, cancel: cancel, done: make(chan struct{}), w: w}
	go s.supervise(ctx, w)
	return s
}

func (s *workerSlot) supervise(ctx context.Context, w *lab.Worker) {
	defer close(s.done)
	for {
		select {
		case <-w.Done():
		case <-ctx.Done():
			if _, err := w.Stop(stopGrace); err != nil {
				s.r.logf("worker %d: %v", s.n, err)
			}
			return
		}
		s.mu.Lock()
		s.w = nil
		delay := s.back
		s.back = 0
		if delay == 0 && !s.stopping {
			s.exits++
			delay = time.Second
		}
		s.mu.Unlock()
		if w = s.restart(ctx, w, delay); w == nil {
			return
		}
	}
}

// restart starts the exited process old again after delay, and again a
// second after each start that fails (each waits a bounded time for the
// new process to be ready), for up to restartWithin. Nil when the slot is
// stopping or gave up.
func (s *workerSlot) restart(ctx context.Context, old *lab.Worker, delay time.Duration) *lab.Worker {
	giveUp := time.Now().Add(restartWithin)
	logged := false
	for {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil
		}
		w, err := old.Restart(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			s.mu.Lock()
			s.w = w
			s.mu.Unlock()
			return w
		case time.Now().After(giveUp):
			s.r.violation("worker %d could not be started again within %s: %v", s.n, restartWithin, err)
			return nil
		}
		s.mu.Lock()
		s.exits++
		s.mu.Unlock()
		if !logged {
			s.r.logf("worker %d did not start (%v); trying again every second", s.n, err)
			logged = true
		}
		delay = time.Second
	}
}

// kill SIGKILLs the process if it runs and has it restarted after back.
func (s *workerSlot) kill(back time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil || s.stopping {
		return false
	}
	select {
	case <-s.w.Done():
		return false // exited by itself: the supervisor restarts it
	default:
	}
	s.back = back
	// SIGKILL: no graceful stop, attempts die mid-flight.
	s.w.Kill()
	return true
}

// stop ends the supervisor, stopping the process gracefully.
func (s *workerSlot) stop() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.cancel()
	<-s.done
}

func (s *workerSlot) unexpectedExits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exits
}

// chaos kills worker processes at random moments of the window, and
// restarts the server once in its middle: a dev server of the soak's own
// itself, an external one with the caller's command, if any.
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
		switch {
		case e.kill:
			r.killWorker(ctx)
		case r.sum.ServerRestart == RestartNone:
			r.logf("no server restart: the server is external and there is no command to restart it")
		case r.sum.ServerRestart == RestartByCommand:
			if err := r.restartByCommand(ctx); err != nil {
				r.violation("server restart command: %v", err)
				return
			}
		default:
			if err := r.restartServer(ctx); err != nil {
				r.violation("dev server restart: %v", err)
				return
			}
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
	r.stack.Temporal.StopServer()
	time.Sleep(r.between(time.Second, 3*time.Second))
	var errs []error
	for range 3 {
		err := r.stack.Temporal.Start(ctx)
		if err == nil {
			r.mu.Lock()
			r.sum.ServerRestarts++
			r.mu.Unlock()
			r.logf("dev server started again on %s with the same SQLite file", r.stack.Temporal.HostPort)
			return nil
		}
		errs = append(errs, err)
		time.Sleep(2 * time.Second)
	}
	return errors.Join(errs...)
}

// restartByCommand runs the caller's restart command within RestartTimeout,
// its output into temporal.log and the soak's log, then waits, as long
// again at most, for the server to answer in the soak's namespace.
func (r *run) restartByCommand(ctx context.Context) error {
	r.logf("restarting the server: sh -c %q", r.o.RestartServer)
	// A file, not a pipe: a server the command starts in the background
	// may keep writing to it after the command is done.
	from, err := r.serverLog.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, RestartTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, "sh", "-c", r.o.RestartServer)
	cmd.Stdout, cmd.Stderr = r.serverLog, r.serverLog
	began := time.Now()
	err = cmd.Run()
	took := time.Since(began).Round(time.Millisecond)
	r.echoOutput(from)
	switch {
	case cctx.Err() == context.DeadlineExceeded:
		return fmt.Errorf("%q did not finish within %s", r.o.RestartServer, RestartTimeout)
	case err != nil:
		return fmt.Errorf("%q: %w after %s (its output is in the log)", r.o.RestartServer, err, took)
	}
	r.mu.Lock()
	r.sum.ServerRestarts++
	r.mu.Unlock()
	actx, cancel := context.WithTimeout(ctx, RestartTimeout)
	defer cancel()
	for {
		_, err := r.stack.Temporal.Client().WorkflowService().DescribeNamespace(actx,
			&workflowservice.DescribeNamespaceRequest{Namespace: r.stack.Temporal.Namespace})
		if err == nil {
			r.logf("restart command done in %s; the server answered %s after it began",
				took, time.Since(began).Round(100*time.Millisecond))
			return nil
		}
		select {
		case <-actx.Done():
			// The deliveries' checks tell what the outage cost.
			r.logf("restart command done in %s; the server did not answer within %s after it: %v", took, RestartTimeout, err)
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// echoOutput copies what the restart command wrote to temporal.log, from
// offset from on, into the soak's log.
func (r *run) echoOutput(from int64) {
	f, err := os.Open(r.serverLog.Name())
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(io.NewSectionReader(f, from, maxEcho))
	for sc.Scan() {
		r.logf("  | %s", sc.Text())
	}
}

// maxEcho bounds how much of the restart command's output the soak's log
// repeats; temporal.log keeps all of it.
const maxEcho = 64 << 10

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
	services := r.sandboxServices()
	began := time.Now()
	for _, t := range at {
		select {
		case <-time.After(time.Until(began.Add(t))):
		case <-ctx.Done():
			return
		}
		svc := services[r.intn(len(services))]
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
		if err := r.stack.Sandbox.Inject(svc, f); err != nil {
			r.violation("inject %s at %s: %v", f.Kind, svc, err)
			return
		}
		r.mu.Lock()
		r.sum.Faults.add(f.Kind)
		r.mu.Unlock()
	}
}

// sandboxServices are the sandbox services behind the soak's HTTP
// destinations.
func (r *run) sandboxServices() []string {
	var out []string
	for _, name := range dests {
		if svc := lab.SandboxService(r.stack.Config.Destinations[name]); svc != "" {
			out = append(out, svc)
		}
	}
	return out
}

// pauseAndResume pauses Options.Pause from a fifth of the window to past
// its middle, through the destination's gate as an operator would, and
// counts the requests that reached it while it was paused: none may.
func (r *run) pauseAndResume(ctx context.Context, window time.Duration) {
	name := r.o.Pause
	if name == "" {
		return
	}
	if _, ok := r.stack.Config.Destinations[name]; !ok {
		r.violation("pause: the soak has no destination %q; use one of %s", name, strings.Join(r.stack.Config.Names(), ", "))
		return
	}
	began := time.Now()
	sleep := func(until time.Duration) bool {
		select {
		case <-time.After(time.Until(began.Add(until))):
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !sleep(window / 5) {
		return
	}
	if _, err := r.stack.Starter.Pause(ctx, name, gate.PauseRequest{Reason: "soak: paused mid-run", By: "soak"}); err != nil {
		r.violation("pause %s: %v", name, err)
		return
	}
	paused := time.Now()
	r.logf("paused %s", name)
	// Attempts under way when it paused may still arrive; after the
	// workers' read of the gate, nothing may.
	time.Sleep(gateclient.Fresh + time.Second)
	path := lab.SandboxService(r.stack.Config.Destinations[name])
	before := len(r.stack.Sandbox.Requests(path))
	if !sleep(window * 55 / 100) {
		return
	}
	sent := len(r.stack.Sandbox.Requests(path)) - before
	if _, err := r.stack.Starter.Resume(ctx, name, gate.ResumeRequest{By: "soak", Note: "soak: resumed"}); err != nil {
		r.violation("resume %s: %v", name, err)
		return
	}
	r.mu.Lock()
	r.sum.Paused = &PauseSummary{Destination: name, For: time.Since(paused).Round(time.Second).String(), SentWhilePaused: sent}
	r.mu.Unlock()
	r.logf("resumed %s after %s; %d requests reached it while paused", name, time.Since(paused).Round(time.Second), sent)
	if sent > 0 {
		r.violation("%d requests reached %s while it was paused", sent, name)
	}
}
