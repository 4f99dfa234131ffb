package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// runSandbox and runDev run one command as the binary would, returning its
// error instead of printing it.
func runSandbox(ctx context.Context, args []string) error { return run(ctx, "sandbox", args) }
func runDev(ctx context.Context, args []string) error     { return run(ctx, "dev", args) }

func run(ctx context.Context, name string, args []string) error {
	_, err := execute(ctx, append([]string{name}, args...))
	return err
}

func takenPort(t *testing.T) (addr string, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), ln.Addr().(*net.TCPAddr).Port
}

func TestSandboxCommandNamesTakenAddress(t *testing.T) {
	addr, _ := takenPort(t)
	err := runSandbox(context.Background(), []string{"--addr", addr, "--db", filepath.Join(t.TempDir(), "s.db")})
	require.ErrorContains(t, err, addr)
	require.ErrorContains(t, err, "--addr")
}

// Taken ports stop `courier dev` before it starts anything, naming the
// port and the flag that moves it.
func TestDevCommandNamesTakenPorts(t *testing.T) {
	addr, port := takenPort(t)
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	dir := filepath.Join(t.TempDir(), "state")
	for flag, args := range map[string][]string{
		"--port":    {"--port", strconv.Itoa(port), "--ui-port", free(), "--metrics", ""},
		"--ui-port": {"--port", free(), "--ui-port", strconv.Itoa(port), "--metrics", ""},
		"--sandbox": {"--port", free(), "--ui-port", free(), "--sandbox", addr, "--metrics", ""},
		"--metrics": {"--port", free(), "--ui-port", free(), "--sandbox", "127.0.0.1:0", "--metrics", addr},
	} {
		t.Run(flag, func(t *testing.T) {
			err := runDev(context.Background(), append([]string{"--dir", dir}, args...))
			require.ErrorContains(t, err, strconv.Itoa(port))
			require.ErrorContains(t, err, flag)
			_, statErr := os.Stat(dir)
			require.True(t, os.IsNotExist(statErr), "nothing is created before the ports are checked")
		})
	}
}

// A bad element of a comma-separated list is named before anything starts.
func TestBenchCommandNamesBadListElements(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:7233")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--server-pid", "4100,x"}, `--server-pid: "x" is not a process id`},
		{[]string{"--server-pid", "4100,-1"}, `--server-pid: "-1" is not a process id`},
		{[]string{"--concurrency", "1,0"}, `--concurrency: "0" is not a positive number`},
	} {
		require.EqualError(t, run(context.Background(), "bench", tc.args), tc.want)
	}
}
