package soak

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// Summary is what a soak did and found. Every count of effects comes from
// the destinations' own stores; every status from Temporal.
type Summary struct {
	Seed       int64 `json:"seed"`
	Deliveries int   `json:"deliveries"`
	// Temporal is the server and namespace the soak ran against.
	Temporal lab.ServerInfo `json:"temporal"`
	// ServerRestart is how the server was restarted: RestartDevServer,
	// RestartByCommand (RestartCommand's) or RestartNone.
	ServerRestart  string `json:"server_restart"`
	RestartCommand string `json:"restart_command,omitempty"`
	// ByDedup is how many deliveries went to each dedup kind.
	ByDedup map[contract.Dedup]int `json:"by_dedup"`
	// Statuses is how the deliveries ended (awaiting_review if parked).
	Statuses map[string]int `json:"statuses"`
	Faults   Faults         `json:"faults"`
	// FaultsInjected is Faults.Total.
	FaultsInjected int `json:"faults_injected"`
	// FaultsApplied counts, from the sandbox's request logs, the requests
	// a fault actually hit.
	FaultsApplied map[string]int `json:"faults_applied"`
	// Paused is the destination paused mid-run (Options.Pause), if any.
	Paused         *PauseSummary `json:"paused,omitempty"`
	WorkerKills    int           `json:"worker_kills"`
	WorkerExits    int           `json:"worker_exits"` // exits the soak did not cause, restarted
	ServerRestarts int           `json:"server_restarts"`
	StartRetries   int           `json:"start_retries"`
	// AttemptsLost are attempts Temporal declared lost (the worker running
	// them died, or they outlived their timeout): the kills' footprint.
	AttemptsLost int `json:"attempts_lost"`
	Effects      int `json:"effects"`
	// Duplicates are effects beyond one on key, unique-commit and lookup
	// destinations, and on none destinations beyond one plus the retries a
	// reviewer decided.
	Duplicates int `json:"duplicates"`
	// ReviewedRepeats are second effects on none destinations that a
	// reviewer's retry decided (0 while the reviewer checks first).
	ReviewedRepeats int `json:"reviewed_repeats"`
	// Lost are deliveries that never started, are missing from
	// visibility, never settled, or claim an effect the destination lacks.
	Lost int `json:"lost"`
	// Reviews are the accepted review decisions recorded in the results;
	// ReviewsSent the ones the scripted reviewer saw accepted.
	Reviews     int            `json:"reviews"`
	ReviewsBy   map[string]int `json:"reviews_by_decision"`
	ReviewsSent int            `json:"reviews_sent"`
	Violations  []string       `json:"violations"`
	WallSeconds float64        `json:"wall_seconds"`
	// Dir keeps the run's files and logs when there was a violation.
	Dir string `json:"dir,omitempty"`
}

// How a soak restarts the server (Summary.ServerRestart).
const (
	// RestartDevServer: the soak's own dev server, stopped and started
	// again on its SQLite file and port.
	RestartDevServer = "dev-server"
	// RestartByCommand: an external server, restarted by the caller's
	// command (Options.RestartServer).
	RestartByCommand = "command"
	// RestartNone: an external server and no command to restart it.
	RestartNone = "none"
)

// Faults counts the faults injected, by kind.
type Faults struct {
	CloseAfterCommit  int `json:"close_after_commit"`
	DelayAfterCommit  int `json:"delay_after_commit"`
	DelayBeforeCommit int `json:"delay_before_commit"`
	Fail503Bursts     int `json:"fail_503_bursts"`
	// Validation counts deliveries sent with a payload the destination
	// refuses.
	Validation int `json:"validation"`
}

// Total is every fault injected.
func (f Faults) Total() int {
	return f.CloseAfterCommit + f.DelayAfterCommit + f.DelayBeforeCommit + f.Fail503Bursts + f.Validation
}

func (f *Faults) add(k sandbox.FaultKind) {
	switch k {
	case sandbox.FaultCloseAfterCommit:
		f.CloseAfterCommit++
	case sandbox.FaultDelayAfterCommit:
		f.DelayAfterCommit++
	case sandbox.FaultDelayBeforeCommit:
		f.DelayBeforeCommit++
	case sandbox.FaultFail503:
		f.Fail503Bursts++
	}
}

// Failed reports whether the soak found anything wrong.
func (s Summary) Failed() bool { return len(s.Violations) > 0 || s.Duplicates > 0 || s.Lost > 0 }

// finalStates are the states a delivery ends in.
var finalStates = []string{
	string(workflows.StatusCreated), string(workflows.StatusDuplicate), string(workflows.StatusConflict),
	string(workflows.StatusRejected), string(workflows.StatusAttemptLimit),
	string(workflows.StatusDeliveredByReview), string(workflows.StatusAbandoned),
}

// awaitSettled waits until every delivery has started and finished, as
// visibility shows it. False when time ran out first.
func (r *run) awaitSettled(ctx context.Context) bool {
	last := time.Now()
	for {
		states, err := r.visibility(ctx)
		if err == nil {
			counts := map[string]int{}
			final := 0
			for _, d := range r.deliveries {
				s, ok := states[d.key]
				if !ok {
					s = "not listed yet"
				}
				counts[s]++
				if slices.Contains(finalStates, s) {
					final++
				}
			}
			if final == len(r.deliveries) {
				return true
			}
			if time.Since(last) > 10*time.Second {
				last = time.Now()
				r.logf("settling: %d of %d finished; %s", final, len(r.deliveries), line(counts))
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(2 * time.Second):
		}
	}
}

// visibility is every delivery's CourierState, by key.
func (r *run) visibility(ctx context.Context) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	list, err := r.stack.Starter.List(ctx, starter.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(list))
	for _, d := range list {
		out[d.Key] = d.State
	}
	return out, nil
}

// check compares, for every delivery, what Temporal says happened with what
// the destination stored.
func (r *run) check(ctx context.Context) error {
	s := &r.sum
	s.ByDedup, s.Statuses, s.ReviewsBy = map[contract.Dedup]int{}, map[string]int{}, map[string]int{}
	s.FaultsInjected = s.Faults.Total()
	states, err := r.visibility(ctx)
	if err != nil {
		return fmt.Errorf("read visibility: %w", err)
	}
	effects, err := r.stack.Effects.All(ctx)
	if err != nil {
		return fmt.Errorf("read the destinations' stores: %w", err)
	}
	lost := func(d *delivery, format string, args ...any) {
		s.Lost++
		s.Violations = append(s.Violations, fmt.Sprintf("lost %s (%s): %s", d.in.BusinessID, d.in.Destination, fmt.Sprintf(format, args...)))
	}
	bad := func(d *delivery, format string, args ...any) {
		s.Violations = append(s.Violations, fmt.Sprintf("%s (%s): %s", d.in.BusinessID, d.in.Destination, fmt.Sprintf(format, args...)))
	}
	for _, d := range r.deliveries {
		s.ByDedup[d.dedup]++
		mine := effects[d.in.BusinessID]
		s.Effects += len(mine)
		state, ok := states[d.key]
		switch {
		case !d.started:
			lost(d, "never started")
			continue
		case !ok:
			lost(d, "started, but not in Temporal's visibility")
			continue
		}
		s.Statuses[state]++
		if state == string(workflows.StateAwaitingReview) {
			r.checkEffects(d, mine, nil, bad)
			continue
		}
		if !slices.Contains(finalStates, state) {
			lost(d, "still %s at the end", state)
			continue
		}
		res, err := starter.New(r.stack.Temporal.Client()).Result(ctx, d.key, "")
		if err != nil {
			bad(d, "read result: %v", err)
			continue
		}
		if string(res.Status) != state {
			bad(d, "visibility says %s, the result says %s", state, res.Status)
		}
		for _, a := range res.Attempts {
			if strings.HasPrefix(a.Error, "attempt lost") {
				s.AttemptsLost++
			}
		}
		r.checkEffects(d, mine, &res, bad)
		r.checkStatus(d, mine, res, lost, bad)
	}
	r.checkOrphans(effects, bad)
	s.FaultsApplied = map[string]int{}
	for _, svc := range r.sandboxServices() {
		for _, l := range r.stack.Sandbox.Requests(svc) {
			switch l.Result {
			case sandbox.ResultWrittenThenClosed, sandbox.ResultWrittenThenDelayed,
				sandbox.ResultDelayedThenClosed, sandbox.ResultUnavailable:
				s.FaultsApplied[string(l.Result)]++
			}
		}
	}
	return nil
}

// checkEffects counts the delivery's effects against what its destination's
// contract allows: one, or on a none destination one plus each retry a
// reviewer decided after looking.
func (r *run) checkEffects(d *delivery, mine []lab.Effect, res *workflows.DeliveryResult, bad func(*delivery, string, ...any)) {
	s := &r.sum
	n := len(mine)
	if d.dedup != contract.DedupNone {
		if n > 1 {
			s.Duplicates += n - 1
			bad(d, "%d effects at a %s destination", n, d.dedup)
		}
		return
	}
	retries := 0
	if res != nil && res.Review != nil {
		for _, rec := range res.Review.Decisions {
			if rec.Accepted && rec.Decision == workflows.DecisionRetry {
				retries++
			}
		}
	}
	if n > 1+retries {
		s.Duplicates += n - 1 - retries
		bad(d, "%d effects with %d reviewed retries: a second effect without a review decision", n, retries)
	}
	if n > 1 {
		s.ReviewedRepeats += min(n-1, retries)
	}
}

// checkStatus holds the final status against the destination's store.
func (r *run) checkStatus(d *delivery, mine []lab.Effect, res workflows.DeliveryResult,
	lost, bad func(*delivery, string, ...any)) {
	s := &r.sum
	if res.Review != nil {
		for _, rec := range res.Review.Decisions {
			if rec.Accepted {
				s.Reviews++
				s.ReviewsBy[rec.Decision]++
			}
		}
	}
	ids := make([]string, 0, len(mine))
	for _, e := range mine {
		ids = append(ids, e.ID)
	}
	switch res.Status {
	case workflows.StatusCreated, workflows.StatusDuplicate, workflows.StatusDeliveredByReview:
		switch {
		case len(mine) == 0:
			lost(d, "%s, but the destination holds no effect", res.Status)
		case res.Receipt == nil || !slices.Contains(ids, res.Receipt.ResourceID):
			bad(d, "%s with receipt %+v, which names none of the stored effects %v", res.Status, res.Receipt, ids)
		}
		if d.invalid {
			bad(d, "%s, but its payload is one the destination refuses", res.Status)
		}
	case workflows.StatusRejected:
		if len(mine) > 0 {
			bad(d, "rejected, but the destination holds %v", ids)
		}
		if !d.invalid {
			bad(d, "rejected a valid payload: %s", res.Error)
		}
	case workflows.StatusAttemptLimit:
		if len(mine) > 0 {
			bad(d, "gave up (%s) while the destination holds %v", res.Error, ids)
		}
	default: // conflict, abandoned: nothing in the soak leads there
		bad(d, "unexpected status %s: %s", res.Status, res.Error)
	}
}

// checkOrphans: every effect belongs to a delivery of this soak, under that
// delivery's key when the destination stores one.
func (r *run) checkOrphans(effects map[string][]lab.Effect, bad func(*delivery, string, ...any)) {
	byID := map[string]*delivery{}
	for _, d := range r.deliveries {
		byID[d.in.BusinessID] = d
	}
	for _, bid := range slices.Sorted(maps.Keys(effects)) {
		for _, e := range effects[bid] {
			d := byID[bid]
			switch {
			case d == nil:
				r.sum.Violations = append(r.sum.Violations, fmt.Sprintf("effect %s at %s belongs to no delivery (business id %q)", e.ID, e.Dest, bid))
			case e.Dest != d.in.Destination:
				bad(d, "effect %s stored at %s", e.ID, e.Dest)
			case e.Key != "" && e.Key != d.key:
				bad(d, "effect %s stored under key %s, not the delivery's %s", e.ID, e.Key, d.key)
			}
		}
	}
}

// PauseSummary is the mid-run pause of a destination.
type PauseSummary struct {
	Destination     string `json:"destination"`
	For             string `json:"for"`
	SentWhilePaused int    `json:"sent_while_paused"`
}
