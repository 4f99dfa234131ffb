package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/lab"
)

// TestSmoke runs every phase for a few seconds and checks the figures are
// well-formed. It checks correctness (no lost delivery, one effect per
// operation), never the performance targets: CI machines are too noisy.
func TestSmoke(t *testing.T) {
	ctx, courier := lab.RealTest(t, 3*time.Minute)

	var progress bytes.Buffer
	o := Smoke(Options{
		Courier:  courier,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Progress: &progress,
	})
	rep, err := Run(ctx, o)
	require.NoError(t, err, progress.String())

	require.Len(t, rep.Throughput, 4*len(o.Concurrency))
	for _, s := range rep.Throughput {
		require.Zero(t, s.Errors, "%s at %d: %s", s.Side, s.Concurrency, s.FirstError)
		require.Positive(t, s.Ops, "%s at %d", s.Side, s.Concurrency)
		require.Positive(t, s.PerSecond, "%s at %d", s.Side, s.Concurrency)
		require.Positive(t, s.P50ms)
		require.LessOrEqual(t, s.P50ms, s.P95ms)
		require.LessOrEqual(t, s.P95ms, s.P99ms)
		if s.Side == SideDirect {
			require.Nil(t, s.Timings)
		} else {
			require.NotNil(t, s.Timings, s.Side)
			require.Positive(t, s.Timings.Server, s.Side)
			require.Positive(t, s.Timings.Activity, s.Side)
			require.GreaterOrEqual(t, s.Timings.Caller, s.Timings.Server, s.Side)
		}
	}
	require.Len(t, rep.Ratios, 2*len(o.Concurrency))
	for _, r := range rep.Ratios {
		require.Positive(t, r.VsBare)
		require.Positive(t, r.P99VsBare)
		require.Positive(t, r.VsDirect)
	}

	// The bare and plain sides, then the deliveries from workflow code
	// (their counts add the caller's history to the delivery's).
	require.Len(t, rep.History, 7)
	for _, h := range rep.History {
		require.Len(t, h.Types, h.Events)
		require.Len(t, h.EventBytes, h.Events)
		require.Equal(t, "WorkflowExecutionStarted", h.Types[0])
		require.Equal(t, "WorkflowExecutionCompleted", h.Types[len(h.Types)-1])
		require.Positive(t, h.Timings.Caller)
		require.Positive(t, h.Timings.Server)
		if !slices.Contains([]string{SideNexus, SideChild, SideBareNexus, SideBareChild}, h.Side) {
			require.Positive(t, h.Timings.Activity)
		}
		// What the server billed is what the history shows: nothing
		// outside the delivery's own history costs an action.
		require.Equal(t, "server", h.ActionsSource, h.Side)
		require.Equal(t, float64(h.HistoryActions), h.Actions, "%s: %v", h.Side, h.ActionKinds)
	}

	// The server's own metrics attribute its database work to each side.
	require.Len(t, rep.ServerWork, 7)
	for _, w := range rep.ServerWork {
		require.Positive(t, w.Requests["history CreateWorkflowExecution"], w.Side)
		require.Positive(t, w.Requests["visibility RecordWorkflowExecutionClosed"], w.Side)
		require.GreaterOrEqual(t, w.TotalRequests, w.Requests["history CreateWorkflowExecution"])
		require.Positive(t, w.DBMs, w.Side)
		// Courier starts with Update-with-Start, the bare side with a start.
		starts := w.Calls["StartWorkflowExecution"] + w.Calls["ExecuteMultiOperation"]
		require.Positive(t, starts, w.Side)
		require.GreaterOrEqual(t, w.TotalCalls, starts)
	}

	require.NotNil(t, rep.Storm)
	require.Zero(t, rep.Storm.Errors, rep.Storm.FirstError)
	require.Equal(t, map[string]int{"created": 1, "duplicate": o.Storm - 1}, rep.Storm.Statuses)
	require.Equal(t, 1, rep.Storm.Effects)
	require.Positive(t, rep.Storm.Seconds)
	require.Positive(t, rep.Storm.ReferenceP50ms)
	require.Positive(t, rep.Storm.BareSeconds)
	require.Positive(t, rep.Storm.BareReferenceP50ms)
	require.Positive(t, rep.Storm.ClosedMs)

	p := rep.Parked
	require.NotNil(t, p)
	require.Zero(t, p.Errors, p.FirstError)
	require.Equal(t, o.Parked, p.Parked)
	require.Equal(t, o.Parked, p.Resolved)
	require.Zero(t, p.Lost)
	require.Equal(t, o.Parked, p.Effects)
	require.Zero(t, p.ExtraEffects)
	require.Positive(t, p.WorkerRSSParkedMB)
	require.GreaterOrEqual(t, p.WorkerRSSPeakMB, p.WorkerRSSParkedMB)

	require.NotNil(t, rep.KeyFingerprint)
	require.Empty(t, rep.KeyFingerprint.Error)
	require.Positive(t, rep.KeyFingerprint.NsPerOp)
	require.Contains(t, rep.KeyFingerprint.RunsNsPerOp, rep.KeyFingerprint.NsPerOp)

	// The JSON names every target with the four fields callers compare.
	raw, err := json.Marshal(rep)
	require.NoError(t, err)
	var doc struct {
		Targets []map[string]any `json:"targets"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Len(t, doc.Targets, len(rep.Targets))
	require.GreaterOrEqual(t, len(doc.Targets), 4*len(o.Concurrency)+11)
	for _, tg := range doc.Targets {
		require.Len(t, tg, 4, "%v", tg)
		require.NotEmpty(t, tg["name"])
		require.NotEmpty(t, tg["target"])
		require.IsType(t, float64(0), tg["measured"])
		require.IsType(t, true, tg["pass"])
	}

	var md bytes.Buffer
	rep.Markdown(&md)
	for _, heading := range []string{"### Throughput and latency", "Where the time went under load", "### History events", "### Duplicate storm",
		"What each workflow asked of the server", "### Parked reviews", "### Key + fingerprint", "### Targets"} {
		require.Contains(t, md.String(), heading)
	}
	t.Log("\n" + md.String())
}

// TestExternalServer runs the throughput and history phases against a
// server that is not the benchmark's own (a second dev server the test
// starts) in a namespace of its own, told the server's PID and metrics
// address: its CPU time and its work per workflow are measured as on the
// benchmark's own server, and the report names it. Bad PIDs and metrics
// addresses are refused before anything starts.
func TestExternalServer(t *testing.T) {
	ctx, courier := lab.RealTest(t, 3*time.Minute)
	srv, err := lab.StartTemporal(ctx, lab.TemporalOptions{})
	require.NoError(t, err)
	defer srv.Close()
	const ns = "courier-bench-external" // tally writes it courier_bench_external
	t.Setenv("TEMPORAL_ADDRESS", srv.HostPort)
	t.Setenv("TEMPORAL_NAMESPACE", ns)

	var progress bytes.Buffer
	o := Smoke(Options{
		Phases: []string{PhaseThroughput, PhaseHistory}, ServerPIDs: []int{srv.PID()}, ServerMetrics: []string{srv.MetricsURL()},
		Courier:  courier,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Progress: &progress,
	})
	o.Concurrency = []int{1}
	rep, err := Run(ctx, o)
	require.NoError(t, err, progress.String())
	require.Equal(t, lab.ServerInfo{Address: srv.HostPort, Namespace: ns}, rep.Setup.Temporal)
	require.Equal(t, []int{srv.PID()}, rep.Setup.ServerPIDs)
	require.Equal(t, []string{srv.MetricsURL()}, rep.Setup.ServerMetrics)
	for _, s := range rep.Throughput {
		require.Zero(t, s.Errors, "%s: %s", s.Side, s.FirstError)
		if s.Side != SideDirect {
			require.Positive(t, s.CPUms.Server, s.Side)
		}
	}
	require.Len(t, rep.ServerWork, 7)
	for _, w := range rep.ServerWork {
		require.Positive(t, w.Requests["history CreateWorkflowExecution"], w.Side)
		require.Positive(t, w.Calls["StartWorkflowExecution"]+w.Calls["ExecuteMultiOperation"], w.Side)
		require.Positive(t, w.DBMs, w.Side)
	}
	counts := 0
	for _, tg := range rep.Targets {
		if strings.HasPrefix(tg.Name, "frontend calls") || strings.HasPrefix(tg.Name, "database requests") {
			require.True(t, tg.Pass, "%+v", tg)
			counts++
		}
	}
	require.Equal(t, 4, counts)
	var md bytes.Buffer
	rep.Markdown(&md)
	require.Contains(t, md.String(), fmt.Sprintf("Server: an external server (TEMPORAL_ADDRESS) at %s, namespace %s; its CPU time from PID %d, "+
		"its work per workflow from %s.", srv.HostPort, ns, srv.PID(), srv.MetricsURL()))
	t.Log("\n" + md.String())

	free, err := lab.FreeAddr()
	require.NoError(t, err)
	for _, bad := range []struct {
		pids    []int
		metrics []string
		want    string
	}{
		{pids: []int{1 << 30}, want: "give the PID of the Temporal server process"},
		{metrics: []string{"127.0.0.1:8000"}, want: "not an http URL"},
		{metrics: []string{"http://" + free + "/metrics"}, want: "connection refused"},
	} {
		o := o
		o.ServerPIDs, o.ServerMetrics = bad.pids, bad.metrics
		_, err := Run(ctx, o)
		require.ErrorContains(t, err, bad.want)
	}
}

// TestTicketPayloadIsTheKeyVector keeps the benchmark's payload the one the
// key vectors (and opkey's benchmark) use.
func TestTicketPayloadIsTheKeyVector(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "opkey", "testdata", "key_vectors.json"))
	require.NoError(t, err)
	var kv struct {
		Vectors []struct {
			Name    string `json:"name"`
			Payload string `json:"payload"`
		} `json:"vectors"`
	}
	require.NoError(t, json.Unmarshal(raw, &kv))
	for _, v := range kv.Vectors {
		if v.Name == "realistic-ticket-1kib" {
			require.Equal(t, v.Payload, string(ticketPayload))
			return
		}
	}
	t.Fatal("no realistic-ticket-1kib vector")
}

func TestQuantile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 50*time.Millisecond, quantile(d, 0.50))
	require.Equal(t, 99*time.Millisecond, quantile(d, 0.99))
	require.Equal(t, 100*time.Millisecond, quantile(d, 1))
	require.Equal(t, time.Millisecond, quantile(d[:1], 0.99))
	require.Zero(t, quantile(nil, 0.5))
}

// Every side must lead a round once and follow every other side once, or
// the side after the direct POSTs (the one that finds the server rested)
// would always be the same.
func TestBalancedOrder(t *testing.T) {
	for _, n := range []int{2, 4, 6} {
		first := map[int]int{}
		follows := map[[2]int]int{}
		for round := range n {
			order := balancedOrder(n, round)
			seen := map[int]bool{}
			for j, k := range order {
				require.False(t, seen[k], "n=%d round %d repeats side %d: %v", n, round, k, order)
				seen[k] = true
				if j > 0 {
					follows[[2]int{order[j-1], k}]++
				}
			}
			first[order[0]]++
		}
		require.Len(t, first, n, "n=%d: every side leads one round", n)
		require.Len(t, follows, n*(n-1), "n=%d: every ordered pair is adjacent once", n)
		for pair, c := range follows {
			require.Equal(t, 1, c, "n=%d: %v adjacent %d times", n, pair, c)
		}
	}
}

func TestParseSample(t *testing.T) {
	name, labels, value, ok := parseSample(`persistence_requests{namespace="default",operation="UpdateWorkflowExecution",service_name="history"} 42`)
	require.True(t, ok)
	require.Equal(t, "persistence_requests", name)
	require.Equal(t, map[string]string{"namespace": "default", "operation": "UpdateWorkflowExecution", "service_name": "history"}, labels)
	require.InDelta(t, 42, value, 0)

	_, labels, value, ok = parseSample(`x{a="q\"uo,te",b=""} 1.5e-3`)
	require.True(t, ok)
	require.Equal(t, map[string]string{"a": `q"uo,te`, "b": ""}, labels)
	require.InDelta(t, 0.0015, value, 1e-12)

	for _, line := range []string{"", "# HELP x y", "x 1", `x{a="1"}`, `x{a="1"} NaNa`, `x{a="1} 1`} {
		_, _, _, ok := parseSample(line)
		require.False(t, ok, line)
	}
}

// TestServerMetricForms: the tally framework (the dev server's and a
// server's default) and the OpenTelemetry one name and label the same
// counters differently; both read alike. The lines are as Temporal server
// 1.29.1 wrote them in namespace bench-ext.
func TestServerMetricForms(t *testing.T) {
	for _, tc := range []struct{ framework, requests, latency string }{
		{"tally",
			`persistence_requests{namespace="bench_ext",operation="CreateWorkflowExecution",service_name="history"} 2`,
			`persistence_latency_sum{namespace="bench_ext",operation="CreateWorkflowExecution",service_name="history"} 0.004`},
		{"opentelemetry",
			`persistence_requests_total{namespace="bench-ext",operation="CreateWorkflowExecution",otel_scope_name="temporal",otel_scope_version="",service_name="history"} 2`,
			`persistence_latency_milliseconds_sum{namespace="bench-ext",operation="CreateWorkflowExecution",otel_scope_name="temporal",otel_scope_version="",service_name="history"} 4`},
	} {
		c := newServerCounters()
		for _, line := range []string{tc.requests, tc.latency} {
			name, labels, value, ok := parseSample(line)
			require.True(t, ok, line)
			c.add(name, labels, value, "bench-ext")
		}
		require.Equal(t, map[string]float64{"history CreateWorkflowExecution": 2}, c.requests, tc.framework)
		require.InDelta(t, 0.004, c.seconds, 1e-12, tc.framework)
		require.True(t, c.persistence, tc.framework)
	}
	require.Equal(t, "courier_bench_1", tallyValue("courier-bench.1"))
}
