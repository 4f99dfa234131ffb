package worker_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// A real `courier worker` process on a real dev server: /healthz answers
// 200, 503 with the reason soon after the server stops, and 200 again soon
// after it is back, the gauge and the log following; the worker then
// delivers as before.
func TestHealthzFollowsTheFrontend(t *testing.T) {
	ctx, courier := lab.RealTest(t, 4*time.Minute)
	logs := &lab.SyncBuffer{}
	s, err := lab.Start(ctx, lab.Options{Courier: courier, Workers: 1, Persist: true, WorkerLog: logs})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	w := s.Workers[0]
	metrics := "http://" + w.MetricsAddr() + "/metrics"
	reachable := func(v float64) sample {
		return sample{worker.MetricTemporalReachable, map[string]string{"namespace": s.Temporal.Namespace}, v}
	}

	body, err := w.AwaitHealthz(ctx, http.StatusOK, 0)
	require.NoError(t, err)
	require.Equal(t, "ok\n", body)
	requireEventually(t, metrics, reachable(1))

	// Seen within the check's bounds (see reachLostAfter), with room for a
	// shared machine.
	stopping := time.Now()
	s.Temporal.StopServer()
	stopped := time.Now()
	body, err = w.AwaitHealthz(ctx, http.StatusServiceUnavailable, 20*time.Second)
	require.NoError(t, err)
	t.Logf("/healthz 503 %s after the server was told to stop, %s after it had stopped: %s",
		since(stopping), since(stopped), body)
	require.Contains(t, body, "cannot reach Temporal at "+s.Temporal.HostPort+" since ")
	require.NotContains(t, strings.TrimSpace(body), "\n", "one line")
	requireEventually(t, metrics, reachable(0))

	// Back within the client's redial backoff and one check.
	started := time.Now()
	require.NoError(t, s.Temporal.Start(ctx))
	serving := time.Now()
	body, err = w.AwaitHealthz(ctx, http.StatusOK, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, "ok\n", body)
	t.Logf("/healthz 200 %s after the server was started, %s after it served", since(started), since(serving))
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

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }
