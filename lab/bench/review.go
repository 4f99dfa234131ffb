package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// StormResult is many callers starting one operation at once.
type StormResult struct {
	Callers int `json:"callers"`
	// Seconds until the last caller had its answer.
	Seconds float64 `json:"seconds"`
	// ReferenceP50ms is one delivery's p50 latency to the same destination,
	// measured just before, one at a time.
	ReferenceP50ms float64        `json:"reference_p50_ms"`
	Statuses       map[string]int `json:"statuses"`
	Errors         int            `json:"errors"`
	FirstError     string         `json:"first_error,omitempty"`
	// Effects the destination stored for the operation.
	Effects int `json:"effects"`
	// Where the time went, in milliseconds from the storm's start: the
	// delivery's recorded start and close, and the callers' answers.
	ClosedMs       float64 `json:"closed_ms"`
	FirstAnswerMs  float64 `json:"first_answer_ms"`
	MedianAnswerMs float64 `json:"median_answer_ms"`
	// Bare is Temporal's own storm on the same server: as many callers
	// start one bare workflow ID (joining the running one, no error) and
	// wait for its result; BareReferenceP50ms is one bare workflow's p50.
	BareSeconds        float64 `json:"bare_seconds"`
	BareReferenceP50ms float64 `json:"bare_reference_p50_ms"`
}

// referenceRuns is how many one-at-a-time workflows give a storm's
// reference latency.
const referenceRuns = 15

// storm starts the same operation from many callers at once through
// starter.Deliver and counts the effects the sandbox stored; then does the
// same with the bare workflow, for the ceiling.
func (r *runner) storm(ctx context.Context) (StormResult, error) {
	o := r.opts
	res := StormResult{Callers: o.Storm, Statuses: map[string]int{}}
	o.progress("duplicate storm: reference latencies (%d workflows of each side, one at a time)", referenceRuns)
	// One at a time, alternating, so both references see the same server.
	var courierLat, bareLat []time.Duration
	for range referenceRuns {
		for _, side := range []struct {
			do  op
			lat *[]time.Duration
		}{{r.deliver(DestKey, SideKey), &courierLat}, {r.bare, &bareLat}} {
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			t0 := time.Now()
			err := side.do(octx, r.seq.Add(1))
			*side.lat = append(*side.lat, time.Since(t0))
			cancel()
			if err != nil {
				return res, fmt.Errorf("storm reference: %w", err)
			}
		}
	}
	p50 := func(lat []time.Duration) float64 {
		slices.Sort(lat)
		return ms(quantile(lat, 0.5))
	}
	res.ReferenceP50ms, res.BareReferenceP50ms = p50(courierLat), p50(bareLat)

	o.progress("duplicate storm: %d callers deliver one operation at once", o.Storm)
	in := r.input(DestKey, "storm", r.seq.Add(1))
	var mu sync.Mutex
	answers, start := stampede(ctx, o.Storm, func(ctx context.Context) {
		st, err := r.starter.Deliver(ctx, in)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			res.Errors++
			if res.FirstError == "" {
				res.FirstError = err.Error()
			}
			return
		}
		res.Statuses[string(st.Status)]++
	})
	res.Seconds = answers[len(answers)-1].Seconds()
	res.FirstAnswerMs, res.MedianAnswerMs = ms(answers[0]), ms(quantile(answers, 0.5))
	if events, err := r.events(ctx, workflows.WorkflowID(opkey.Key(in.Operation))); err == nil && len(events) > 0 {
		res.ClosedMs = ms(events[len(events)-1].GetEventTime().AsTime().Sub(start))
	}
	n, err := r.st.Effects.Count(ctx, DestKey, in.BusinessID)
	if err != nil {
		return res, fmt.Errorf("count effects at %s: %w", DestKey, err)
	}
	res.Effects = n

	o.progress("duplicate storm: %d callers start one bare workflow at once", o.Storm)
	bareIn := r.input(DestKey, SideBare, r.seq.Add(1))
	id := bareID(r.runID, r.seq.Add(1))
	var bareErrs errorList
	answers, _ = stampede(ctx, o.Storm, func(ctx context.Context) {
		run, err := r.st.client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: BareTaskQueue},
			BareWorkflowType, bareIn)
		if err == nil {
			var out string
			err = run.Get(ctx, &out)
		}
		if err != nil {
			bareErrs.add(err)
		}
	})
	if _, first := bareErrs.summary(); first != "" {
		return res, fmt.Errorf("bare storm: %s", first)
	}
	res.BareSeconds = answers[len(answers)-1].Seconds()
	return res, nil
}

// stampede runs n callers released at once and returns when each answered,
// sorted, and when they were released.
func stampede(ctx context.Context, n int, call func(ctx context.Context)) ([]time.Duration, time.Time) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		answers []time.Duration
	)
	gate := make(chan struct{})
	var start time.Time // written before the gate opens
	for range n {
		wg.Go(func() {
			<-gate
			call(ctx)
			took := time.Since(start)
			mu.Lock()
			answers = append(answers, took)
			mu.Unlock()
		})
	}
	start = time.Now()
	close(gate)
	wg.Wait()
	slices.Sort(answers)
	return answers, start
}

// injectHangUps stages n hang-ups after commit at the none destination's
// sandbox service.
func (r *runner) injectHangUps(n int) error {
	svc := lab.SandboxService(r.st.Config.Destinations[DestNone])
	return r.st.Sandbox.Inject(svc, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit, Count: n})
}

// effects counts the effects dest's store holds per business id, for the
// ids asked about; ticket maps each to the id of its last one. It reads
// dest's store alone: the others hold the throughput phase's many effects,
// and the parked phase looks while it is timed.
func (r *runner) effects(ctx context.Context, dest string, ids map[string]bool) (counts map[string]int, ticket map[string]string, err error) {
	only := destinations.Config{Destinations: map[string]destinations.Destination{dest: r.st.Config.Destinations[dest]}}
	e, err := lab.OpenEffects(r.st.Sandbox.Server, only)
	if err != nil {
		return nil, nil, err
	}
	defer e.Close()
	all, err := e.All(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("count effects at %s: %w", dest, err)
	}
	counts, ticket = map[string]int{}, map[string]string{}
	for id := range ids {
		for _, e := range all[id] {
			if e.Dest == dest {
				counts[id]++
				ticket[id] = e.ID
			}
		}
	}
	return counts, ticket, nil
}

// ParkedResult is deliveries parked for review, then resolved.
type ParkedResult struct {
	Deliveries int `json:"deliveries"`
	// ParkSeconds: from the first start until all are awaiting review (as
	// the visibility store counts them).
	ParkSeconds float64 `json:"park_seconds"`
	// ResolveSeconds: from the first review decision until every delivery
	// has its final result.
	ResolveSeconds float64 `json:"resolve_seconds"`
	// Parked is how many reached awaiting_review; Resolved how many then
	// ended delivered_by_review (or created, retried by the reviewer); Lost
	// the rest.
	Parked   int `json:"parked"`
	Resolved int `json:"resolved"`
	Lost     int `json:"lost"`
	// Effects stored by the destination for these deliveries, and the
	// ones beyond one per delivery.
	Effects      int `json:"effects"`
	ExtraEffects int `json:"extra_effects"`
	// Worker subprocess memory (VmRSS/VmHWM from /proc): a fresh worker
	// idle, then while all are parked, and its peak up to then.
	WorkerRSSIdleMB   float64 `json:"worker_rss_idle_mb"`
	WorkerRSSParkedMB float64 `json:"worker_rss_parked_mb"`
	WorkerRSSPeakMB   float64 `json:"worker_rss_peak_mb"`
	Errors            int     `json:"errors"`
	FirstError        string  `json:"first_error,omitempty"`
	// Unstored parked with no effect at the destination: an attempt that
	// failed otherwise than by the staged hang-up after commit. The bench's
	// reviewer sends those back to retry.
	Unstored      int    `json:"unstored"`
	FirstUnstored string `json:"first_unstored,omitempty"`
	// Time from a delivery's park (its search attribute upsert, in history)
	// to its caller's answer from Deliver, over AnswerSamples deliveries.
	AnswerSamples        int     `json:"answer_samples"`
	AnswerAfterParkP50ms float64 `json:"answer_after_park_p50_ms"`
	AnswerAfterParkMaxMs float64 `json:"answer_after_park_max_ms"`
}

// parkAnswerSamples is how many parked deliveries time their caller's answer.
const parkAnswerSamples = 20

// answerAfterPark delivers, one at a time, to the none destination whose
// service hangs up after the commit, and times each caller's answer from
// the moment its delivery parked (the search attribute upsert's event
// time, on this machine's clock like the caller's). The deliveries are
// then abandoned.
func (r *runner) answerAfterPark(ctx context.Context, res *ParkedResult) error {
	var lat []time.Duration
	for i := range parkAnswerSamples {
		if err := r.injectHangUps(1); err != nil {
			return err
		}
		in := r.input(DestNone, "park-answer", int64(i))
		dctx, cancel := context.WithTimeout(ctx, opTimeout)
		st, err := r.starter.Deliver(dctx, in)
		answered := time.Now()
		cancel()
		if err != nil {
			return fmt.Errorf("park answer: %w", err)
		}
		if st.State != workflows.StateAwaitingReview {
			return fmt.Errorf("park answer: delivery %s ended %s instead of parking", st.Key, st.State)
		}
		events, err := r.events(ctx, workflows.WorkflowID(st.Key))
		if err != nil {
			return err
		}
		var parkedAt time.Time
		for _, ev := range events {
			if ev.GetEventType() == enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES {
				parkedAt = ev.GetEventTime().AsTime()
			}
		}
		if parkedAt.IsZero() {
			return fmt.Errorf("park answer: delivery %s has no park event", st.Key)
		}
		lat = append(lat, answered.Sub(parkedAt))
		if err := r.review(ctx, st.Key, workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "bench", Note: "timing sample"}, true); err != nil {
			return err
		}
	}
	slices.Sort(lat)
	res.AnswerSamples = len(lat)
	res.AnswerAfterParkP50ms, res.AnswerAfterParkMaxMs = ms(quantile(lat, 0.5)), ms(lat[len(lat)-1])
	return nil
}

// parkConcurrency bounds the starts and reviews in flight; parkWindow the
// deliveries started and not yet parked.
const (
	parkConcurrency = 64
	parkWindow      = 64
)

// maxReviewRounds bounds the decisions the bench's operator makes for one
// delivery.
const maxReviewRounds = 3

// awaitDecision waits until the delivery finished or parked again after a
// new attempt: a signalled decision may not be acted on yet.
func (r *runner) awaitDecision(ctx context.Context, key string, attempts int) (workflows.DeliveryStatus, error) {
	for {
		st, err := r.starter.Wait(ctx, key)
		if err != nil {
			return st, fmt.Errorf("result of %s: %w", key, err)
		}
		if st.Status != "" || len(st.Attempts) > attempts {
			return st, nil
		}
	}
}

// review sends a decision by update (waiting for it to be accepted) or by
// signal.
func (r *runner) review(ctx context.Context, key string, d workflows.ReviewDecision, byUpdate bool) error {
	var err error
	if byUpdate {
		_, err = r.starter.Review(ctx, key, d)
	} else {
		err = r.st.client().SignalWorkflow(ctx, workflows.WorkflowID(key), "", workflows.SignalReview, d)
	}
	if err != nil {
		return fmt.Errorf("review %s: %w", key, err)
	}
	return nil
}

// parked drives deliveries to the none destination, whose service commits
// and then hangs up, so each stops in awaiting_review; then resolves them,
// half by update and half by signal, with the ticket an operator would find.
func (r *runner) parked(ctx context.Context) (ParkedResult, error) {
	o := r.opts
	n := o.Parked
	res := ParkedResult{Deliveries: n}
	o.progress("parked reviews: a fresh worker subprocess, so its memory is its own")
	if err := r.st.restartWorker(ctx); err != nil {
		return res, err
	}
	time.Sleep(2 * time.Second) // let the worker settle before the idle figure
	idle, err := lab.ReadProc(r.st.worker().PID())
	if err != nil {
		return res, fmt.Errorf("worker memory: %w", err)
	}
	res.WorkerRSSIdleMB = mb(idle.RSS)
	o.progress("parked reviews: %d callers timed from their delivery's park to their answer", parkAnswerSamples)
	if err := r.answerAfterPark(ctx, &res); err != nil {
		return res, err
	}

	if err := r.injectHangUps(n); err != nil {
		return res, err
	}
	operation := "bench-park-" + r.runID
	inputs := make([]workflows.DeliveryInput, n)
	ids := make(map[string]bool, n)
	for i := range inputs {
		in := r.input(DestNone, "park", int64(i))
		in.Operation.Operation = operation
		inputs[i] = in
		ids[in.BusinessID] = true
	}
	var errs errorList
	o.progress("parked reviews: delivering %d to %q, at most %d unparked at a time (the service hangs up after each commit)",
		n, DestNone, parkWindow)
	// Starts are paced by the visibility store's count of parked ones, so
	// the server works on at most parkWindow deliveries at once while the
	// parked ones pile up, as when deliveries arrive at the rate they are
	// handled (not all n at once in the server's task queues).
	query := fmt.Sprintf("%s = %q AND %s = %q", workflows.SAOperation.GetName(), operation,
		workflows.SAState.GetName(), workflows.StateAwaitingReview)
	count := func() (int, error) {
		resp, err := r.st.client().CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return 0, fmt.Errorf("count parked deliveries: %w", err)
		}
		return int(resp.GetCount()), nil
	}
	start := time.Now()
	// Bounded: the server parks 10 to 20 a second here; allow a fifth of that.
	deadline := start.Add(time.Minute + time.Duration(n)*250*time.Millisecond)
	lastReport := start
	started := 0
	for {
		var err error
		if res.Parked, err = count(); err != nil {
			return res, err
		}
		if res.Parked >= n || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		if more := min(n-started, res.Parked+parkWindow-started); more > 0 {
			batch := inputs[started : started+more]
			parallel(ctx, len(batch), parkConcurrency, func(ctx context.Context, i int) {
				ctx, cancel := context.WithTimeout(ctx, opTimeout)
				defer cancel()
				if _, err := r.starter.Start(ctx, batch[i]); err != nil {
					errs.add(err)
				}
			})
			started += more
		}
		if time.Since(lastReport) > 15*time.Second {
			o.progress("parked reviews: %d/%d parked (%.0fs)", res.Parked, n, time.Since(start).Seconds())
			lastReport = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
	res.ParkSeconds = time.Since(start).Seconds()
	parked, err := lab.ReadProc(r.st.worker().PID())
	if err != nil {
		return res, fmt.Errorf("worker memory: %w", err)
	}
	res.WorkerRSSParkedMB, res.WorkerRSSPeakMB = mb(parked.RSS), mb(parked.HWM)
	o.progress("parked reviews: %d/%d parked in %.1fs; worker RSS %.0f MB (peak %.0f MB)",
		res.Parked, n, res.ParkSeconds, res.WorkerRSSParkedMB, res.WorkerRSSPeakMB)

	_, ticket, err := r.effects(ctx, DestNone, ids)
	if err != nil {
		return res, err
	}
	o.progress("parked reviews: resolving them as an operator would, half by update and half by signal")
	var resolved atomic.Int64
	var unstored errorList
	start = time.Now()
	parallel(ctx, n, parkConcurrency, func(ctx context.Context, i int) {
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		in := inputs[i]
		key := opkey.Key(in.Operation)
		found := ticket[in.BusinessID]
		// An operator checks the destination: the ticket is there, so the
		// delivery was made; or it is not (the attempt failed some other
		// way than the staged hang-up), so it may be retried. A retry can
		// park again on a hang-up staged for an attempt that never came.
		attempts := 1 // each parked after its first attempt
		for range maxReviewRounds {
			d := workflows.ReviewDecision{Decision: workflows.DecisionDelivered, Reviewer: "bench",
				Note: "found in the sandbox", ResourceID: found}
			if found == "" {
				d = workflows.ReviewDecision{Decision: workflows.DecisionRetry, Reviewer: "bench",
					Note: "not in the sandbox"}
			}
			if err := r.review(ctx, key, d, i%2 == 0); err != nil {
				errs.add(err)
				return
			}
			st, err := r.awaitDecision(ctx, key, attempts)
			if err != nil {
				errs.add(err)
				return
			}
			if found == "" && attempts == 1 && len(st.Attempts) > 0 {
				a := st.Attempts[0]
				unstored.add(fmt.Errorf("delivery %s parked without a stored effect: attempt %d: %s: %s",
					key, a.Number, a.Class, a.Error))
			}
			switch st.Status {
			case workflows.StatusDeliveredByReview, workflows.StatusCreated:
				resolved.Add(1)
				return
			case "": // parked again after the retry: look again
				attempts = len(st.Attempts)
				_, again, err := r.effects(ctx, DestNone, map[string]bool{in.BusinessID: true})
				if err != nil {
					errs.add(err)
					return
				}
				found = again[in.BusinessID]
				continue
			}
			errs.add(fmt.Errorf("delivery %s ended %s: %s", key, st.Status, st.Error))
			return
		}
		errs.add(fmt.Errorf("delivery %s still awaiting review after %d decisions", key, maxReviewRounds))
	})
	res.ResolveSeconds = time.Since(start).Seconds()
	res.Resolved = int(resolved.Load())
	res.Lost = n - res.Resolved

	counts, _, err := r.effects(ctx, DestNone, ids)
	if err != nil {
		return res, err
	}
	for _, c := range counts {
		res.Effects += c
		res.ExtraEffects += max(c-1, 0)
	}
	res.Errors, res.FirstError = errs.summary()
	res.Unstored, res.FirstUnstored = unstored.summary()
	o.progress("parked reviews: %d/%d resolved in %.1fs, %d effects", res.Resolved, n, res.ResolveSeconds, res.Effects)
	return res, ctx.Err()
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// errorList counts errors from many goroutines, keeping the first.
type errorList struct {
	mu    sync.Mutex
	n     int
	first error
}

func (e *errorList) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if e.first == nil {
		e.first = err
	}
}

func (e *errorList) summary() (int, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.first == nil {
		return e.n, ""
	}
	return e.n, e.first.Error()
}
