package worker

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// One failed check is a blip; failures past reachLostAfter make the worker
// unhealthy, with the first failure's time and the latest error; one
// success makes it healthy again. Each transition is logged once.
func TestReachabilityThreshold(t *testing.T) {
	var logs strings.Builder
	m := NewMetrics(nil)
	defer m.Close()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	r := newReachability("127.0.0.1:7233", "default", m.Handler, slog.New(slog.NewTextHandler(&logs, nil)), t0)
	require.Empty(t, r.problem(), "a worker that has just connected is healthy")

	r.record(t0.Add(reachEvery), errors.New("connection refused"))
	require.Empty(t, r.problem())
	r.record(t0.Add(reachLostAfter-time.Millisecond), errors.New("connection refused"))
	require.Empty(t, r.problem())
	r.record(t0.Add(reachLostAfter), errors.New("deadline exceeded\nsecond line"))
	require.Equal(t, "cannot reach Temporal at 127.0.0.1:7233 since 2025-01-02T03:04:07Z: deadline exceeded second line", r.problem())
	r.record(t0.Add(3*reachLostAfter), errors.New("connection refused"))
	require.Contains(t, r.problem(), "since 2025-01-02T03:04:07Z: connection refused")

	r.record(t0.Add(4*reachLostAfter), nil)
	require.Empty(t, r.problem())
	r.record(t0.Add(4*reachLostAfter+reachEvery), errors.New("connection refused"))
	require.Empty(t, r.problem(), "the threshold counts from the last success")
	require.Equal(t, 1, strings.Count(logs.String(), "cannot reach Temporal"), logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), "reaching Temporal again"), logs.String())
}

// TestMetricsBoundDestinations: a destination label the worker's file does
// not name reads "unconfigured", however many names callers make up.
func TestMetricsBoundDestinations(t *testing.T) {
	m := NewMetrics(nil, "helpdesk")
	for _, d := range []string{"helpdesk", "made-up-1", "made-up-2"} {
		m.Handler.WithTags(map[string]string{"destination": d}).WithTags(map[string]string{"status": "created"}).Counter("courier_test_total").Inc(1)
	}
	require.NoError(t, m.Close())
	rec := httptest.NewRecorder()
	m.HTTPHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	require.Contains(t, body, `courier_test_total{destination="helpdesk",status="created"} 1`)
	require.Contains(t, body, `courier_test_total{destination="unconfigured",status="created"} 2`)
	require.NotContains(t, body, "made-up")
}
