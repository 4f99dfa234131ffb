package testsuite

// A destination that is down: the circuit breaker and an operator's pause
// hold its attempts back, on a real dev server with real workers, so that
// an outage spends no delivery's budget and the destination gets its
// backlog at its declared pace when it is back.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// outage stands in front of a sandbox service: up, it passes requests on;
// down, it answers 503 (nothing applied) and counts what reached it. It
// counts every request too, whatever path it names.
type outage struct {
	mu        sync.Mutex
	down      bool
	whileDown int
	seen      int
	srv       *httptest.Server
}

func newOutage(t *testing.T, target string) *outage {
	u, err := url.Parse(target)
	require.NoError(t, err)
	o := &outage{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.seen++
		down := o.down
		if down {
			o.whileDown++
		}
		o.mu.Unlock()
		if down {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *outage) set(down bool) {
	o.mu.Lock()
	o.down = down
	o.mu.Unlock()
}

func (o *outage) requests() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen
}

func (o *outage) requestsWhileDown() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.whileDown
}

// outageLength is how long the breaker test's destination is down:
// COURIER_OUTAGE (a duration) or 5 minutes.
func outageLength(t *testing.T) time.Duration {
	if v := os.Getenv("COURIER_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "COURIER_OUTAGE")
		return d
	}
	return 5 * time.Minute
}

// TestBreakerHoldsDuringOutage: a destination answers 503 for the whole
// outage while 300 deliveries to it start at a steady rate. Its breaker
// opens after 5 failures; from then on it sees only one probe per
// cool-down; no delivery spends its budget (5 attempts, 2 minutes) on the
// outage. When it is back, the next probe closes the breaker and every
// delivery is created, once, released at the destination's rate limit.
func TestBreakerHoldsDuringOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("a five-minute outage")
	}
	down := outageLength(t)
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), down+6*time.Minute)
	defer cancel()
	s := newOpsStack(t, map[string]sandbox.Mode{"flaky": sandbox.ModeHonoursKeys})
	out := newOutage(t, s.sandbox.URL)
	breaker := &contract.Breaker{Failures: 5, Window: contract.Duration(time.Minute), CoolDown: contract.Duration(20 * time.Second)}
	d := destinations.Destination{Adapter: destinations.AdapterHTTP, URL: out.srv.URL + "/flaky/tickets", RateLimit: 20,
		Contract: contract.Contract{Dedup: contract.DedupKey, Breaker: breaker, Retry: contract.Retry{
			MaxAttempts: 5, InitialInterval: contract.Duration(time.Second), MaxInterval: contract.Duration(10 * time.Second),
			AttemptTimeout: contract.Duration(5 * time.Second), Deadline: contract.Duration(2 * time.Minute)}}.WithDefaults()}
	s.deploy(destinations.Config{Destinations: map[string]destinations.Destination{"flaky": d}})
	s.startWorker()

	out.set(true)
	began := time.Now()
	keys := make([]string, n)
	for i := range n {
		// A steady rate over the outage.
		time.Sleep(time.Until(began.Add(time.Duration(i) * down / n)))
		h, err := s.starter.Start(ctx, s.input("flaky", "outage-"+strconv.Itoa(i)))
		require.NoError(t, err)
		keys[i] = h.Key
	}
	time.Sleep(time.Until(began.Add(down)))
	seen := out.requestsWhileDown()
	gs, err := s.starter.Destination(ctx, "flaky")
	require.NoError(t, err)
	t.Logf("after %s down: %d requests reached it, gate %s, %d deliveries held", down, seen, gs.State, gs.Held)
	require.NotEqual(t, gate.Closed, gs.State, "the breaker is open (or probing) at the end of the outage")
	// The failures that opened it, then one probe per cool-down (and a
	// worker's read of the gate may lag it by a second).
	probes := int(down/breaker.CoolDown.D()) + 1
	require.LessOrEqual(t, seen, breaker.Failures+probes+5, "the destination saw more than the breaker's probes")

	out.set(false)
	back := time.Now()
	for _, key := range keys {
		st, err := s.starter.Wait(ctx, key)
		require.NoError(t, err)
		require.Contains(t, []workflows.Status{workflows.StatusCreated, workflows.StatusDuplicate}, st.Status,
			"%s: %+v", key, st.Attempts)
	}
	require.Equal(t, n, s.effects("flaky"), "one effect per delivery")
	recs, err := s.sandbox.Records("flaky")
	require.NoError(t, err)
	var first, last time.Time
	for _, r := range recs {
		if first.IsZero() || r.CreatedAt.Before(first) {
			first = r.CreatedAt
		}
		if r.CreatedAt.After(last) {
			last = r.CreatedAt
		}
	}
	rate := float64(n) / max(last.Sub(first).Seconds(), 1)
	t.Logf("back at %s: all %d created by %s, at %.1f/s (rate limit %g/s)",
		back.Format(time.TimeOnly), n, last.Sub(back).Round(time.Second), rate, d.RateLimit)
	require.Less(t, rate, 2*d.RateLimit, "released at the destination's rate limit, not all at once")
}

// TestPauseHoldsAcrossKillAndRestart: an operator pauses a destination;
// deliveries to it wait as "paused: <reason>" (status, list, web UI
// details); its worker is SIGKILLed and the server restarted while paused,
// and nothing reaches the destination; after resume every delivery is
// created once.
func TestPauseHoldsAcrossKillAndRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp := restartableServer(ctx, t, t.TempDir())
	s := newOpsStackOn(t, tmp, map[string]sandbox.Mode{"paused": sandbox.ModeHonoursKeys})
	retry := contract.Retry{MaxAttempts: 3, AttemptTimeout: contract.Duration(15 * time.Second), Deadline: contract.Duration(30 * time.Second)}
	d := s.dest("paused", contract.Contract{Dedup: contract.DedupKey, Retry: retry})
	d.RateLimit = 10
	s.deploy(destinations.Config{Destinations: map[string]destinations.Destination{"paused": d}})
	w := s.startWorker()

	const reason = "partner maintenance INC-7"
	_, err := s.starter.Pause(ctx, "paused", gate.PauseRequest{Reason: reason, By: "alice"})
	require.NoError(t, err)
	seesGate(t, w, "paused", gate.Paused)
	const n = 20
	keys := make([]string, n)
	for i := range n {
		h, err := s.starter.Start(ctx, s.input("paused", "pause-"+strconv.Itoa(i)))
		require.NoError(t, err)
		keys[i] = h.Key
	}
	for _, key := range keys {
		st := s.waitFor(ctx, key, time.Minute, "paused", func(st workflows.DeliveryStatus) bool {
			return st.State == workflows.StatePaused
		})
		require.NotNil(t, st.Hold)
		require.Contains(t, st.Hold.Reason, reason)
		require.Empty(t, st.Attempts, "a held attempt is not an attempt")
	}
	v, err := s.c.QueryWorkflow(ctx, workflows.WorkflowID(keys[0]), "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var meta sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&meta))
	require.Contains(t, meta.GetCurrentDetails(), "**paused**: "+reason+" (paused by alice)")
	require.Eventually(t, func() bool {
		ds, err := s.starter.List(ctx, starter.ListOptions{State: string(workflows.StatePaused), Destination: "paused"})
		return err == nil && len(ds) == n && ds[0].Held == "paused: "+reason+" (paused by alice)"
	}, 30*time.Second, 500*time.Millisecond, "courier list shows the held deliveries with the reason")

	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, w), `courier_destination_state{destination="paused",state="paused"} 1`)
	}, 30*time.Second, time.Second, "the worker's gauge shows the destination paused")

	// A worker SIGKILLed and the server restarted while paused.
	w.Kill()
	tmp.StopServer()
	require.NoError(t, tmp.Start(ctx))
	s.startWorker()
	time.Sleep(20 * time.Second) // past the deadline they would have had
	require.Empty(t, s.sandbox.Requests("paused"), "nothing is sent while paused")
	gs, err := s.starter.Destination(ctx, "paused")
	require.NoError(t, err)
	require.Equal(t, gate.Paused, gs.State, "the pause outlives the server's restart")

	resumed := time.Now()
	_, err = s.starter.Resume(ctx, "paused", gate.ResumeRequest{By: "alice", Note: "maintenance over"})
	require.NoError(t, err)
	// Released within seconds, well before a held delivery's own next look.
	for _, key := range keys {
		st := s.waitFor(ctx, key, time.Minute, "finished", func(st workflows.DeliveryStatus) bool { return st.Status != "" })
		require.Equal(t, workflows.StatusCreated, st.Status, "%s: %+v", key, st.Events)
		// The held looks spent none: every attempt was made after the resume.
		// (A busy machine may lose one to its timeout; the key makes its
		// retry safe, and the effects below count once.)
		require.NotEmpty(t, st.Attempts)
		for _, at := range st.Attempts {
			require.False(t, at.Started.Before(resumed), "%s: attempt %d at %s, before the resume at %s", key, at.Number, at.Started, resumed)
		}
	}
	require.Equal(t, n, s.effects("paused"))
	gs, err = s.starter.Destination(ctx, "paused")
	require.NoError(t, err)
	require.Equal(t, gate.Closed, gs.State)
	last := gs.Transitions[len(gs.Transitions)-1]
	require.Equal(t, "alice", last.By, "who resumed is recorded")
	require.Contains(t, last.Why, "maintenance over")
}

// reviewedGateStack runs a worker for one key destination, served by the
// sandbox service svc and named for this run (the dev server is shared),
// that only alice may pause and resume; and that worker.
func reviewedGateStack(t *testing.T, svc string) (*opsStack, string, *lab.Worker) {
	s := newOpsStack(t, map[string]sandbox.Mode{svc: sandbox.ModeHonoursKeys})
	retry := contract.Retry{MaxAttempts: 3, AttemptTimeout: contract.Duration(5 * time.Second), Deadline: contract.Duration(30 * time.Second)}
	name := svc + "-" + s.run
	s.deploy(destinations.Config{Reviewers: destinations.Plain("alice"),
		Destinations: map[string]destinations.Destination{name: s.dest(svc, contract.Contract{Dedup: contract.DedupKey, Retry: retry})}})
	return s, name, s.startWorker()
}

// TestGateIgnoresForgedReport: anyone who can signal sends the gate of a
// destination without a breaker a report, as the temporal CLI sends one by
// hand, carrying a breaker of one failure and a year's cool-down. The gate
// stays closed: a delivery to the destination is created, not held, and
// the destination stores its one effect. A pause by a name the reviewers
// do not list, or by the command's placeholder, is refused, and the
// destination stays unpaused.
func TestGateIgnoresForgedReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, name, w := reviewedGateStack(t, "forged")

	// What `temporal workflow signal-with-start --workflow-id destination-NAME
	// --type Destination --task-queue courier --input '{"name": "NAME"}'
	// --signal report --signal-input '{...}'` sends: plain JSON.
	id := gate.WorkflowID(name)
	*s.workflow = append(*s.workflow, id)
	forged := map[string]any{"class": "not_sent", "key": "by-hand", "error": "forged", "at": time.Now().UTC().Format(time.RFC3339),
		"breaker": map[string]any{"failures": 1, "window": "1m", "cool_down": "8760h"}}
	_, err := s.c.SignalWithStartWorkflow(ctx, id, gate.SignalReport, forged,
		client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue},
		gate.WorkflowType, map[string]any{"name": name})
	require.NoError(t, err)
	var gs gateclient.Status
	require.Eventually(t, func() bool {
		gs, err = s.starter.Destination(ctx, name)
		return err == nil && len(gs.Recent) == 1
	}, 30*time.Second, 200*time.Millisecond, "the gate decides the forged report")
	require.Equal(t, gate.Closed, gs.State, "%+v", gs.Breaker)
	require.Nil(t, gs.Breaker.Config, "the destination has no breaker")
	require.Empty(t, gs.Transitions)
	seesGate(t, w, name, gate.Closed)

	st := s.deliver(ctx, s.input(name, "after-forged-report"))
	require.Equal(t, workflows.StatusCreated, st.Status, "%+v", st.Events)
	require.Nil(t, st.Hold)
	require.Len(t, st.Attempts, 1)
	require.Equal(t, 1, s.effects("forged"))

	_, err = s.starter.Pause(ctx, name, gate.PauseRequest{Reason: "mine now", By: "mallory"})
	var refused *gateclient.RefusedError
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, `by: "mallory" may not pause destinations; allowed: alice`)
	// The pause command's placeholder, pasted as typed (quoted past the
	// shell), is refused as a placeholder before any list is read.
	_, err = s.starter.Pause(ctx, name, gate.PauseRequest{Reason: "mine now", By: "<YOUR-NAME>"})
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, `by: "<YOUR-NAME>" is the command's placeholder: put your own name`)
	gs, err = s.starter.Destination(ctx, name)
	require.NoError(t, err)
	require.Equal(t, gate.Closed, gs.State, "a refused pause changes nothing")
	require.Nil(t, gs.Paused)
}

// TestStoppedGateKeepsItsPause: a destination is paused and a delivery to
// it held; then its gate's workflow is terminated by hand. Its pause does
// not lift: over several of the workers' reads nothing reaches the
// destination, neither that delivery at its next look nor one started
// after, and its status says paused, its gate terminated. A resume by a
// name the reviewers do not list is refused; one by a reviewer starts the
// gate again, unpaused, and releases both deliveries: one effect each.
func TestStoppedGateKeepsItsPause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, name, w := reviewedGateStack(t, "stopped")
	id := gate.WorkflowID(name)
	*s.workflow = append(*s.workflow, id)

	const reason = "partner maintenance INC-9"
	// Its end makes the held delivery look again soon, while its gate is
	// stopped: no gate runs to end it, so it must hold on.
	until := time.Now().Add(8 * time.Second)
	_, err := s.starter.Pause(ctx, name, gate.PauseRequest{Reason: reason, By: "alice", Until: until})
	require.NoError(t, err)
	seesGate(t, w, name, gate.Paused)
	before, err := s.starter.Start(ctx, s.input(name, "before-stop"))
	require.NoError(t, err)
	s.waitFor(ctx, before.Key, time.Minute, "paused", func(st workflows.DeliveryStatus) bool { return st.State == workflows.StatePaused })

	require.NoError(t, s.c.TerminateWorkflow(ctx, id, "", "by hand"))
	time.Sleep(3 * time.Second) // several of the workers' reads
	after, err := s.starter.Start(ctx, s.input(name, "after-stop"))
	require.NoError(t, err)
	// Past the pause's end and the held delivery's look at it (spread by up
	// to 10s), and several more reads.
	time.Sleep(time.Until(until.Add(15 * time.Second)))
	require.Empty(t, s.sandbox.Requests("stopped"), "nothing is sent while the stopped gate's pause holds")
	for _, key := range []string{before.Key, after.Key} {
		st := s.waitFor(ctx, key, 10*time.Second, "paused", func(st workflows.DeliveryStatus) bool { return st.State == workflows.StatePaused })
		require.NotNil(t, st.Hold)
		require.Contains(t, st.Hold.Reason, reason)
		require.Contains(t, st.Hold.Reason, "its gate was terminated while paused: courier destination resume "+name+" --by <YOUR-NAME>")
		require.Empty(t, st.Attempts)
	}
	gs, err := s.starter.Destination(ctx, name)
	require.NoError(t, err)
	require.Equal(t, gate.Paused, gs.State)
	require.Equal(t, "terminated", gs.Stopped)
	names, err := s.starter.Destinations(ctx)
	require.NoError(t, err)
	require.Contains(t, names, name, "courier destination status lists it")

	// The reviewers' check applies to the gate started again.
	_, err = s.starter.Resume(ctx, name, gate.ResumeRequest{By: "mallory", Note: "mine now"})
	var refused *gateclient.RefusedError
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, `by: "mallory" may not resume destinations; allowed: alice`)
	gs, err = s.starter.Destination(ctx, name)
	require.NoError(t, err)
	require.Equal(t, gate.Paused, gs.State, "a refused resume leaves it paused, its gate running again")
	require.Empty(t, gs.Stopped)
	// Stopped again: the latest of its stopped runs decides.
	require.NoError(t, s.c.TerminateWorkflow(ctx, id, "", "by hand, again"))
	time.Sleep(2 * gateclient.Fresh)
	require.Empty(t, s.sandbox.Requests("stopped"))

	st, err := s.starter.Resume(ctx, name, gate.ResumeRequest{By: "alice", Note: "maintenance over"})
	require.NoError(t, err)
	require.Equal(t, gate.Closed, st.State)
	for _, key := range []string{before.Key, after.Key} {
		st := s.waitFor(ctx, key, time.Minute, "finished", func(st workflows.DeliveryStatus) bool { return st.Status != "" })
		require.Equal(t, workflows.StatusCreated, st.Status, "%s: %+v", key, st.Events)
		require.Len(t, st.Attempts, 1)
	}
	require.Equal(t, 2, s.effects("stopped"), "one effect per delivery")
	gs, err = s.starter.Destination(ctx, name)
	require.NoError(t, err)
	require.Equal(t, gate.Closed, gs.State)
	require.Empty(t, gs.Stopped)
	last := gs.Transitions[len(gs.Transitions)-1]
	require.Equal(t, "alice", last.By, "who resumed is recorded")
	require.Contains(t, last.Why, "maintenance over")
}

// seesGate waits until worker w's copy of dest's gate is in state, as its
// gauge shows it: a worker under load reads the gates later than usual.
func seesGate(t *testing.T, w *lab.Worker, dest, state string) {
	t.Helper()
	want := fmt.Sprintf(`%s{destination=%q,state=%q} 1`, gateclient.MetricState, dest, state)
	var got string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if got = scrape(t, w); strings.Contains(got, want) {
			return
		}
	}
	t.Fatalf("worker's gauge never showed %s; it shows:\n%s", want, gaugeLines(got))
}

// gaugeLines are the gate gauge's lines of a scrape.
func gaugeLines(scraped string) string {
	var lines []string
	for l := range strings.Lines(scraped) {
		if strings.HasPrefix(l, gateclient.MetricState) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "")
}

// scrape reads a worker's /metrics.
func scrape(t *testing.T, w *lab.Worker) string {
	resp, err := http.Get("http://" + w.MetricsAddr() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
