package gateclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/internal/text"
	"github.com/abde64c9/courier/internal/visibility"
	"github.com/abde64c9/courier/workflows"
)

// How a worker keeps its copy of the gates: a background loop lists every
// gate (their memos, from visibility) in one call each refreshEvery, so an
// attempt reads its copy without a call to the server, and a destination
// that never had a gate costs nothing. Only a copy older than Fresh
// (the loop is behind) is read on the attempt's path.
const (
	refreshEvery = time.Second
	// defaultReleaseRate paces a release for a destination with no rate limit.
	defaultReleaseRate = 10
)

// MetricState is a gauge per destination and gate state: 1 for the state
// the worker last read, 0 for the others.
const MetricState = "courier_destination_state"

// Fresh is how long a pause or resume takes to reach every worker.
const Fresh = 2 * refreshEvery

// Cache is the worker's side of its destinations' gates: it reads each
// gate's memo, asks for the probe by update, reports attempts by
// signal-with-start, and releases held deliveries by batch signal.
type Cache struct {
	c         client.Client
	namespace string
	dc        converter.DataConverter
	cfg       destinations.Config
	log       *slog.Logger
	gauges    map[string]map[string]client.MetricsGauge

	mu    sync.Mutex
	cache map[string]gateRead
}

type gateRead struct {
	at    time.Time
	state *gate.DestinationState // nil: no gate, so closed
	// running: read from a running run of the gate; else from Read.
	running bool
	// run is the read of the latest run this came from: the same run with
	// the same memo and status reads the same.
	run string
	// checked is when the server was last asked; at, when the listing
	// last confirmed it.
	checked time.Time
}

var _ activities.Gate = (*Cache)(nil)

// NewCache returns the workers' cache of the gates of cfg's destinations.
func NewCache(c client.Client, namespace string, dc converter.DataConverter, cfg destinations.Config, h client.MetricsHandler, log *slog.Logger) *Cache {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	g := &Cache{c: c, namespace: namespace, dc: dc, cfg: cfg, log: log,
		cache: map[string]gateRead{}, gauges: map[string]map[string]client.MetricsGauge{}}
	for _, name := range cfg.Names() {
		g.gauges[name] = map[string]client.MetricsGauge{}
		for _, st := range []string{gate.Closed, gate.Open, gate.HalfOpen, gate.Paused} {
			g.gauges[name][st] = h.WithTags(map[string]string{"destination": name, "state": st}).Gauge(MetricState)
		}
	}
	return g
}

// State reads a destination's gate, at most maxAge old; nil: none (closed).
func (g *Cache) State(ctx context.Context, dest string, maxAge time.Duration) (*gate.DestinationState, error) {
	g.mu.Lock()
	prev, ok := g.cache[dest]
	g.mu.Unlock()
	if ok && time.Since(prev.at) < maxAge {
		return prev.state, nil
	}
	at := time.Now()
	read := gateRead{checked: at}
	r, found, err := latest(ctx, g.c, dest)
	if err == nil && found {
		read.running, read.run = r.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, readKey(r)
		read.state, err = resolve(ctx, g.c, g.dc, dest, r)
	}
	if err != nil {
		return nil, err
	}
	g.keep(dest, read, at)
	return read.state, nil
}

// keep stores a read of a gate and shows it on the gauge.
func (g *Cache) keep(dest string, read gateRead, at time.Time) {
	read.at = at
	g.mu.Lock()
	g.cache[dest] = read
	g.mu.Unlock()
	state := gate.Closed
	if read.state != nil {
		state = read.state.State
	}
	for s, gauge := range g.gauges[dest] {
		if s == state {
			gauge.Update(1)
		} else {
			gauge.Update(0)
		}
	}
}

// readAll reads the gates of the configured destinations: their running
// runs in one listing; one whose gate does not run by Read, when it ran at
// the last look, held its destination, or was last read a while ago (a
// gate that does not run changes only when one starts, which the listing
// shows).
func (g *Cache) readAll(ctx context.Context) error {
	at := time.Now()
	runs, err := running(ctx, g.c)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range g.cfg.Names() {
		g.mu.Lock()
		prev, seen := g.cache[name]
		g.mu.Unlock()
		r, ok := runs[name]
		if !ok {
			if seen && !prev.running && (prev.state == nil || prev.state.State == gate.Closed) && at.Sub(prev.checked) < stoppedRecheck {
				g.keep(name, prev, at)
				continue
			}
			found, exists, err := latest(ctx, g.c, name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !exists {
				g.keep(name, gateRead{checked: at}, at)
				continue
			}
			r = found
		}
		key := readKey(r)
		if seen && prev.run == key {
			prev.checked, prev.running = at, r.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
			g.keep(name, prev, at)
			continue
		}
		st, err := resolve(ctx, g.c, g.dc, name, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		g.keep(name, gateRead{state: st, run: key, checked: at, running: r.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}, at)
	}
	return errors.Join(errs...)
}

// stoppedRecheck is how often a worker looks at the gate of a destination
// whose gate does not run and holds nothing.
const stoppedRecheck = 30 * time.Second

// readKey names what a read of run r depends on: the run, its status and
// its memo. The runs before it are closed, so what they published stays.
func readKey(r run) string {
	return r.runID + "/" + r.status.String() + "/" + string(r.memo.GetFields()[gate.Memo].GetData())
}

// Admit says whether an attempt may be sent now; see activities.Gate.
func (g *Cache) Admit(ctx context.Context, dest, key string, fresh bool) (*activities.Hold, bool, error) {
	maxAge := Fresh
	if fresh {
		maxAge = 0
	}
	st, err := g.State(ctx, dest, maxAge)
	if err != nil || st == nil {
		return nil, false, err
	}
	hold, probe := st.Hold(time.Now())
	if !probe {
		return hold, false, nil
	}
	h, err := g.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: gate.WorkflowID(dest), UpdateName: gate.UpdateProbe,
		Args: []any{key}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var granted bool
	if err == nil {
		err = h.Get(ctx, &granted)
	}
	g.forget(dest)
	if err != nil {
		return nil, false, fmt.Errorf("ask %s's gate for the probe: %w", dest, err)
	}
	if granted {
		g.log.Info("probe attempt let through", "destination", dest, "key", key)
		return nil, true, nil
	}
	hold.Until = time.Now().Add(holdRecheck)
	return hold, false, nil
}

// holdRecheck is when an attempt denied the probe looks again; the probe's
// answer releases it sooner.
const holdRecheck = 30 * time.Second

// Report tells the gate an attempt's class when it can move the breaker:
// a failure where a breaker is configured, or any answer while the breaker
// is not plainly closed. A healthy destination costs no report.
func (g *Cache) Report(ctx context.Context, dest, key string, out activities.Outcome) {
	b := g.cfg.Destinations[dest].Contract.Breaker
	// Admit has just read it, unless this attempt was the probe.
	st, err := g.State(ctx, dest, Fresh)
	if err != nil {
		g.log.Warn("read the destination's gate", "destination", dest, "error", err)
	}
	if st != nil && st.Stopped != "" && st.State != gate.Closed {
		// Signal-with-start would start a fresh gate, dropping what the
		// stopped one held: only an operator's resume or pause starts it.
		g.log.Warn("not reported: the destination's gate was stopped while holding it", "destination", dest, "stopped", st.Stopped, "state", st.State)
		return
	}
	tripped := st != nil && (st.Breaker.State != gate.Closed || st.Breaker.Failures > 0)
	if !(b != nil && out.Class.FoundDown()) && !(tripped && (out.Class.FoundDown() || out.Class.Answered() || b == nil)) {
		return
	}
	// What it observed only: the gate takes the breaker from the destinations file.
	r := gate.Report{Class: out.Class, Key: key, At: time.Now(), Error: text.Excerpt(out.Error, 200)}
	if activity.IsActivity(ctx) {
		// The attempt it reports, which the gate reads in its Delivery's history.
		info := activity.GetInfo(ctx)
		r.Attempt = &gate.AttemptRef{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, ActivityID: info.ActivityID}
	}
	_, err = g.c.SignalWithStartWorkflow(ctx, gate.WorkflowID(dest), gate.SignalReport, r,
		StartOptions(dest), gate.WorkflowType, gate.DestinationInput{Name: dest})
	if err != nil {
		g.log.Warn("report to the destination's gate failed", "destination", dest, "error", err)
	}
	g.forget(dest)
}

func (g *Cache) forget(dest string) {
	g.mu.Lock()
	delete(g.cache, dest)
	g.mu.Unlock()
}

// Release signals every delivery held at dest to look again, in one batch
// job paced at the destination's rate limit: a destination back from an
// outage gets its backlog at the pace it declared, not all at once.
func (g *Cache) Release(ctx context.Context, dest string) error {
	rps := g.cfg.Destinations[dest].RateLimit
	if rps <= 0 {
		rps = defaultReleaseRate
	}
	payloads, err := g.dc.ToPayloads()
	if err != nil {
		return err
	}
	query := workflows.HeldQuery(dest)
	_, err = g.c.WorkflowService().StartBatchOperation(ctx, visibility.SignalJob{
		Namespace: g.namespace, JobID: "release-" + dest + "-" + uuid.NewString()[:8],
		Query: query, Reason: "courier: " + dest + " may be sent to again",
		PerSecond: rps,
		Signal:    workflows.SignalRelease, Input: payloads, Identity: "courier-gate",
	}.Request())
	if err != nil {
		return fmt.Errorf("release the deliveries held at %s: %w", dest, err)
	}
	g.log.Info("releasing held deliveries", "destination", dest, "query", query, "per_second", rps)
	return nil
}

// Watch keeps the worker's copy of the gates fresh until ctx ends.
func (g *Cache) Watch(ctx context.Context) {
	t := time.NewTicker(refreshEvery)
	defer t.Stop()
	var failing string
	for {
		// Attempts read a gate themselves while the loop fails: say so once
		// per cause, not every second.
		err := g.readAll(ctx)
		switch {
		case err != nil && ctx.Err() == nil && err.Error() != failing:
			failing = err.Error()
			g.log.Warn("cannot read the destinations' gates; attempts read their own until this clears", "error", err)
		case err == nil && failing != "":
			failing = ""
			g.log.Info("reading the destinations' gates again")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
