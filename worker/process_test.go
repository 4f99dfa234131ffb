package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// testDestinations is a helpdesk that honours keys and a legacy service
// with no dedup, both on the sandbox at base.
func testDestinations(t *testing.T, base, extra string) destinations.Config {
	t.Helper()
	retry := `"retry": {"max_attempts": 3, "initial_interval": "100ms", "attempt_timeout": "2s", "deadline": "1m"}`
	cfg, err := destinations.Parse(fmt.Appendf(nil, `{"destinations": {
		"helpdesk": {"adapter": "http", "url": "%[1]s/helpdesk/tickets", %[3]s
			"contract": {"dedup": "key", "replay_marker": {"header": "Idempotent-Replayed", "value": "true"}, %[2]s}},
		"legacy": {"adapter": "http", "url": "%[1]s/legacy/tickets",
			"contract": {"dedup": "none", %[2]s}}
	}}`, base, retry, extra))
	require.NoError(t, err)
	return cfg
}

func TestStartProcessStopsOnMissingSecret(t *testing.T) {
	cfg := testDestinations(t, "http://127.0.0.1:1",
		`"auth": {"header": "Authorization", "scheme": "Bearer", "secret_env": "COURIER_TEST_UNSET_TOKEN"},`)
	t.Setenv("COURIER_TEST_UNSET_TOKEN", "")
	// No Temporal at this address: the secret must stop it first.
	_, err := worker.StartProcess(context.Background(), worker.ProcessOptions{
		Config: cfg, Client: &client.Options{HostPort: "127.0.0.1:1"},
	})
	require.ErrorContains(t, err, `destination "helpdesk"`)
	require.ErrorContains(t, err, "COURIER_TEST_UNSET_TOKEN is not set")
}

func TestStartProcessStopsOnTakenMetricsPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, err = worker.StartProcess(context.Background(), worker.ProcessOptions{
		Config: testDestinations(t, "http://127.0.0.1:1", ""), MetricsAddr: ln.Addr().String(),
		Client: &client.Options{HostPort: "127.0.0.1:1"},
	})
	require.ErrorContains(t, err, ln.Addr().String())
	require.ErrorContains(t, err, "--metrics")
}

func TestStartProcessNamesTheUnreachableServer(t *testing.T) {
	_, err := worker.StartProcess(context.Background(), worker.ProcessOptions{
		Config: testDestinations(t, "http://127.0.0.1:1", ""), Client: &client.Options{HostPort: "127.0.0.1:1"},
	})
	require.ErrorContains(t, err, "cannot reach Temporal at 127.0.0.1:1")
	require.ErrorContains(t, err, "courier-lab dev")
}

// A real dev server, the sandbox and a worker process: after one created
// delivery and one parked for review, /metrics shows Courier's counters and
// the awaiting-review gauge, and a restarted worker, which saw none of it,
// reports the parked delivery too.
func TestMetricsAfterDeliveries(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{KeywordAttributes: workflows.SearchAttributeNames})
	require.NoError(t, err)
	defer func() { _ = srv.Stop() }()

	sb, err := sandbox.Open(filepath.Join(t.TempDir(), "sandbox.db"), sandbox.DefaultModes())
	require.NoError(t, err)
	defer sb.Close()
	web := httptest.NewServer(sb.Handler())
	defer web.Close()

	cfg := testDestinations(t, web.URL, "")
	logs := &lab.SyncBuffer{}
	start := func() *worker.Process {
		p, err := worker.StartProcess(ctx, worker.ProcessOptions{
			Config:      cfg,
			Logger:      slog.New(slog.NewJSONHandler(logs, nil)),
			Client:      &client.Options{HostPort: srv.FrontendHostPort()},
			MetricsAddr: "127.0.0.1:0",
			ReviewPoll:  200 * time.Millisecond,
		})
		require.NoError(t, err)
		return p
	}
	p := start()
	defer func() { _ = p.Stop() }()

	s := starter.New(srv.Client())
	st, parked, err := lab.CreatedAndParked(ctx, s, sb, [2]string{"m-1", "m-2"})
	require.NoError(t, err)

	metrics := "http://" + p.MetricsAddr() + "/metrics"
	for _, want := range []sample{
		{workerMetric(worker.MetricDeliveries), map[string]string{"destination": "helpdesk", "status": "created"}, 1},
		{workerMetric(worker.MetricAttempts), map[string]string{"destination": "helpdesk", "class": "created"}, 1},
		{workerMetric(worker.MetricAttempts), map[string]string{"destination": "legacy", "class": "unknown_outcome"}, 1},
		{workerMetric(worker.MetricUnknownOutcomes), map[string]string{"destination": "legacy"}, 1},
		{worker.MetricAwaitingReview, map[string]string{"destination": "legacy"}, 1},
		{worker.MetricAwaitingReview, map[string]string{"destination": "helpdesk"}, 0},
	} {
		requireEventually(t, metrics, want)
	}
	resp, err := http.Get("http://" + p.MetricsAddr() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// Workflow-side lines carry the delivery's key, destination and attempt.
	requireLogLine(t, logs, "delivery finished", map[string]any{
		"key": st.Key, "destination": "helpdesk", "attempt": 1.0, "status": "created"})
	requireLogLine(t, logs, "delivery awaiting review: a person must decide (courier review)", map[string]any{
		"key": parked.Key, "destination": "legacy", "attempt": 1.0})

	// The gauge is the cluster's count, not this process's memory.
	require.NoError(t, p.Stop())
	p = start()
	requireEventually(t, "http://"+p.MetricsAddr()+"/metrics",
		sample{worker.MetricAwaitingReview, map[string]string{"destination": "legacy"}, 1})

	_, err = s.Review(ctx, parked.Key, workflows.ReviewDecision{
		Decision: workflows.DecisionDelivered, Reviewer: "test", ResourceID: "ticket-1"})
	require.NoError(t, err)
	requireEventually(t, "http://"+p.MetricsAddr()+"/metrics",
		sample{worker.MetricAwaitingReview, map[string]string{"destination": "legacy"}, 0})
	requireEventually(t, "http://"+p.MetricsAddr()+"/metrics",
		sample{workerMetric(worker.MetricDeliveries), map[string]string{"destination": "legacy", "status": "delivered_by_review"}, 1})
}

// workerMetric is a counter's exported name.
func workerMetric(counter string) string { return counter + "_total" }

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var promLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)$`)

// value finds the sample in a Prometheus text exposition.
func (s sample) find(body string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		m := promLine.FindStringSubmatch(line)
		if m == nil || m[1] != s.name {
			continue
		}
		ok := true
		for k, v := range s.labels {
			ok = ok && strings.Contains(","+m[2]+",", fmt.Sprintf(",%s=%q,", k, v))
		}
		if ok {
			v, err := strconv.ParseFloat(m[3], 64)
			return v, err == nil
		}
	}
	return 0, false
}

func requireEventually(t *testing.T, url string, want sample) {
	t.Helper()
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if v, ok := want.find(body); ok && v == want.value {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	got, ok := want.find(body)
	t.Fatalf("metric %s%v: want %v, got %v (present: %v)", want.name, want.labels, want.value, got, ok)
}

func requireLogLine(t *testing.T, logs *lab.SyncBuffer, msg string, fields map[string]any) {
	t.Helper()
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg {
			continue
		}
		match := true
		for k, v := range fields {
			match = match && rec[k] == v
		}
		if match {
			return
		}
	}
	t.Fatalf("no log line %q with %v in:\n%s", msg, fields, logs.String())
}
