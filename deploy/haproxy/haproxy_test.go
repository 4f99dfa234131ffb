package haproxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/workflows"
)

// The example config loads, and a real worker and `courier deliver` reach a
// real dev server through a real HAProxy that has a second node down. With
// the server stopped, the proxy still takes the worker's connections, and
// the worker's /healthz answers 503 all the same; once the server is back,
// 200 and deliveries again.
func TestProxiesWorkersAndCallers(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed (Debian: apt-get install haproxy)")
	}
	if out, err := exec.Command(haproxy, "-c", "-f", "haproxy.cfg").CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c -f haproxy.cfg: %v\n%s", err, out)
	}
	ctx, courier := lab.RealTest(t, 4*time.Minute)
	s, err := lab.Start(ctx, lab.Options{Courier: courier, Persist: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()

	addrs := make([]string, 3)
	for i := range addrs {
		addrs[i], err = lab.FreeAddr()
		require.NoError(t, err)
	}
	lb, deadNode, stats := addrs[0], addrs[1], addrs[2]
	proxy := exec.Command(haproxy, "-f", "haproxy.cfg")
	proxy.Env = append(os.Environ(), "COURIER_LB_BIND="+lb, "COURIER_FRONTEND_1="+s.Temporal.HostPort,
		"COURIER_FRONTEND_2="+deadNode, "COURIER_LB_STATS="+stats)
	proxyLog := &strings.Builder{}
	proxy.Stdout, proxy.Stderr = proxyLog, proxyLog
	require.NoError(t, proxy.Start())
	defer func() {
		_ = proxy.Process.Signal(syscall.SIGKILL)
		_ = proxy.Wait()
		if t.Failed() {
			t.Logf("haproxy:\n%s", proxyLog)
		}
	}()

	// The gRPC health check passes on the live node, the dead one is out.
	promStats := "http://" + stats + "/metrics"
	awaitLine(t, promStats, `haproxy_server_check_status{proxy="temporal_frontends",server="node1",state="L7OK"} 1`)
	awaitLine(t, promStats, `haproxy_server_status{proxy="temporal_frontends",server="node2",state="DOWN"} 1`)

	viaProxy := []string{"TEMPORAL_ADDRESS=" + lb}
	w, err := lab.StartWorker(ctx, lab.WorkerOptions{
		Courier: courier, Destinations: s.ConfigPath, Temporal: s.Temporal, Env: viaProxy,
	})
	require.NoError(t, err)
	defer w.Kill()
	deliver := func(id string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, courier, "deliver", "--destination", lab.DestHelpdesk,
			"--operation", "create-ticket", "--id", id, "--payload", string(lab.Ticket(id, "through haproxy")))
		cmd.Env = append(s.Temporal.Env(os.Environ()), viaProxy...)
		out, err := cmd.Output()
		require.NoError(t, err, "courier deliver: %s", out)
		var st workflows.DeliveryStatus
		require.NoError(t, json.Unmarshal(out, &st), "%s", out)
		require.Equal(t, workflows.StatusCreated, st.Status)
		n, err := s.Effects.Count(ctx, lab.DestHelpdesk, id)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	deliver("before")

	stopped := time.Now()
	s.Temporal.StopServer()
	body, err := w.AwaitHealthz(ctx, http.StatusServiceUnavailable, 20*time.Second)
	require.NoError(t, err)
	require.Contains(t, body, "cannot reach Temporal at "+lb)
	t.Logf("/healthz 503 %s after the server was told to stop: %s", time.Since(stopped).Round(100*time.Millisecond), body)

	started := time.Now()
	require.NoError(t, s.Temporal.Start(ctx))
	_, err = w.AwaitHealthz(ctx, http.StatusOK, 40*time.Second)
	require.NoError(t, err)
	t.Logf("/healthz 200 %s after the server was started", time.Since(started).Round(100*time.Millisecond))
	deliver("after")
}

// awaitLine polls url until its body has line, within 30 s.
func awaitLine(t *testing.T, url, line string) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(url); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if last = string(b); slices.Contains(strings.Split(last, "\n"), line) {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s has no line %s; last:\n%s", url, line, last)
}
