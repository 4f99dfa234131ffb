package lab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ProcStat is a process's CPU time and memory, from /proc.
type ProcStat struct {
	CPU time.Duration
	RSS int64 // bytes
	HWM int64 // peak RSS, bytes
}

// clockTick is USER_HZ, 100 on every Linux the lab runs on.
const clockTick = 10 * time.Millisecond

// ReadProc reads /proc/<pid>/stat and status; pid 0 reads nothing.
func ReadProc(pid int) (ProcStat, error) {
	if pid == 0 {
		return ProcStat{}, nil
	}
	var ps ProcStat
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ps, err
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	if len(f) < 13 {
		return ps, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	ps.CPU = time.Duration(ut+st) * clockTick
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
			ps.RSS = kb << 10
		case "VmHWM":
			ps.HWM = kb << 10
		}
	}
	return ps, nil
}

// Process is a process as /proc/<pid>/stat has it: its command name, and
// the fields after the name (state, ppid, pgrp, session, ...).
type Process struct {
	PID  int
	Comm string
	Stat []string
}

// Processes lists the machine's processes now; one that ends meanwhile is
// left out.
func Processes() []Process {
	entries, _ := os.ReadDir("/proc")
	var out []Process
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
		out = append(out, Process{PID: pid, Comm: string(stat[open+1 : end]), Stat: strings.Fields(string(stat[end+1:]))})
	}
	return out
}

// childPID finds this process's child whose command name is comm, or 0.
func childPID(comm string) int {
	me := strconv.Itoa(os.Getpid())
	for _, p := range Processes() {
		if p.Comm == comm && len(p.Stat) > 1 && p.Stat[1] == me {
			return p.PID
		}
	}
	return 0
}

// SyncBuffer collects what a process writes while a test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
