package bench

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// ticketPayload is the 1 KiB ticket of the key vectors
// (workflows/testdata/key_vectors.json, "realistic-ticket-1kib"): every
// side sends it, with a request_id added.
//
//go:embed testdata/ticket-1kib.json
var ticketPayload []byte

// input is the delivery of operation seq of side tag to dest.
func (r *runner) input(dest, tag string, seq int64) workflows.DeliveryInput {
	id := fmt.Sprintf("%s-%s-%d", r.runID, tag, seq)
	return workflows.DeliveryInput{
		Operation: opkey.Operation{Tenant: "bench", Destination: dest, Operation: "create-ticket", BusinessID: id},
		Payload:   r.withRequestID(id),
	}
}

// withRequestID is the ticket with "request_id" first, so effects can be
// counted per business id (the template starts with '{').
func (r *runner) withRequestID(id string) []byte {
	b := make([]byte, 0, len(r.payload)+len(id)+20)
	b = fmt.Appendf(b, `{"request_id":%q,`, id)
	return append(b, bytes.TrimLeft(r.payload, " \t\r\n")[1:]...)
}

// bareID is as random as a delivery's: IDs that sort in start order would
// land every new row of the server's ID-keyed tables and indexes on the same
// database page, and spare the bare workflow page writes that any real ID
// scheme (a business key, the SDK's default UUID) costs.
func bareID(runID string, seq int64) string {
	return "bench-bare-" + uuid.NewSHA1(bareIDSpace, fmt.Appendf(nil, "%s-%d", runID, seq)).String()
}

var bareIDSpace = uuid.MustParse("5b1f6a3e-9d1c-4e0a-8a57-0c3b8f9a2d41")

// bare runs the ceiling workflow and waits for its result.
func (r *runner) bare(ctx context.Context, seq int64) error {
	in := r.input(DestKey, SideBare, seq)
	run, err := r.st.client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: bareID(r.runID, seq), TaskQueue: BareTaskQueue,
	}, BareWorkflowType, in)
	if err != nil {
		return fmt.Errorf("start bare workflow: %w", err)
	}
	var out string
	return run.Get(ctx, &out)
}

// deliver is a happy-path delivery through the starter, as a service makes it.
func (r *runner) deliver(dest, side string) op {
	return func(ctx context.Context, seq int64) error {
		st, err := r.starter.Deliver(ctx, r.input(dest, side, seq))
		if err != nil {
			return err
		}
		if st.Status != workflows.StatusCreated {
			return fmt.Errorf("delivery %s: status %s, want created: %s", st.Key, st.Status, st.Error)
		}
		return nil
	}
}

// directClient is what a service without Courier would use: keep-alive
// connections, one per caller.
var directClient = &http.Client{
	Transport: &http.Transport{MaxIdleConnsPerHost: 128},
	Timeout:   30 * time.Second,
}

// direct POSTs the ticket to the key destination's sandbox service.
func (r *runner) direct(ctx context.Context, seq int64) error {
	in := r.input(DestKey, SideDirect, seq)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.st.Config.Destinations[DestKey].URL, bytes.NewReader(in.Payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(sandbox.KeyHeader, opkey.Key(in.Operation))
	resp, err := directClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("direct POST: HTTP %d", resp.StatusCode)
	}
	return nil
}

type side struct {
	name         string
	do           op
	lead, window time.Duration
	// id is the workflow ID of operation seq; nil for the direct side.
	id func(seq int64) string
	// delivery, for a side whose workflow is a caller, is the workflow ID
	// of the delivery it calls, whose history counts too.
	delivery func(seq int64) string
}

func (r *runner) sides() []side {
	lead := max(r.opts.Lead, 0)
	return []side{
		{name: SideBare, do: r.bare, lead: lead, window: r.opts.Window, id: func(seq int64) string { return bareID(r.runID, seq) }},
		{name: SideKey, do: r.deliver(DestKey, SideKey), lead: lead, window: r.opts.Window, id: r.deliveryID(DestKey, SideKey)},
		{name: SideUniqueCommit, do: r.deliver(DestUniqueCommit, SideUniqueCommit), lead: lead, window: r.opts.Window,
			id: r.deliveryID(DestUniqueCommit, SideUniqueCommit)},
		{name: SideDirect, do: r.direct, window: r.opts.DirectWindow},
	}
}

// workflowSides are the sides that run a workflow.
func (r *runner) workflowSides() []side {
	return slices.DeleteFunc(r.sides(), func(s side) bool { return s.id == nil })
}

func (r *runner) deliveryID(dest, side string) func(seq int64) string {
	return func(seq int64) string {
		return workflows.WorkflowID(opkey.Key(r.input(dest, side, seq).Operation))
	}
}

// cpu is the CPU time so far of the server (all its processes), the
// worker and this process.
func (r *runner) cpu() cpuSplit {
	w, _ := lab.ReadProc(r.st.worker().PID())
	self, _ := lab.ReadProc(os.Getpid())
	return cpuSplit{cpuTime(r.st.serverPIDs), w.CPU, self.CPU}
}

// cpuTime is the CPU time so far of these processes together; one that
// cannot be read counts nothing.
func cpuTime(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		p, _ := lab.ReadProc(pid)
		sum += p.CPU
	}
	return sum
}

func (c cpuSplit) since(before cpuSplit) cpuSplit {
	return cpuSplit{c.server - before.server, c.worker - before.worker, c.bench - before.bench}
}

// throughput runs every side at every concurrency, in rounds whose orders
// form a balanced Latin square: each side comes first once and follows every
// other side once in every len(sides) rounds. (Rotating one order would not
// do: the side after direct, the one that finds the server rested, would
// always be the same.)
func (r *runner) throughput(ctx context.Context) ([]Summary, error) {
	o := r.opts
	sides := r.sides()
	if o.Warmup > 0 {
		o.progress("warming up every side (%s each at concurrency 4)", o.Warmup)
		for _, s := range sides {
			res := closedLoop(ctx, 4, 0, o.Warmup, &r.seq, s.do)
			if res.firstErr != nil {
				return nil, fmt.Errorf("warm-up %s: %w", s.name, res.firstErr)
			}
		}
	}
	var out []Summary
	for _, conc := range o.Concurrency {
		runs := map[string][]loadResult{}
		for round := range o.Rounds {
			for _, k := range balancedOrder(len(sides), round) {
				s := sides[k]
				before := r.cpu()
				res := closedLoop(ctx, conc, s.lead, s.window, &r.seq, s.do)
				res.cpu = r.cpu().since(before)
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				runs[s.name] = append(runs[s.name], res)
				o.progress("concurrency %d, round %d/%d, %-22s %5d ops  %7.1f/s  %d errors",
					conc, round+1, o.Rounds, s.name, len(res.samples), res.perSecond(), res.errors)
			}
		}
		for _, s := range sides {
			sum := summarize(s.name, conc, runs[s.name])
			if s.id != nil {
				t, err := r.loadTimings(ctx, s, runs[s.name])
				if err != nil {
					return nil, err
				}
				sum.Timings = &t
			}
			out = append(out, sum)
		}
	}
	return out, nil
}

// loadTimingSamples is how many of a side's measured workflows, spread over
// its rounds, are read back to split its latency under load.
const loadTimingSamples = 40

// loadTimings splits the mean latency of a side's measured workflows by
// their recorded event times: where the time went under load.
func (r *runner) loadTimings(ctx context.Context, s side, runs []loadResult) (Timings, error) {
	var all []sample
	for _, res := range runs {
		all = append(all, res.samples...)
	}
	step := max(1, (len(all)+loadTimingSamples-1)/loadTimingSamples) // at most loadTimingSamples
	var ts []Timings
	for i := 0; i < len(all); i += step {
		events, err := r.events(ctx, s.id(all[i].seq))
		if err != nil {
			return Timings{}, fmt.Errorf("%s: %w", s.name, err)
		}
		ts = append(ts, timings(events, all[i].latency))
	}
	return meanTimings(ts), nil
}

// balancedOrder is row round of a Williams design for n sides (n even): the
// first row is 0, 1, n-1, 2, n-2, ..., and row i adds i to each entry.
func balancedOrder(n, round int) []int {
	out := make([]int, n)
	lo, hi := 1, n-1
	for j := range n {
		var v int
		switch {
		case j == 0:
			v = 0
		case j%2 == 1:
			v, lo = lo, lo+1
		default:
			v, hi = hi, hi-1
		}
		out[j] = (v + round) % n
	}
	return out
}

// Ratio compares a Courier side with the bare workflow and the direct POST
// at one concurrency.
type Ratio struct {
	Side        string  `json:"side"`
	Concurrency int     `json:"concurrency"`
	VsBare      float64 `json:"throughput_vs_bare"`
	P50VsBare   float64 `json:"p50_vs_bare"`
	P99VsBare   float64 `json:"p99_vs_bare"`
	VsDirect    float64 `json:"throughput_vs_direct"`
}

func ratios(sums []Summary) []Ratio {
	find := func(side string, conc int) *Summary {
		for i := range sums {
			if sums[i].Side == side && sums[i].Concurrency == conc {
				return &sums[i]
			}
		}
		return nil
	}
	var out []Ratio
	for _, s := range sums {
		if s.Side != SideKey && s.Side != SideUniqueCommit {
			continue
		}
		bare, direct := find(SideBare, s.Concurrency), find(SideDirect, s.Concurrency)
		if bare == nil || direct == nil {
			continue
		}
		out = append(out, Ratio{
			Side: s.Side, Concurrency: s.Concurrency,
			VsBare: div(s.PerSecond, bare.PerSecond), P50VsBare: div(s.P50ms, bare.P50ms), P99VsBare: div(s.P99ms, bare.P99ms),
			VsDirect: div(s.PerSecond, direct.PerSecond),
		})
	}
	return out
}

// HistoryCount is the recorded history of a side's workflows, and where a
// caller's time went, from the event times of a few run one at a time.
type HistoryCount struct {
	Side       string   `json:"side"`
	WorkflowID string   `json:"workflow_id"`
	Events     int      `json:"events"`
	Types      []string `json:"event_types"`
	// Bytes is the size of the encoded events; EventBytes each one's, in
	// order, where the bytes go.
	Bytes      int   `json:"bytes"`
	EventBytes []int `json:"event_bytes"`
	// Actions is what Temporal Cloud bills for one workflow: the server's
	// own count (ActionsSource "server") where its metrics are at hand,
	// else HistoryActions. HistoryActions derives them from the events
	// (heartbeats, queries and rejected updates leave none), by kind.
	Actions        float64        `json:"actions"`
	ActionsSource  string         `json:"actions_source"`
	HistoryActions int            `json:"history_actions"`
	ActionKinds    map[string]int `json:"action_kinds"`
	// Medians in milliseconds over Samples workflows.
	Samples int     `json:"samples"`
	Timings Timings `json:"timings_ms"`
}

// Timings splits one workflow's latency by its history's event times.
type Timings struct {
	// Caller is what the caller waited: start request to answer.
	Caller float64 `json:"caller"`
	// Server is the recorded run: workflow started to closed.
	Server float64 `json:"server"`
	// FirstTaskWait: started until a worker picked up the first workflow
	// task; FirstTask: that task on the worker, until its completion.
	FirstTaskWait float64 `json:"first_task_wait"`
	FirstTask     float64 `json:"first_task"`
	// ActivityWait: scheduled until a worker started it; Activity: its run.
	ActivityWait float64 `json:"activity_wait"`
	Activity     float64 `json:"activity"`
	// LastTaskWait and LastTask: the workflow task after the activity.
	LastTaskWait float64 `json:"last_task_wait"`
	LastTask     float64 `json:"last_task"`
	// CallerOverhead is Caller minus Server: the start and result round
	// trips, and what the starter does around them.
	CallerOverhead float64 `json:"caller_overhead"`
}

// historySamples is how many workflows of each side the history phase runs.
const historySamples = 10

// metricsSettle is how long the server's counters may lag its work: it
// reports them every second, and closes a workflow's visibility record
// after the caller has its answer.
const metricsSettle = 2 * time.Second

// serverCounters reads the server's persistence counters, summed over its
// endpoints, once the work so far shows in them; nil when the server's
// metrics address is unknown.
func (r *runner) serverCounters(ctx context.Context) (*serverCounters, error) {
	if len(r.st.metricsURLs) == 0 {
		return nil, nil
	}
	time.Sleep(metricsSettle)
	c, err := scrapeServers(ctx, r.st.metricsURLs, r.st.Temporal.Namespace)
	return &c, err
}

// history runs n workflows of each side one at a time, a side's batch
// after the other, and reads their recorded histories. With the server's
// metrics at hand it also counts what each batch asked of its persistence.
func (r *runner) history(ctx context.Context) ([]HistoryCount, []ServerWork, error) {
	n := historySamples
	if r.opts.Smoke {
		// Enough that an idle queue's long poll ending in a batch moves
		// its count per workflow by a quarter, not a half.
		n = 4
	}
	r.opts.progress("reading the recorded histories of %d workflows of each side, run one at a time", n)
	sides := append(r.workflowSides(), r.callerSides()...)
	// One of each first, so no batch pays for a task queue's first use.
	for _, s := range sides {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		err := s.do(octx, r.seq.Add(1))
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("history: %s: %w", s.name, err)
		}
	}
	samples := make([][]sample, len(sides))
	var work []ServerWork
	before, err := r.serverCounters(ctx)
	if err != nil {
		return nil, nil, err
	}
	for i, s := range sides {
		for range n {
			seq := r.seq.Add(1)
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			t0 := time.Now()
			err := s.do(octx, seq)
			lat := time.Since(t0)
			cancel()
			if err != nil {
				return nil, nil, fmt.Errorf("history: %s: %w", s.name, err)
			}
			samples[i] = append(samples[i], sample{seq, lat})
		}
		after, err := r.serverCounters(ctx)
		if err != nil {
			return nil, nil, err
		}
		if after != nil {
			work = append(work, after.perWorkflow(*before, s.name, n))
		}
		before = after
	}
	var out []HistoryCount
	for i, s := range sides {
		h := HistoryCount{Side: s.name, WorkflowID: s.id(samples[i][0].seq), Samples: n}
		var ts []Timings
		for k, smp := range samples[i] {
			events, err := r.events(ctx, s.id(smp.seq))
			if err != nil {
				return nil, nil, err
			}
			if k == 0 {
				counted := events
				if s.delivery != nil {
					more, err := r.events(ctx, s.delivery(smp.seq))
					if err != nil {
						return nil, nil, err
					}
					counted = append(slices.Clone(events), more...)
				}
				h.Events = len(counted)
				h.ActionKinds = historyActions(events)
				if s.delivery != nil {
					for k, v := range historyActions(counted[len(events):]) {
						h.ActionKinds[k] += v
					}
				}
				h.HistoryActions = sumActions(h.ActionKinds)
				h.Actions, h.ActionsSource = float64(h.HistoryActions), "history"
				for _, w := range work {
					if w.Side == s.name && w.TotalActions > 0 {
						h.Actions, h.ActionsSource = w.TotalActions, "server"
					}
				}
				for _, ev := range counted {
					h.Types = append(h.Types, ev.GetEventType().String())
					h.EventBytes = append(h.EventBytes, proto.Size(ev))
					h.Bytes += proto.Size(ev)
				}
			}
			ts = append(ts, timings(events, smp.latency))
		}
		h.Timings = medianTimings(ts)
		out = append(out, h)
	}
	return out, work, nil
}

func (r *runner) events(ctx context.Context, id string) ([]*historypb.HistoryEvent, error) {
	var events []*historypb.HistoryEvent
	it := r.st.client().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		events = append(events, ev)
	}
	return events, nil
}

// timings reads the happy path's event times: started, a workflow task, the
// activity, a workflow task, closed.
func timings(events []*historypb.HistoryEvent, caller time.Duration) Timings {
	find := func(t enumspb.EventType, nth int) time.Time {
		for _, ev := range events {
			if ev.GetEventType() == t {
				if nth--; nth == 0 {
					return ev.GetEventTime().AsTime()
				}
			}
		}
		return time.Time{}
	}
	span := func(a, b time.Time) float64 {
		if a.IsZero() || b.IsZero() {
			return 0
		}
		return ms(b.Sub(a))
	}
	started := find(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, 1)
	closed := events[len(events)-1].GetEventTime().AsTime()
	t := Timings{
		Caller:        ms(caller),
		Server:        span(started, closed),
		FirstTaskWait: span(started, find(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, 1)),
		FirstTask: span(find(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, 1),
			find(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, 1)),
		ActivityWait: span(find(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 1),
			find(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, 1)),
		Activity: span(find(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, 1),
			find(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, 1)),
		LastTaskWait: span(find(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, 1),
			find(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, 2)),
		LastTask: span(find(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, 2),
			find(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, 2)),
	}
	t.CallerOverhead = t.Caller - t.Server
	return t
}

func medianTimings(ts []Timings) Timings {
	return reduceTimings(ts, func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	})
}

// meanTimings adds up like the latencies: the mean caller time is the sum
// of the mean parts.
func meanTimings(ts []Timings) Timings {
	return reduceTimings(ts, func(v []float64) float64 {
		sum := 0.0
		for _, x := range v {
			sum += x
		}
		return sum / float64(len(v))
	})
}

// reduceTimings reduces each part of ts to one figure.
func reduceTimings(ts []Timings, reduce func([]float64) float64) Timings {
	if len(ts) == 0 {
		return Timings{}
	}
	part := func(get func(Timings) float64) float64 {
		v := make([]float64, 0, len(ts))
		for _, t := range ts {
			v = append(v, get(t))
		}
		return reduce(v)
	}
	return Timings{
		Caller:         part(func(t Timings) float64 { return t.Caller }),
		Server:         part(func(t Timings) float64 { return t.Server }),
		FirstTaskWait:  part(func(t Timings) float64 { return t.FirstTaskWait }),
		FirstTask:      part(func(t Timings) float64 { return t.FirstTask }),
		ActivityWait:   part(func(t Timings) float64 { return t.ActivityWait }),
		Activity:       part(func(t Timings) float64 { return t.Activity }),
		LastTaskWait:   part(func(t Timings) float64 { return t.LastTaskWait }),
		LastTask:       part(func(t Timings) float64 { return t.LastTask }),
		CallerOverhead: part(func(t Timings) float64 { return t.CallerOverhead }),
	}
}
