package activities

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/activities/ledger"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
)

// HeartbeatTimeout is how soon Temporal declares an attempt lost when its
// worker stops heartbeating (crashed, killed, cut off), whatever the
// attempt's own timeout.
const HeartbeatTimeout = 10 * time.Second

// heartbeatEvery paces the attempt's heartbeats. The first comes only after
// this long, so an attempt that answers sooner costs the server nothing; the
// SDK throttles the later ones to about 80% of HeartbeatTimeout.
const heartbeatEvery = 2 * time.Second

// prepare derives the request's key and fingerprint, finds the adapter and
// fills in the contract the request runs
// under: the recorded one, else the worker's current one, whose terms it
// returns to be recorded. Then it starts heartbeating until stop.
func (a *Activities) prepare(ctx context.Context, req *Request) (_ destination.Adapter, current *Terms, stop func(), _ error) {
	if err := req.Identify(); err != nil {
		return nil, nil, nil, temporal.NewNonRetryableApplicationError("not attempted: "+err.Error(), ErrNotIdentified, nil)
	}
	ad, err := a.adapter(req.Destination)
	if err != nil {
		return nil, nil, nil, err
	}
	if req.Contract == nil {
		t := a.terms(req.Destination)
		if t.Contract == nil {
			return nil, nil, nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("destination %q has no contract on this worker", req.Destination), ErrUnknownDestination, nil)
		}
		req.Contract, current = t.Contract, &t
	}
	return ad, current, Heartbeat(ctx), nil
}

// Attempt makes one attempt at the destination. Its result is recorded in
// history, so the workflow's decision replays exactly.
func (a *Activities) Attempt(ctx context.Context, req Request) (Outcome, error) {
	ad, current, stop, err := a.prepare(ctx, &req)
	if err != nil {
		return Outcome{}, err
	}
	defer stop()
	if ts, ok := a.Tenants[req.Destination]; ok && !slices.Contains(ts, req.Tenant) {
		// Its credentials are not this tenant's to use: refused before
		// anything is sent, the key not consumed.
		return Outcome{Class: contract.ClassRejected, Terms: current,
			Error: fmt.Sprintf("not sent: tenant %q may not use destination %q", req.Tenant, req.Destination)}, nil
	}
	var probe bool
	if a.Gate != nil {
		var hold *Hold
		var err error
		hold, probe, err = a.Gate.Admit(ctx, req.Destination, req.Key, req.Released)
		if err != nil {
			// Not knowing is not a reason to send: look again soon.
			hold = &Hold{State: "circuit_open", Reason: "the destination's gate could not be read: " + err.Error(), Until: time.Now().Add(10 * time.Second)}
		}
		if hold != nil {
			return held(ctx, req, hold, current), nil
		}
	}
	ctx, cancel := a.cutShortOnStop(ctx)
	defer cancel()
	out, own, checked := a.guard(ctx, req)
	var mark *ledger.Entry
	if checked && a.Ledger != nil {
		var err error
		if mark, err = a.markSending(ctx, req, own); err != nil {
			out, checked = Outcome{Class: contract.ClassNotSent, Error: fmt.Sprintf("not sent: the outcome ledger could not be written: %v", err)}, false
		}
	}
	if checked {
		looked := out.EarlierRunsChecked
		var answered bool
		if out, answered = a.lookFirst(ctx, ad, req, own); !answered {
			out = nameTheOriginal(attempted(deliver(ctx, ad, req)))
		}
		out.EarlierRunsChecked = looked
		if a.Ledger != nil {
			if err := a.settle(ctx, req, own, mark, out); err != nil {
				// Not reported as final until the ledger holds it: the
				// delivery reads this as an unknown outcome, retried under
				// the same key or reviewed.
				return Outcome{}, fmt.Errorf("attempt %d (%s): %w", req.Attempt, out.Class, err)
			}
		}
		if a.Gate != nil {
			a.Gate.Report(ctx, req.Destination, req.Key, out)
		}
		if probe && out.Class.FoundDown() && out.Class.NothingApplied() {
			// The breaker's probe, not the delivery's attempt: it found the
			// destination still down and applied nothing, so the delivery
			// spends nothing on it. Anything else it found counts.
			h := &Hold{State: "circuit_open", Since: time.Now(), Reason: "the breaker's probe found it still down: " + out.Error}
			if b := a.Contracts[req.Destination].Breaker; b != nil {
				h.Until = h.Since.Add(b.CoolDown.D()) // the breaker's next probe
			}
			return held(ctx, req, h, current), nil
		}
	}
	out.Terms = current
	if req.TermsByDigest && current != nil && (out.Class == contract.ClassCreated || out.Class == contract.ClassReplayed) {
		out.Terms, out.TermsDigest = nil, current.Digest()
	}
	activity.GetLogger(ctx).Info("attempt finished",
		"key", req.Key, "destination", req.Destination, "attempt", req.Attempt,
		"class", out.Class, "status_code", out.StatusCode, "error", out.Error)
	return out, nil
}

// lookFirst looks the effect up before a lookup destination is sent the
// operation again, where an earlier attempt of this run may have applied
// it (the workflow's recorded attempts say so, or this run's mark in the
// outcome ledger does): a destination that commits slowly may show it only
// now, after the workflow's own lookup found nothing. answered is true
// when the look answers for the attempt, and nothing is sent: found, a
// replay naming the effect, as a lookup finds it; or the look failed.
func (a *Activities) lookFirst(ctx context.Context, ad destination.Adapter, req Request, own *ledger.Entry) (_ Outcome, answered bool) {
	if req.Contract.Dedup != contract.DedupLookup || (!req.MayHaveApplied && own == nil) {
		return Outcome{}, false
	}
	f, err := lookup(ctx, ad, req)
	switch {
	case err != nil:
		return Outcome{Class: contract.ClassNotSent, Error: fmt.Sprintf(
			"not sent: an earlier attempt may have applied it, and the lookup before sending again failed: %v", err)}, true
	case f.Found:
		return Outcome{Class: contract.ClassReplayed, Receipt: f.Receipt}, true
	}
	return Outcome{}, false
}

// deliver makes the adapter's one attempt within the contract's attempt
// timeout, so that an adapter that sets no deadline of its own still
// answers before the workflow gives up on the activity.
func deliver(ctx context.Context, ad destination.Adapter, req Request) destination.Outcome {
	ctx, cancel := attemptContext(ctx, req)
	defer cancel()
	return ad.Deliver(ctx, req.Attempted())
}

// attemptContext bounds one call to the adapter by the recorded contract's
// attempt timeout.
func attemptContext(ctx context.Context, req Request) (context.Context, context.CancelFunc) {
	if req.Contract != nil && req.Contract.Retry.AttemptTimeout > 0 {
		return context.WithTimeout(ctx, req.Contract.Retry.AttemptTimeout.D())
	}
	return context.WithCancel(ctx)
}

// attempted is an adapter's outcome as the attempt records it. An adapter
// classifies onto destination's classes only: any other class (one that
// would hold or decide the delivery, or none) is read as an unknown
// outcome, so that no adapter can skip the decision table.
func attempted(o destination.Outcome) Outcome {
	out := Outcome{Class: o.Class, StatusCode: o.StatusCode, Receipt: o.Receipt, Error: o.Error, RetryAfter: o.RetryAfter, Reads: o.Reads}
	switch o.Class {
	case destination.Created, destination.Replayed, destination.NotSent, destination.Unknown, destination.InFlight,
		destination.Conflict, destination.Rejected, destination.Throttled, destination.ServerError:
	default:
		out.Class = contract.ClassUnknown
		out.Error = strings.TrimSuffix(fmt.Sprintf("the adapter answered class %q, which is not one of an attempt's classes: %s", o.Class, o.Error), ": ")
	}
	return out
}

// nameTheOriginal holds a replay to what a duplicate promises: the
// original effect's id. An answer read as a replay that names none says the
// effect exists without saying which it is, so it is an unknown outcome
// (retried under the same key, or reviewed), never a duplicate.
func nameTheOriginal(out Outcome) Outcome {
	switch {
	case out.Class == contract.ClassReplayed && (out.Receipt == nil || out.Receipt.ResourceID == ""):
		out.Class = contract.ClassUnknown
		out.Error = fmt.Sprintf("HTTP %d was read as a replay but names no resource id%s: Courier cannot name the original effect; "+
			"declare where the replay's id is (receipt.id, or the rule's receipt.id)", out.StatusCode, readsText(out.Reads))
		out.Receipt = nil
	case out.Receipt != nil && out.Class == contract.ClassReplayed:
		out.Receipt.Source = SourceReplayed
	case out.Receipt != nil && out.Class == contract.ClassCreated:
		out.Receipt.Source = SourceCreated
	}
	return out
}

// readsText lists what was read where, for an error: " (read receipt.id
// /id: (absent))".
func readsText(reads []Read) string {
	if len(reads) == 0 {
		return ""
	}
	parts := make([]string, len(reads))
	for i, r := range reads {
		parts[i] = strings.TrimSpace(r.Field + " " + r.Pointer + ": " + r.Value)
	}
	return " (read " + strings.Join(parts, "; ") + ")"
}

// held is the outcome of an attempt the gate held back.
func held(ctx context.Context, req Request, h *Hold, current *Terms) Outcome {
	activity.GetLogger(ctx).Info("attempt held", "key", req.Key, "destination", req.Destination, "state", h.State, "reason", h.Reason)
	return Outcome{Class: contract.ClassHeld, Hold: h, Error: "not sent: " + h.Reason, Terms: current}
}

// maxEarlierRunsNamed bounds the runs an earlier_run outcome names.
const maxEarlierRunsNamed = 5

// guard refuses to send when an earlier run of this operation may have
// applied the effect and the destination would not recognise a repeat of
// it. ok is true when the attempt may send. With an outcome ledger, the
// ledger alone answers, for every dedup kind (it outlives the runs); own is
// then this run's mark in it, if an earlier attempt left one. Without one,
// the workflow ID's earlier runs are read from the server, whatever the
// run's memo or input say (any client may set those); a destination that
// remembers keys for ever costs no read of the runs, and a run reads them
// once.
func (a *Activities) guard(ctx context.Context, req Request) (_ Outcome, own *ledger.Entry, ok bool) {
	c := req.Contract
	if a.Ledger != nil {
		// Every run that may have applied the operation marked it in the
		// ledger before sending, so the ledger's answer is whole: no run
		// an outsider starts adds to what is read.
		out, mine, ok := a.fromLedger(ctx, req, *c)
		if !ok {
			return out, nil, false
		}
		return Outcome{EarlierRunsChecked: !c.DeduplicatesForever()}, mine, true
	}
	if c.DeduplicatesForever() || req.EarlierRunsChecked {
		return Outcome{}, nil, true
	}
	if a.Runs == nil {
		return Outcome{Class: contract.ClassNotSent, Error: "not sent: this worker cannot read earlier runs"}, nil, false
	}
	info := activity.GetInfo(ctx)
	runs, err := a.Runs.Earlier(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
	if err != nil {
		return Outcome{Class: contract.ClassNotSent, Error: fmt.Sprintf("not sent: reading earlier runs failed: %v", err)}, nil, false
	}
	var blocking []EarlierRun
	for _, r := range runs {
		if !r.stops(req, *c) {
			continue
		}
		if len(blocking) < maxEarlierRunsNamed {
			blocking = append(blocking, r)
		}
	}
	if len(blocking) == 0 {
		return Outcome{EarlierRunsChecked: true}, nil, true
	}
	names := make([]string, len(blocking))
	for i, r := range blocking {
		names[i] = r.String()
	}
	return Outcome{
		Class:       contract.ClassEarlierRun,
		EarlierRuns: blocking,
		Error: fmt.Sprintf("not sent: this is not the operation's first run, and %s may have applied it: "+
			"dedup %s would not recognise a repeat", strings.Join(names, "; "), c.Dedup),
	}, nil, false
}

// stops says whether an earlier run stops this attempt from sending: it may
// have applied the operation, no reviewer has let the delivery send past
// it, and the destination would not recognise the repeat (it dedups for
// ever, or its key was first used within its retention). The one rule for
// the runs visibility lists and the runs the outcome ledger records.
func (r EarlierRun) stops(req Request, c contract.Contract) bool {
	return !r.NothingApplied && !slices.Contains(req.AcknowledgedRuns, r.RunID) && !c.DeduplicatesForever() &&
		(r.FirstAttempt.IsZero() || !c.DeduplicatesRepeat(time.Since(r.FirstAttempt)))
}

// cutShortOnStop cancels ctx StopGrace after the worker starts stopping, so
// that an attempt still running reports its outcome while the worker can
// still send it, instead of being found lost at its heartbeat timeout.
func (a *Activities) cutShortOnStop(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if a.StopGrace <= 0 {
		return ctx, cancel
	}
	stopping := activity.GetWorkerStopChannel(ctx)
	go func() {
		select {
		case <-stopping:
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(a.StopGrace)
		defer t.Stop()
		select {
		case <-t.C:
			activity.GetLogger(ctx).Warn("worker stopping: attempt cut short")
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Heartbeat tells Temporal the activity's worker is alive until stop is
// called, so a lost worker is noticed within the activity's heartbeat
// timeout (an attempt's: HeartbeatTimeout).
func Heartbeat(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { cancel(); <-done }
}
