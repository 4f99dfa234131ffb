package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The state folder holds, per process, NAME.pid ("PID EXECUTABLE") and
// NAME.log. A PID counts only while /proc shows that executable under it,
// so a stale file never names someone else's process.

// procFile is the path of a process's file with this extension.
func (t *topo) procFile(name, ext string) string { return filepath.Join(t.dir, name+"."+ext) }

// openLog opens a process's log for appending.
func (t *topo) openLog(name string) (*os.File, error) {
	return os.OpenFile(t.procFile(name, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// spawn starts argv in a session of its own (it outlives this program),
// its output appended to NAME.log, and records its PID.
func (t *topo) spawn(name string, argv, env []string) (int, error) {
	logf, err := t.openLog(name)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- %s: %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = t.root, env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return pid, t.writePID(name, pid, argv[0])
}

func (t *topo) writePID(name string, pid int, exe string) error {
	abs, err := filepath.Abs(exe)
	if err != nil {
		return err
	}
	return os.WriteFile(t.procFile(name, "pid"), fmt.Appendf(nil, "%d %s\n", pid, abs), 0o644)
}

// pid is the running process NAME.pid names, or 0.
func (t *topo) pid(name string) int {
	b, err := os.ReadFile(t.procFile(name, "pid"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || !running(pid, f[1]) {
		return 0
	}
	return pid
}

// running: pid is alive (not a zombie) and runs exe.
func running(pid int, exe string) bool {
	if !alive(pid) {
		return false
	}
	got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	// /proc names the file, not a symlink to it (bin/ may be one).
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return strings.TrimSuffix(got, " (deleted)") == exe
}

// alive: the process exists and has not exited. An exited child of this
// program stays a zombie until reaped, so it is reaped here if it is one.
func alive(pid int) bool {
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// awaitExit waits up to d for pid to exit.
func awaitExit(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// stop stops NAME by its PID: SIGTERM, then SIGKILL after grace. It says
// what it did; nothing to stop is not an error.
func (t *topo) stop(name string, grace time.Duration) (string, error) {
	defer os.Remove(t.procFile(name, "pid"))
	pid := t.pid(name)
	if pid == 0 {
		return "", nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if awaitExit(pid, grace) {
		return fmt.Sprintf("stopped %s (pid %d)", name, pid), nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if !awaitExit(pid, 10*time.Second) {
		return "", fmt.Errorf("%s (pid %d) still runs after SIGKILL", name, pid)
	}
	return fmt.Sprintf("killed %s (pid %d): still running %s after SIGTERM", name, pid, grace), nil
}

// kill SIGKILLs NAME by its PID and waits until it is gone.
func (t *topo) kill(name string) (int, error) {
	pid := t.pid(name)
	if pid == 0 {
		return 0, fmt.Errorf("%s is not running (no live PID in %s)", name, t.procFile(name, "pid"))
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return pid, fmt.Errorf("kill %s (pid %d): %w", name, pid, err)
	}
	if !awaitExit(pid, 10*time.Second) {
		return pid, fmt.Errorf("%s (pid %d) still runs 10s after SIGKILL", name, pid)
	}
	return pid, nil
}

// logTail is the end of NAME.log, for an error message.
func (t *topo) logTail(name string) string {
	b, err := os.ReadFile(t.procFile(name, "log"))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}
