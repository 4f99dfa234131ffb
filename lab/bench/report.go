package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/abde64c9/courier/worker"
)

// The targets. Ratios of throughput and latency under load are reported
// but are not targets: on a shared 2-core machine noise decides them. The
// counts of what a delivery asks of the server do not drift.
const (
	// maxP50VsBare bounds the happy path one at a time.
	maxP50VsBare = 1.05
	// maxHistoryEvents: the bare workflow's 11, the state upsert, and the
	// deliver update's accepted and completed events.
	maxHistoryEvents = 14
	// Server work per delivery, at most the bare workflow's.
	maxFrontendCalls    = 8
	maxDatabaseRequests = 14
	// maxAnswerAfterParkMs bounds a parked delivery's caller's wait.
	maxAnswerAfterParkMs = 1000
	maxParkedRSSMB       = 150
	// maxKeyFingerprintShare bounds key + fingerprint as a share of a
	// delivery's worker CPU: what matters, not its microseconds.
	maxKeyFingerprintShare = 0.01
)

// background are server operations that are no delivery's work: the
// worker's awaiting-review gauge, the task queues' own bookkeeping.
var background = []string{"CountWorkflowExecutions", "visibility CountWorkflowExecutions", "matching UpdateTaskQueue",
	// Workers' reads of the destinations' gates: one a second per worker,
	// whatever the deliveries.
	"ListWorkflowExecutions", "visibility ListWorkflowExecutions"}

// perDelivery totals m without the background operations.
func perDelivery(m map[string]float64) float64 {
	t := 0.0
	for k, v := range m {
		if !slices.Contains(background, k) {
			t += v
		}
	}
	return t
}

func targets(rep Report, o Options) []Target {
	var ts []Target
	add := func(name, target string, measured float64, pass bool) {
		ts = append(ts, Target{Name: name, Target: target, Measured: round(measured), Pass: pass})
	}
	for _, r := range rep.Ratios {
		if r.Concurrency != 1 {
			continue
		}
		add(fmt.Sprintf("p50 latency %s / bare, concurrency 1", r.Side),
			fmt.Sprintf("<= %.2f", maxP50VsBare), r.P50VsBare, r.P50VsBare > 0 && r.P50VsBare <= maxP50VsBare)
	}
	for _, w := range rep.ServerWork {
		if !targeted(w.Side) {
			continue
		}
		calls, reqs := perDelivery(w.Calls), perDelivery(w.Requests)
		add("frontend calls per delivery, "+w.Side, fmt.Sprintf("<= %d", maxFrontendCalls), calls, calls > 0 && calls <= maxFrontendCalls)
		add("database requests per delivery, "+w.Side, fmt.Sprintf("<= %d", maxDatabaseRequests), reqs, reqs > 0 && reqs <= maxDatabaseRequests)
	}
	if len(rep.Throughput) > 0 {
		failed := 0
		for _, s := range rep.Throughput {
			failed += s.Errors
		}
		add("throughput: failed operations, all sides", "= 0", float64(failed), failed == 0)
	}
	for _, h := range rep.History {
		if !targeted(h.Side) {
			continue
		}
		add("history events per happy-path delivery, "+h.Side, fmt.Sprintf("<= %d", maxHistoryEvents),
			float64(h.Events), h.Events > 0 && h.Events <= maxHistoryEvents)
	}
	ts = append(ts, costTargets(rep.History)...)
	if s := rep.Storm; s != nil {
		answered := 0
		for _, n := range s.Statuses {
			answered += n
		}
		add(fmt.Sprintf("duplicate storm: %d callers answered", s.Callers), fmt.Sprintf("= %d", s.Callers),
			float64(answered), answered == s.Callers && s.Errors == 0)
		vsTemporal := div(s.Seconds, s.BareSeconds)
		add("duplicate storm: time until all answered / Temporal's own storm", "<= 1.00",
			vsTemporal, vsTemporal > 0 && vsTemporal <= 1)
		add("duplicate storm: effects stored", "= 1", float64(s.Effects), s.Effects == 1)
	}
	if p := rep.Parked; p != nil {
		add(fmt.Sprintf("parked reviews (%d): worker RSS, peak MB", p.Deliveries), fmt.Sprintf("<= %d", maxParkedRSSMB),
			p.WorkerRSSPeakMB, p.WorkerRSSPeakMB > 0 && p.WorkerRSSPeakMB <= maxParkedRSSMB)
		add(fmt.Sprintf("parked reviews (%d): parked", p.Deliveries), fmt.Sprintf("= %d", p.Deliveries),
			float64(p.Parked), p.Parked == p.Deliveries)
		add(fmt.Sprintf("parked reviews (%d): resolved", p.Deliveries), fmt.Sprintf("= %d", p.Deliveries),
			float64(p.Resolved), p.Resolved == p.Deliveries)
		add(fmt.Sprintf("parked reviews (%d): lost", p.Deliveries), "= 0", float64(p.Lost), p.Lost == 0)
		add(fmt.Sprintf("parked delivery: caller answered after the park, ms (max of %d)", p.AnswerSamples),
			fmt.Sprintf("<= %d", maxAnswerAfterParkMs), p.AnswerAfterParkMaxMs,
			p.AnswerSamples > 0 && p.AnswerAfterParkMaxMs <= maxAnswerAfterParkMs)
		add(fmt.Sprintf("parked reviews (%d): extra effects", p.Deliveries), "= 0",
			float64(p.ExtraEffects), p.ExtraEffects == 0 && p.Effects == p.Deliveries)
	}
	if k := rep.KeyFingerprint; k != nil {
		// The worker derives both once per attempt's workflow task and once
		// at the start; against its CPU per delivery one at a time.
		for _, t := range rep.Throughput {
			if t.Side != SideKey || t.Concurrency != 1 || t.CPUms.Worker <= 0 {
				continue
			}
			share := k.NsPerOp / (t.CPUms.Worker * 1e6)
			add("key + fingerprint of 1 KiB / worker CPU per delivery", fmt.Sprintf("<= %.2f", maxKeyFingerprintShare),
				share, k.Error == "" && share <= maxKeyFingerprintShare)
		}
	}
	return ts
}

// targeted: the plain deliveries' counts are targets; the bare workflow's
// are the ceiling, and the deliveries from workflow code (Nexus, child)
// are reported against them, a caller workflow's work added.
func targeted(side string) bool { return side == SideKey || side == SideUniqueCommit }

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// round keeps three decimals: enough to compare commits, short to read.
func round(f float64) float64 {
	return float64(int64(f*1000+0.5*sign(f))) / 1000
}

func sign(f float64) float64 {
	if f < 0 {
		return -1
	}
	return 1
}

// Markdown writes the report as Markdown tables.
func (r Report) Markdown(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	s := r.Setup
	p("## Courier bench")
	p("")
	p("%s; worker: %s; %d CPUs; %s; %s; %.0f s.", s.Server, s.Worker, s.CPUs, s.GoVersion,
		r.Started.Format("2006-01-02 15:04 UTC"), r.Seconds)
	if s.Temporal.Address != "" {
		p("")
		p("Server: %s; %s.", s.Temporal, serverSources(s))
	}
	if len(r.Throughput) > 0 {
		how := fmt.Sprintf("each side measured for %.0f s per round after an unmeasured lead of %.0f s (direct: less)",
			s.WindowSeconds, s.LeadSeconds)
		p("")
		p("### Throughput and latency")
		p("")
		p("Closed loop, %d interleaved rounds in a balanced order, %s. CPU is milliseconds per operation by process.", s.Rounds, how)
		p("")
		p("| concurrency | side | ops | ops/s | p50 ms | p95 ms | p99 ms | errors | CPU server | CPU worker | CPU bench |")
		p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, t := range r.Throughput {
			p("| %d | %s | %d | %.1f | %.1f | %.1f | %.1f | %d | %.1f | %.1f | %.1f |", t.Concurrency, t.Side, t.Ops,
				t.PerSecond, t.P50ms, t.P95ms, t.P99ms, t.Errors, t.CPUms.Server, t.CPUms.Worker, t.CPUms.Bench)
		}
		p("")
		p("| concurrency | side | throughput / bare | p99 / bare | throughput / direct |")
		p("|---:|---|---:|---:|---:|")
		for _, x := range r.Ratios {
			p("| %d | %s | %.2f | %.2f | %.3f |", x.Concurrency, x.Side, x.VsBare, x.P99VsBare, x.VsDirect)
		}
		p("")
		p("Where the time went under load (ms, means over up to %d measured workflows of each side, from their recorded event times):", loadTimingSamples)
		p("")
		p("| concurrency | side | %s |", timingsHead)
		p("|---:|---|%s", strings.Repeat("---:|", 9))
		for _, t := range r.Throughput {
			if t.Timings != nil {
				p("| %d | %s | %s |", t.Concurrency, t.Side, t.Timings.row())
			}
		}
	}
	if len(r.History) > 0 {
		p("")
		p("### History events per workflow")
		p("")
		p("| side | events | bytes | billable actions | actions by kind (from history) | events (bytes) |")
		p("|---|---:|---:|---:|---|---|")
		for _, h := range r.History {
			p("| %s | %d | %d | %s | %s | %s |", h.Side, h.Events, h.Bytes, h.actions(), kinds(h.ActionKinds), h.eventSizes())
		}
		p("")
		p("Billable actions are Temporal Cloud's: from the server's own `action` metric where it is at hand, " +
			"else derived from the events (marked *). Actions by kind are derived from the events.")
		p("")
		p("Where one workflow's time goes, one at a time (medians of %d, ms, from the recorded event times):", r.History[0].Samples)
		p("")
		p("| side | %s |", timingsHead)
		p("|---|%s", strings.Repeat("---:|", 9))
		for _, h := range r.History {
			p("| %s | %s |", h.Side, h.Timings.row())
		}
	}
	if len(r.ServerWork) > 0 {
		serverWork(p, r.ServerWork)
	}
	if st := r.Storm; st != nil {
		p("")
		p("### Duplicate storm")
		p("")
		p("| callers | all answered in | one delivery's p50 | ratio | statuses | errors | effects | delivery closed at | answers first / median |")
		p("|---:|---:|---:|---:|---|---:|---:|---:|---|")
		p("| %d | %.0f ms | %.0f ms | %.2f | %s | %d | %d | %.0f ms | %.0f / %.0f ms |", st.Callers, st.Seconds*1000,
			st.ReferenceP50ms, div(st.Seconds*1000, st.ReferenceP50ms), statuses(st.Statuses), st.Errors, st.Effects,
			st.ClosedMs, st.FirstAnswerMs, st.MedianAnswerMs)
		p("")
		p("Temporal's own storm, the same callers starting one bare workflow ID and waiting for it: %.0f ms, "+
			"%.2f × one bare workflow's p50 (%.0f ms).", st.BareSeconds*1000, div(st.BareSeconds*1000, st.BareReferenceP50ms),
			st.BareReferenceP50ms)
	}
	if pk := r.Parked; pk != nil {
		p("")
		p("### Parked reviews")
		p("")
		p("| deliveries | parked | time to park | resolved | time to resolve | lost | effects | extra | worker RSS idle / parked / peak |")
		p("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
		p("| %d | %d | %.1f s | %d | %.1f s | %d | %d | %d | %.0f / %.0f / %.0f MB |", pk.Deliveries, pk.Parked,
			pk.ParkSeconds, pk.Resolved, pk.ResolveSeconds, pk.Lost, pk.Effects, pk.ExtraEffects,
			pk.WorkerRSSIdleMB, pk.WorkerRSSParkedMB, pk.WorkerRSSPeakMB)
		p("")
		p("A parked delivery's caller (`Deliver`, one Update-with-Start) answered %.0f ms (median) and at most %.0f ms "+
			"after the park, over %d deliveries.", pk.AnswerAfterParkP50ms, pk.AnswerAfterParkMaxMs, pk.AnswerSamples)
		if pk.Unstored > 0 {
			p("")
			p("%d parked without an effect stored (the reviewer retried them), first: %s", pk.Unstored, pk.FirstUnstored)
		}
		if pk.FirstError != "" {
			p("")
			p("%d errors, first: %s", pk.Errors, pk.FirstError)
		}
	}
	if k := r.KeyFingerprint; k != nil && len(k.RunsNsPerOp) > 0 {
		p("")
		p("### Key + fingerprint")
		p("")
		p("| payload | ns/op, median of %d runs | slowest / fastest run | allocs/op | B/op |", len(k.RunsNsPerOp))
		p("|---:|---:|---:|---:|---:|")
		p("| %d B | %.0f | %.0f / %.0f | %d | %d |", k.PayloadBytes, k.NsPerOp,
			slices.Max(k.RunsNsPerOp), slices.Min(k.RunsNsPerOp), k.AllocsPerOp, k.BytesPerOp)
	}
	p("")
	p("### Targets")
	p("")
	p("| target | goal | measured | |")
	p("|---|---|---:|---|")
	for _, t := range r.Targets {
		mark := "pass"
		if !t.Pass {
			mark = "**FAIL**"
		}
		p("| %s | %s | %g | %s |", t.Name, t.Target, t.Measured, mark)
	}
	for _, t := range r.Throughput {
		if t.FirstError != "" {
			p("")
			p("%s at concurrency %d: %d errors, first: %s", t.Side, t.Concurrency, t.Errors, t.FirstError)
		}
	}
}

// serverSources says where the server's CPU time and counters came from,
// and how many processes and endpoints they sum.
func serverSources(s Setup) string {
	cpu := "its CPU time not read (no server PID)"
	switch len(s.ServerPIDs) {
	case 0:
	case 1:
		cpu = fmt.Sprintf("its CPU time from PID %d", s.ServerPIDs[0])
	default:
		pids := make([]string, len(s.ServerPIDs))
		for i, pid := range s.ServerPIDs {
			pids[i] = strconv.Itoa(pid)
		}
		cpu = fmt.Sprintf("its CPU time summed over %d processes (PIDs %s)", len(pids), strings.Join(pids, ", "))
	}
	work := "its work per workflow not counted (no metrics address)"
	switch len(s.ServerMetrics) {
	case 0:
	case 1:
		work = "its work per workflow from " + s.ServerMetrics[0]
	default:
		work = fmt.Sprintf("its work per workflow summed over %d endpoints (%s)", len(s.ServerMetrics), strings.Join(s.ServerMetrics, ", "))
	}
	return cpu + ", " + work
}

func statuses(m map[string]int) string {
	var parts []string
	for _, k := range []string{"created", "duplicate"} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
		}
	}
	for k, n := range m {
		if k != "created" && k != "duplicate" {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, ", ")
}

// serverWork prints, per workflow of each side, the calls the frontend
// answered and the requests the server made of its database.
func serverWork(p func(string, ...any), work []ServerWork) {
	p("")
	p("What each workflow asked of the server, one at a time (per workflow, from the server's metrics over %d workflows of each side):", work[0].Samples)
	countTable(p, "frontend call", work, func(w ServerWork) (map[string]float64, float64) { return w.Calls, w.TotalCalls })
	countTable(p, "database request", work, func(w ServerWork) (map[string]float64, float64) { return w.Requests, w.TotalRequests })
	row := "| **time in the database, ms** |"
	for _, w := range work {
		row += fmt.Sprintf(" %.1f |", w.DBMs)
	}
	p("%s", row)
	p("")
	p("CountWorkflowExecutions, where it shows, is the worker's awaiting-review gauge (one count per destination every %s), "+
		"in whichever batch it fell: not work of a delivery.", worker.DefaultReviewPoll)
}

func countTable(p func(string, ...any), what string, work []ServerWork, counts func(ServerWork) (map[string]float64, float64)) {
	p("")
	head, rule := "| "+what+" |", "|---|"
	var keys []string
	for _, w := range work {
		head += " " + w.Side + " |"
		rule += "---:|"
		m, _ := counts(w)
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	p("%s", head)
	p("%s", rule)
	for _, k := range keys {
		row := "| " + k + " |"
		for _, w := range work {
			m, _ := counts(w)
			row += fmt.Sprintf(" %.1f |", m[k])
		}
		p("%s", row)
	}
	row := "| **total** |"
	for _, w := range work {
		_, total := counts(w)
		row += fmt.Sprintf(" **%.1f** |", total)
	}
	p("%s", row)
}

const timingsHead = "caller | server run | 1st task wait | 1st task | activity wait | activity | 2nd task wait | 2nd task | caller overhead"

// row is t's cells under timingsHead.
func (t Timings) row() string {
	return fmt.Sprintf("%.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f", t.Caller, t.Server,
		t.FirstTaskWait, t.FirstTask, t.ActivityWait, t.Activity, t.LastTaskWait, t.LastTask, t.CallerOverhead)
}
