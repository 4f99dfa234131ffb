package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BuildCourier builds cmd/courier into dir and returns the binary's path,
// for programs (tests) that are not courier themselves.
func BuildCourier(dir string) (string, error) {
	if err := build(dir, "courier"); err != nil {
		return "", err
	}
	return filepath.Join(dir, "courier"), nil
}

// BuildPrograms builds courier and courier-lab into dir, side by side, as
// courier-lab finds the courier it runs (FindCourier).
func BuildPrograms(dir string) (courier, courierLab string, err error) {
	if err := build(dir, "courier", "courier-lab"); err != nil {
		return "", "", err
	}
	return filepath.Join(dir, "courier"), filepath.Join(dir, "courier-lab"), nil
}

// build builds the named commands of cmd/ into dir.
func build(dir string, commands ...string) error {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, c := range commands {
		args = append(args, "github.com/abde64c9/courier/cmd/"+c)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/%s: %w\n%s (run the lab from Courier's checkout, or install both programs: go install ./cmd/...)",
			strings.Join(commands, " ./cmd/"), err, out)
	}
	return nil
}

// FindCourier is the courier binary the lab's workers and clients run: the
// one installed beside this program (go install ./cmd/..., or the lab
// image), else one built from the checkout into dir (go run).
func FindCourier(dir string) (string, error) {
	if exe, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(exe), "courier")
		if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return beside, nil
		}
	}
	return BuildCourier(dir)
}

// WorkerOptions start one `courier worker` process.
type WorkerOptions struct {
	// Courier is the courier binary.
	Courier string
	// Destinations is the destinations file it serves.
	Destinations string
	// Temporal is the server it joins (see Temporal.Env).
	Temporal *Temporal
	// Env is added to its environment last, e.g. another TEMPORAL_ADDRESS.
	Env []string
	// Args are more flags, e.g. --log-level warn.
	Args []string
	// Ledger is the outcome ledger's URL (courier worker --ledger); empty:
	// none.
	Ledger string
	// MetricsAddr is where it serves /metrics and /healthz; empty picks a
	// free loopback port (the lab needs /healthz to know it is ready).
	MetricsAddr string
	// Log receives its output; nil discards it.
	Log io.Writer
	// ReadyWithin bounds the wait for /healthz; zero is 30 s.
	ReadyWithin time.Duration
	// Detach starts it in a session of its own, so that it outlives the
	// program that started it and its terminal's signals (Log must then be
	// a file, or nil).
	Detach bool
}

// Worker is a running `courier worker` process.
type Worker struct {
	o    WorkerOptions
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	err  error // from Wait, once done
	// tail keeps the end of its output, to say why it exited early; nil
	// when detached or when Log is a file, which the process then writes
	// itself (it may outlive this program, or the file's handle here).
	tail *logTail
}

// StartWorker starts `courier worker` and returns once its /healthz
// answers 200, or with an error if it exits or does not answer in time.
func StartWorker(ctx context.Context, o WorkerOptions) (*Worker, error) {
	if o.Courier == "" || o.Temporal == nil {
		return nil, errors.New("lab: a worker needs the courier binary and a Temporal server")
	}
	if o.MetricsAddr == "" {
		addr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		o.MetricsAddr = addr
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.ReadyWithin == 0 {
		o.ReadyWithin = 30 * time.Second
	}
	args := []string{"worker", "--destinations", o.Destinations, "--metrics", o.MetricsAddr}
	if o.Ledger != "" {
		args = append(args, "--ledger", o.Ledger)
	}
	args = append(args, o.Args...)
	w := &Worker{o: o, cmd: exec.Command(o.Courier, args...), done: make(chan struct{})}
	w.cmd.Env = append(o.Temporal.Env(os.Environ()), o.Env...)
	w.cmd.Stdout, w.cmd.Stderr = o.Log, o.Log
	if _, file := o.Log.(*os.File); !file && !o.Detach {
		w.tail = &logTail{}
		out := io.MultiWriter(o.Log, w.tail)
		w.cmd.Stdout, w.cmd.Stderr = out, out
	}
	if o.Detach {
		w.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start courier worker: %w", err)
	}
	go func() {
		err := w.cmd.Wait()
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		close(w.done)
	}()
	if err := w.awaitHealthy(ctx); err != nil {
		w.Kill()
		return nil, err
	}
	return w, nil
}

func (w *Worker) awaitHealthy(ctx context.Context) error {
	_, err := w.AwaitHealthz(ctx, http.StatusOK, w.o.ReadyWithin)
	return err
}

// AwaitHealthz polls the process's /healthz until it answers code, and
// returns the body; an error if the process exits first or within passes.
func (w *Worker) AwaitHealthz(ctx context.Context, code int, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	url := "http://" + w.o.MetricsAddr + "/healthz"
	hc := &http.Client{Timeout: time.Second}
	last := "no answer"
	for {
		if resp, err := hc.Get(url); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == code {
				return string(b), nil
			}
			last = resp.Status + ": " + strings.TrimSpace(string(b))
		}
		select {
		case <-w.done:
			return "", fmt.Errorf("courier worker exited before /healthz answered %d (%v); its log ends: %s", code, w.exitErr(), w.logEnd())
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("courier worker: %s did not answer %d within %s (last: %s)", url, code, within, last)
		}
	}
}

func (w *Worker) exitErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// PID is the process's id.
func (w *Worker) PID() int { return w.cmd.Process.Pid }

// MetricsAddr is where it serves /metrics and /healthz.
func (w *Worker) MetricsAddr() string { return w.o.MetricsAddr }

// Done is closed when the process has exited.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Kill ends the process at once, as a crash or a lost machine would, and
// waits for it to be gone.
func (w *Worker) Kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.done
}

// Stop asks the process to stop gracefully (SIGTERM), kills it if it has
// not exited within grace, and returns how long it took.
func (w *Worker) Stop(grace time.Duration) (time.Duration, error) {
	began := time.Now()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
		return time.Since(began), nil
	case <-time.After(grace):
		w.Kill()
		return time.Since(began), fmt.Errorf("courier worker %d still running %s after SIGTERM: killed", w.PID(), grace)
	}
}

// Restart starts a new process with the same options (a new PID); the old
// one must have exited.
func (w *Worker) Restart(ctx context.Context) (*Worker, error) {
	select {
	case <-w.done:
	default:
		return nil, fmt.Errorf("courier worker %d is still running", w.PID())
	}
	return StartWorker(ctx, w.o)
}

// logTail keeps the last bytes written to it.
type logTail struct {
	mu  sync.Mutex
	buf []byte
}

const logTailSize = 2048

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if over := len(l.buf) - logTailSize; over > 0 {
		l.buf = append(l.buf[:0], l.buf[over:]...)
	}
	return len(p), nil
}

// logEnd is the end of what the process wrote: what the tail kept, or the
// end of its log file.
func (w *Worker) logEnd() string {
	if f, ok := w.o.Log.(*os.File); ok {
		b, err := os.ReadFile(f.Name())
		if err != nil {
			return "(" + err.Error() + ")"
		}
		t := &logTail{}
		_, _ = t.Write(b)
		return t.String()
	}
	if w.tail == nil {
		return "(detached: see its log)"
	}
	return w.tail.String()
}

// String is what it kept.
func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) == 0 {
		return "(nothing)"
	}
	return strings.TrimSpace(string(l.buf))
}
