package worker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
)

// MetricTemporalReachable is a gauge: 1 while the worker reaches its
// Temporal frontend, 0 once it has not for a while (see /healthz).
const MetricTemporalReachable = "courier_worker_temporal_reachable"

// How a worker notices a dead frontend: its pollers only retry quietly, so
// it asks the frontend's gRPC health service on its own. The check touches
// no task queue and no database, and its rate is fixed, not per delivery.
const (
	// reachEvery is often enough that a dead frontend is seen within about
	// 10 s, and rare enough to cost a frontend nothing next to the polls.
	reachEvery = 2 * time.Second
	// reachTimeout bounds one check, so a frontend that takes connections
	// but never answers counts as unreachable too.
	reachTimeout = 2 * time.Second
	// reachLostAfter spans more than one failed check: a single one is a
	// blip (a frontend restarted behind a load balancer, a connection the
	// client redials) that must not get a supervisor to restart the worker.
	reachLostAfter = 5 * time.Second
)

// reachability is what the worker knows of its frontend. It starts
// reachable: a worker that has just connected is ready at once.
type reachability struct {
	addr  string
	log   *slog.Logger
	gauge client.MetricsGauge

	mu        sync.Mutex
	lastOK    time.Time
	failSince time.Time // first failed check since lastOK; zero while checks pass
	err       error     // the latest check's error
	lost      bool
}

func newReachability(addr, namespace string, h client.MetricsHandler, log *slog.Logger, now time.Time) *reachability {
	gauge := h.WithTags(map[string]string{"namespace": namespace}).Gauge(MetricTemporalReachable)
	r := &reachability{addr: addr, log: log, gauge: gauge, lastOK: now}
	r.gauge.Update(1)
	return r
}

// watch checks the frontend every reachEvery until ctx is done.
func (r *reachability) watch(ctx context.Context, c client.Client) {
	t := time.NewTicker(reachEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, reachTimeout)
		_, err := c.CheckHealth(cctx, &client.CheckHealthRequest{})
		cancel()
		if ctx.Err() != nil {
			return // stopping: the failure is ours, not the frontend's
		}
		r.record(time.Now(), err)
	}
}

// record takes a check's outcome, logging the transitions.
func (r *reachability) record(now time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		if r.lost {
			r.log.Info("reaching Temporal again", "temporal", r.addr, "unreachable_for", now.Sub(r.failSince).Round(time.Second).String())
		}
		r.lastOK, r.failSince, r.err, r.lost = now, time.Time{}, nil, false
		r.gauge.Update(1)
		return
	}
	if r.failSince.IsZero() {
		r.failSince = now
	}
	r.err = err
	if !r.lost && now.Sub(r.lastOK) >= reachLostAfter {
		r.lost = true
		r.gauge.Update(0)
		r.log.Warn("cannot reach Temporal: /healthz answers 503 until it can", "temporal", r.addr,
			"since", r.failSince.UTC().Format(time.RFC3339), "error", err)
	}
}

// problem says why the worker is not healthy; empty while it reaches its
// frontend.
func (r *reachability) problem() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.lost {
		return ""
	}
	// One line, for a supervisor's log.
	return strings.Join(strings.Fields(fmt.Sprintf("cannot reach Temporal at %s since %s: %v",
		r.addr, r.failSince.UTC().Format(time.RFC3339), r.err)), " ")
}
