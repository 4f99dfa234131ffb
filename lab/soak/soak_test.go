package soak_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/soak"
	"github.com/abde64c9/courier/starter"
)

// TestShortSoak is the CI soak: 100 deliveries, 5 worker SIGKILLs and a dev
// server restart, against the real `courier worker` binary, in about two
// minutes. `go test -short` skips it.
func TestShortSoak(t *testing.T) {
	ctx, bin := lab.RealTest(t, 5*time.Minute)
	sum, _ := runSoak(ctx, t, soak.Options{
		Deliveries: 100, Rate: 4, Kills: 5, FaultRatio: soak.DefaultFaultRatio, Seed: 1, Timeout: 4 * time.Minute, Courier: bin,
	})
	require.Equal(t, 5, sum.WorkerKills)
	require.Equal(t, 1, sum.ServerRestarts)
	require.True(t, sum.Temporal.Own)
	require.Equal(t, soak.RestartDevServer, sum.ServerRestart)
	// The chaos did something: faults hit requests and every dedup kind
	// was exercised.
	require.NotZero(t, len(sum.FaultsApplied))
	require.Len(t, sum.ByDedup, 4)
}

// runSoak runs a soak that must pass, with every delivery in a status it
// can end in, and returns its summary and log.
func runSoak(ctx context.Context, t *testing.T, o soak.Options) (soak.Summary, string) {
	var log strings.Builder
	o.Log = &log
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	sum, err := soak.Run(ctx, o)
	t.Log(log.String())
	require.NoError(t, err)
	var table strings.Builder
	require.NoError(t, sum.WriteTable(&table))
	t.Log("\n" + table.String())

	require.Empty(t, sum.Violations)
	require.Zero(t, sum.Duplicates)
	require.Zero(t, sum.Lost)
	require.Equal(t, o.Deliveries, sum.Deliveries)
	require.Equal(t, o.Deliveries, sum.Statuses["created"]+sum.Statuses["duplicate"]+sum.Statuses["delivered_by_review"]+
		sum.Statuses["rejected"]+sum.Statuses["awaiting_review"], "statuses: %v", sum.Statuses)
	return sum, log.String() + table.String()
}

// TestSoakExternalServer runs two short soaks against a server that is not
// the soak's: a second dev server the test owns, in a namespace of the
// soaks' own, with the same seed (so the second must not join the first's
// deliveries). The first has no restart command and restarts nothing; the
// second's command SIGKILLs the server, and the test starts it again on
// its SQLite file when it sees it gone, as a supervisor would.
func TestSoakExternalServer(t *testing.T) {
	ctx, bin := lab.RealTest(t, 8*time.Minute)

	dir := t.TempDir()
	srv, err := lab.StartTemporal(ctx, lab.TemporalOptions{DBFile: filepath.Join(dir, "external.db")})
	require.NoError(t, err)
	defer srv.Close()
	pidFile := filepath.Join(dir, "server.pid")
	writePID := func() error { // whole, for the restart command reading it
		if err := os.WriteFile(pidFile+".new", []byte(strconv.Itoa(srv.PID())), 0o644); err != nil {
			return err
		}
		return os.Rename(pidFile+".new", pidFile)
	}
	require.NoError(t, writePID())
	restarts, stopSupervisor := superviseServer(ctx, t, srv, writePID)
	defer stopSupervisor() // before srv.Close, or it would start the server again

	const ns = "courier-soak-external"
	t.Setenv("TEMPORAL_ADDRESS", srv.HostPort)
	t.Setenv("TEMPORAL_NAMESPACE", ns)
	soakOnce := func(deliveries, kills int, restart string) (soak.Summary, string) {
		sum, log := runSoak(ctx, t, soak.Options{
			Deliveries: deliveries, Rate: 3, Kills: kills, FaultRatio: soak.DefaultFaultRatio, Seed: 7, Timeout: 3 * time.Minute,
			Courier: bin, UseEnvironment: true, RestartServer: restart,
		})
		require.Equal(t, lab.ServerInfo{Address: srv.HostPort, Namespace: ns}, sum.Temporal)
		require.Contains(t, log, "external server (TEMPORAL_ADDRESS), namespace "+ns)
		require.Equal(t, kills, sum.WorkerKills)
		return sum, log
	}

	sum, log := soakOnce(20, 1, "")
	require.Equal(t, soak.RestartNone, sum.ServerRestart)
	require.Zero(t, sum.ServerRestarts)
	require.Contains(t, log, "no server restart")
	require.Zero(t, restarts.Load())

	// The command returns once the test has the server back: a restart
	// script that waits for its node would do the same.
	restart := fmt.Sprintf(`old=$(cat %[1]s); kill -9 "$old"; i=0
while [ "$(cat %[1]s)" = "$old" ]; do i=$((i+1)); [ $i -gt 600 ] && exit 1; sleep 0.1; done
echo "server pid $old replaced by $(cat %[1]s)"`, pidFile)
	sum, log = soakOnce(40, 2, restart)
	require.Equal(t, soak.RestartByCommand, sum.ServerRestart)
	require.Equal(t, restart, sum.RestartCommand)
	require.Equal(t, 1, sum.ServerRestarts)
	require.Equal(t, int32(1), restarts.Load())
	require.Contains(t, log, "| server pid ")

	// Everything ran in the soaks' namespace, none of it in the server's
	// default one.
	none, err := starter.New(srv.Client()).List(ctx, starter.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, none)
}

// superviseServer starts srv again, on its SQLite file, whenever its
// process dies, and calls started after each start; it counts the starts
// until stop is called.
func superviseServer(ctx context.Context, t *testing.T, srv *lab.Temporal, started func() error) (_ *atomic.Int32, stop func()) {
	var n atomic.Int32
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			if alive(srv.PID()) {
				continue
			}
			srv.StopServer() // reaps the killed process
			if err := srv.Start(ctx); err != nil {
				t.Errorf("start the server again: %v", err)
				return
			}
			n.Add(1)
			if err := started(); err != nil {
				t.Errorf("after the server's start: %v", err)
				return
			}
		}
	}()
	return &n, func() { close(quit); <-done }
}

// alive reports whether pid is a running process, not one that exited
// and waits to be reaped.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if pid == 0 || err != nil {
		return false
	}
	state := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(state) > 0 && state[0] != "Z"
}
