package worker_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/devserver"
	"github.com/abde64c9/courier/internal/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// A real `courier worker` process on a real dev server: /healthz answers
// 200, 503 with the reason soon after the server stops, and 200 again soon
// after it is back, the gauge and the log following; the worker then
// delivers as before.
func TestHealthzFollowsTheFrontend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server and a worker process")
	}
	if _, err := devserver.Binary(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	courier, err := lab.BuildCourier(t.TempDir())
	require.NoError(t, err)
	logs := &syncBuffer{}
	s, err := lab.Start(ctx, lab.Options{Courier: courier, Workers: 1, Persist: true, WorkerLog: logs})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	w := s.Workers[0]
	healthz, metrics := "http://"+w.MetricsAddr()+"/healthz", "http://"+w.MetricsAddr()+"/metrics"
	reachable := func(v float64) sample { return sample{worker.MetricTemporalReachable, map[string]string{"namespace": s.Temporal.Namespace}, v} }

	body := awaitHealthz(t, healthz, http.StatusOK, time.Now(), 0)
	require.Equal(t, "ok\n", body)
	requireEventually(t, metrics, reachable(1))

	// Seen within the check's bounds (see reachLostAfter), with room for a
	// shared machine.
	stopped := time.Now()
	s.Temporal.StopServer()
	body = awaitHealthz(t, healthz, http.StatusServiceUnavailable, stopped, 20*time.Second)
	require.Contains(t, body, "cannot reach Temporal at "+s.Temporal.HostPort+" since ")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(body), "\n")+1, "one line: %q", body)
	requireEventually(t, metrics, reachable(0))

	// Back within the client's redial backoff and one check.
	started := time.Now()
	require.NoError(t, s.Temporal.Start(ctx))
	require.Equal(t, "ok\n", awaitHealthz(t, healthz, http.StatusOK, started, 30*time.Second))
	requireEventually(t, metrics, reachable(1))
	require.Equal(t, 1, strings.Count(logs.String(), "cannot reach Temporal: /healthz answers 503"), logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), "reaching Temporal again"), logs.String())

	st, err := s.Starter.Deliver(ctx, workflows.DeliveryInput{
		Operation: opkey.Operation{Destination: lab.DestHelpdesk, Operation: "create-ticket", BusinessID: "after-outage"},
		Payload:   lab.Ticket("after-outage", "healthz"),
	})
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCreated, st.Status)
}

// awaitHealthz polls url until it answers want, within bound of since
// (zero: at once), logs how long that took and returns the body.
func awaitHealthz(t *testing.T, url string, want int, since time.Time, bound time.Duration) string {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	var last string
	for {
		resp, err := hc.Get(url)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = resp.Status + ": " + string(b)
		if resp.StatusCode == want {
			t.Logf("/healthz %d after %s: %s", want, time.Since(since).Round(100*time.Millisecond), strings.TrimSpace(string(b)))
			return string(b)
		}
		if time.Since(since) >= bound {
			t.Fatalf("/healthz did not answer %d within %s; last: %s", want, bound, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
