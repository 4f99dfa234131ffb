//go:build linux

package devstack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/devstack"
	"github.com/abde64c9/courier/workflows"
)

// A newcomer's first minutes, as they happen: `make dev` in a terminal in
// a fresh clone, the banner's exports and its first command pasted into
// another shell that has no courier of its own, Ctrl-C; then `make dev`
// again, which finds the delivery from before. Every Ctrl-C ends make with
// status 0 and the one-line goodbye, with no make error line.
func TestBannerPastesInAFreshClone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make dev in a fresh copy of the checkout (a minute or two); run without -short")
	}
	root, err := devserver.RepoRoot()
	require.NoError(t, err)
	bin := filepath.Join(root, "bin")
	for _, p := range []string{"temporal", filepath.Join("ui-server", "server")} {
		if _, err := os.Stat(filepath.Join(bin, p)); err != nil {
			t.Fatalf("%v: run `make temporal ui-server` in the checkout first (the fresh copy links its bin/ instead of building them again)", err)
		}
	}
	for _, tool := range []string{"git", "make", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to copy the checkout and run make dev in it: %v", tool, err)
		}
	}
	clone := copyCheckout(t, root)
	require.NoError(t, os.Symlink(bin, filepath.Join(clone, "bin")))
	flags := fmt.Sprintf("--port %d --ui-port %d --sandbox 127.0.0.1:%d --nats 127.0.0.1:%d --mail 127.0.0.1:%d --metrics 127.0.0.1:%d --api 127.0.0.1:%d",
		freePort(t), freePort(t), freePort(t), freePort(t), freePort(t), freePort(t), freePort(t))

	dev := startInTerminal(t, clone, "make", "dev", "DEV_FLAGS="+flags)
	banner := dev.awaitBanner(t, 8*time.Minute)
	t.Logf("first make dev: the banner after %s (compiling the copy, building its courier)", dev.bannerAfter.Round(time.Second))
	exports, first := pasteLines(t, banner)
	created := paste(t, append(exports, first))
	require.Equal(t, workflows.StatusCreated, created.Status, "the walkthrough's first command creates the ticket")
	courierDir := ""
	for _, e := range exports {
		if dir, ok := strings.CutPrefix(e, "export PATH="); ok {
			courierDir, _, _ = strings.Cut(dir, ":$PATH")
		}
	}
	courierDir, err = filepath.EvalSymlinks(courierDir)
	require.NoError(t, err, "the PATH export's folder\n%s", banner)
	require.Equal(t, filepath.Dir(dev.workerExe(t)), courierDir, "the PATH export names the folder of the courier the worker runs, not another\n%s", banner)
	dev.interrupt(t)

	// The state is where the goodbye says: the next start resumes from it.
	dev = startInTerminal(t, clone, "make", "dev", "DEV_FLAGS="+flags)
	banner = dev.awaitBanner(t, 3*time.Minute)
	t.Logf("second make dev: the banner after %s", dev.bannerAfter.Round(time.Second))
	exports, _ = pasteLines(t, banner)
	again := paste(t, append(exports, first))
	require.Equal(t, workflows.StatusDuplicate, again.Status, "the delivery of the first run is kept")
	require.Equal(t, created.Key, again.Key)
	dev.interrupt(t)
}

// copyCheckout copies the checkout's files as a commit of it would hold
// them (tracked, and new ones not ignored, with their uncommitted edits)
// into a temporary folder, as a fresh clone has them.
func copyCheckout(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	require.NoError(t, err, "git ls-files in %s", root)
	clone := filepath.Join(t.TempDir(), "courier")
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		from, to := filepath.Join(root, name), filepath.Join(clone, name)
		fi, err := os.Lstat(from)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.IsDir()) { // deleted in the work tree; a submodule
			continue
		}
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(from)
			require.NoError(t, err)
			require.NoError(t, os.Symlink(target, to))
			continue
		}
		b, err := os.ReadFile(from)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(to, b, fi.Mode().Perm()))
	}
	return clone
}

// terminalRun is a command running as a person runs it: in a terminal of
// its own (a pseudo-terminal), in its foreground. stdout goes to the
// terminal, stderr apart, to tell the banner and goodbye from logs.
type terminalRun struct {
	cmd         *exec.Cmd
	tty         *os.File // the terminal's master side: what the person sees and types
	screen      lab.SyncBuffer
	stderr      lab.SyncBuffer
	done        chan struct{}
	read        chan struct{}
	err         error // from Wait, once done
	began       time.Time
	bannerAfter time.Duration
}

func startInTerminal(t *testing.T, dir, name string, args ...string) *terminalRun {
	t.Helper()
	master, slave := openPTY(t)
	r := &terminalRun{cmd: exec.Command(name, args...), tty: master, done: make(chan struct{}), read: make(chan struct{}), began: time.Now()}
	r.cmd.Dir = dir
	// Not a sub-make of a make that runs the tests.
	r.cmd.Env = withoutVars(os.Environ(), "MAKEFLAGS", "MAKELEVEL", "MFLAGS")
	r.cmd.Stdin, r.cmd.Stdout, r.cmd.Stderr = slave, slave, &r.stderr
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	r.cmd.WaitDelay = 10 * time.Second
	require.NoError(t, r.cmd.Start())
	slave.Close()
	go func() { _, _ = io.Copy(&r.screen, master); close(r.read) }() // ends with EIO once every process has closed the terminal
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			killSession(r.cmd.Process.Pid)
			<-r.done
		}
		master.Close()
	})
	return r
}

// text is what the terminal showed, in lines as a person reads them.
func (r *terminalRun) text() string { return strings.ReplaceAll(r.screen.String(), "\r\n", "\n") }

// awaitBanner waits for the banner's last line and returns the screen.
func (r *terminalRun) awaitBanner(t *testing.T, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(r.text(), "./examples/order place --id") {
		select {
		case <-r.done:
			t.Fatalf("make dev exited before its banner (%v)\nterminal:\n%s\nstderr:\n%s", r.err, r.text(), r.stderr.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner within %s\nterminal:\n%s\nstderr:\n%s", within, r.text(), r.stderr.String())
		}
	}
	r.bannerAfter = time.Since(r.began)
	return r.text()
}

// interrupt types Ctrl-C and requires a clean end: status 0, the goodbye
// as the one line after the banner, and no error from make or go run.
func (r *terminalRun) interrupt(t *testing.T) {
	t.Helper()
	before := len(r.text())
	_, err := r.tty.Write([]byte{3}) // the terminal's VINTR: SIGINT to its foreground group
	require.NoError(t, err)
	select {
	case <-r.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("make dev still running 2 minutes after Ctrl-C\nterminal:\n%s\nstderr:\n%s", r.text(), r.stderr.String())
	}
	select {
	case <-r.read:
	case <-time.After(10 * time.Second):
	}
	after := strings.TrimPrefix(r.text()[before:], "^C")
	require.NoError(t, r.err, "make dev's status after Ctrl-C\nterminal after Ctrl-C:\n%s\nstderr:\n%s", after, r.stderr.String())
	var lines []string
	for _, l := range strings.Split(after, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	require.Equal(t, []string{devstack.Goodbye(devstack.DefaultDir)}, lines, "the terminal after Ctrl-C")
	for _, l := range strings.Split(r.stderr.String(), "\n") {
		require.False(t, strings.HasPrefix(l, "make") || strings.HasPrefix(l, "exit status"), "make or go run reported an error: %s", l)
	}
}

// workerExe is the courier binary the stack's worker process runs.
func (r *terminalRun) workerExe(t *testing.T) string {
	t.Helper()
	for _, pid := range sessionPIDs(r.cmd.Process.Pid) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if args := strings.Split(string(cmdline), "\x00"); len(args) > 1 && filepath.Base(args[0]) == "courier" && args[1] == "worker" {
			exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
			require.NoError(t, err)
			return exe
		}
	}
	t.Fatalf("no courier worker process under make dev")
	return ""
}

// pasteLines are the banner's export lines and the walkthrough's first
// command, as printed.
func pasteLines(t *testing.T, banner string) (exports []string, first string) {
	t.Helper()
	for _, l := range strings.Split(banner, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "export "):
			exports = append(exports, l)
		case strings.HasPrefix(l, "courier deliver ") && first == "":
			first = l
		}
	}
	require.Len(t, exports, 4, "the banner's exports\n%s", banner)
	require.NotEmpty(t, first, "the walkthrough's first command\n%s", banner)
	return exports, first
}

// paste runs lines one by one in a new shell, as a person pastes them:
// another folder, an environment with nothing of Courier's (no courier on
// PATH, no TEMPORAL_ADDRESS), and returns the delivery the last printed.
func paste(t *testing.T, lines []string) workflows.DeliveryResult {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err)
	path := filepath.Dir(goCmd) + ":/usr/bin:/bin"
	for _, dir := range filepath.SplitList(path) {
		if _, err := os.Stat(filepath.Join(dir, "courier")); err == nil {
			t.Fatalf("%s holds a courier: the pasting shell would find it without the banner's PATH export; remove it", dir)
		}
	}
	env := []string{"HOME=" + t.TempDir(), "PATH=" + path}
	for _, k := range []string{"GOCACHE", "GOPATH", "GOMODCACHE", "GOFLAGS", "GOPROXY"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-e", "-s")
	sh.Dir, sh.Env = t.TempDir(), env
	sh.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	var stderr strings.Builder
	sh.Stderr = &stderr
	out, err := sh.Output()
	require.NoError(t, err, "pasted:\n%s\nstdout:\n%s\nstderr:\n%s", strings.Join(lines, "\n"), out, stderr.String())
	var d workflows.DeliveryResult
	require.NoError(t, json.Unmarshal(out, &d), "the delivery, as JSON: %s", out)
	return d
}

func withoutVars(env []string, names ...string) []string {
	var kept []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			kept = append(kept, kv)
		}
	}
	return kept
}

// openPTY opens a pseudo-terminal: its master side, and the slave side
// for the command's standard files.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err, "a pseudo-terminal")
	var n uint32
	require.NoError(t, ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)))
	var unlock int32
	require.NoError(t, ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)))
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	return master, slave
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

// sessionPIDs are the processes of session sid: make, go run, the lab and
// everything it started, whatever their process group.
func sessionPIDs(sid int) []int {
	var pids []int
	for _, p := range lab.Processes() {
		if len(p.Stat) > 3 && p.Stat[3] == strconv.Itoa(sid) { // state ppid pgrp session ...
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// killSession kills what a failed test left running.
func killSession(sid int) {
	for range 50 {
		pids := sessionPIDs(sid)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
