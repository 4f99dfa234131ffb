package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/devserver"
	"github.com/abde64c9/courier/internal/lab"
)

// courier is the courier binary the runs start as their worker, built once.
var courier string

// TestMain builds courier once for the package's runs.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "courier-bench-test-")
	if err == nil {
		courier, err = lab.BuildCourier(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// TestSmoke runs every phase for a few seconds and checks the figures are
// well-formed. It checks correctness (no lost delivery, one effect per
// operation), never the performance targets: CI machines are too noisy.
func TestSmoke(t *testing.T) {
	_, err := devserver.Binary()
	require.NoError(t, err, "the smoke benchmark needs the Temporal CLI: %s", devserver.BuildHint)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

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

	require.Len(t, rep.History, 3)
	for _, h := range rep.History {
		require.Len(t, h.Types, h.Events)
		require.Equal(t, "WorkflowExecutionStarted", h.Types[0])
		require.Equal(t, "WorkflowExecutionCompleted", h.Types[len(h.Types)-1])
		require.Positive(t, h.Timings.Caller)
		require.Positive(t, h.Timings.Server)
		require.Positive(t, h.Timings.Activity)
	}

	// The server's own metrics attribute its database work to each side.
	require.Len(t, rep.ServerWork, 3)
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

// TestTicketPayloadIsTheKeyVector keeps the benchmark's payload the one the
// key vectors (and opkey's benchmark) use.
func TestTicketPayloadIsTheKeyVector(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "opkey", "testdata", "key_vectors.json"))
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
