// Package bench measures Courier side by side with Temporal's own ceiling on
// the same server (courier-lab bench runs it; lab only), in one run,
// interleaved so that drift on a shared machine hits every side alike:
//
//   - bare: a workflow with one no-op activity, the least Temporal does for
//     one durable side effect;
//   - courier-key / courier-unique-commit: happy-path deliveries through the
//     starter to the sandbox's key destination and to a SQLite ledger;
//   - direct: plain HTTP POSTs to the same sandbox, no orchestration.
//
// It also reads the histories, storms one operation with concurrent
// starts, parks deliveries for review and resolves them, and times the key
// and fingerprint. Every figure with a target is listed in Report.Targets.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/starter"
)

// Sides of the throughput comparison.
const (
	SideBare         = "bare"
	SideKey          = "courier-key"
	SideUniqueCommit = "courier-unique-commit"
	SideDirect       = "direct"
)

// Phases of a run.
const (
	PhaseThroughput = "throughput"
	PhaseHistory    = "history"
	PhaseStorm      = "storm"
	PhaseParked     = "parked"
	PhaseKey        = "key"
)

// AllPhases is the default run.
var AllPhases = []string{PhaseThroughput, PhaseHistory, PhaseStorm, PhaseParked, PhaseKey}

// Options of a run. Zero values take the defaults of the full run.
type Options struct {
	Phases      []string
	Concurrency []int
	// Rounds of each side at each concurrency, interleaved.
	Rounds int
	// Window each side is measured per round, after a Lead that is run but
	// not measured.
	Window time.Duration
	Lead   time.Duration
	// DirectWindow is the direct side's window: it needs far less time to
	// give steady figures.
	DirectWindow time.Duration
	// Warmup runs every side briefly before measuring; negative skips it.
	Warmup time.Duration
	// Storm is how many callers start the same operation at once.
	Storm int
	// Parked is how many deliveries are parked for review, then resolved.
	Parked int
	// KeyRuns is how many runs of the key + fingerprint benchmark give
	// its median.
	KeyRuns int
	// Smoke shrinks what has no other knob (history samples).
	Smoke bool

	// ServerPIDs and ServerMetrics, on an external server (TEMPORAL_ADDRESS),
	// are its processes on this machine, whose CPU time the throughput
	// tables split out, and their Prometheus endpoints
	// (http://host:port/metrics), from which the server-work section
	// counts what each workflow asked of it. A server of several nodes
	// names each node's: the figures are their sums. Empty leaves those
	// out; a dev server of the benchmark's own gives its own.
	ServerPIDs    []int
	ServerMetrics []string

	// Courier is the courier binary, run as the `courier worker`.
	Courier string
	// KeepDir keeps the temporary directory (databases) for inspection.
	KeepDir bool
	// Logger receives the SDK's warnings; Log the dev server's and the
	// worker's output (the worker logs at info when Log is set); Progress
	// one line per step. All may be nil.
	Logger   *slog.Logger
	Log      io.Writer
	Progress io.Writer
}

// Defaults of the full run: about seven minutes on a 2-core machine.
func (o Options) withDefaults() Options {
	if len(o.Phases) == 0 {
		o.Phases = AllPhases
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 16, 64}
	}
	if o.Rounds <= 0 {
		o.Rounds = 4
	}
	if o.Window <= 0 {
		o.Window = 5 * time.Second
	}
	if o.Lead == 0 {
		o.Lead = time.Second
	}
	if o.DirectWindow <= 0 {
		o.DirectWindow = min(o.Window, 2*time.Second)
	}
	if o.Warmup == 0 {
		o.Warmup = 2 * time.Second
	}
	if o.Storm <= 0 {
		o.Storm = 64
	}
	if o.Parked <= 0 {
		o.Parked = 1000
	}
	if o.KeyRuns <= 0 {
		o.KeyRuns = 5
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// Smoke is a run of a few seconds for CI: every phase, tiny sizes. Its
// figures are well-formed but say nothing about the targets.
func Smoke(o Options) Options {
	o.Concurrency = []int{1, 4}
	o.Rounds = 1
	o.Window = time.Second
	o.Lead = -1
	o.DirectWindow = 500 * time.Millisecond
	o.Warmup = -1
	o.Storm = 8
	o.Parked = 10
	o.KeyRuns = 1
	o.Smoke = true
	return o
}

func (o Options) progress(format string, args ...any) {
	fmt.Fprintf(o.Progress, "bench: "+format+"\n", args...)
}

func (o Options) has(phase string) bool { return slices.Contains(o.Phases, phase) }

// Report is one run's figures.
type Report struct {
	Started        time.Time       `json:"started"`
	Seconds        float64         `json:"seconds"`
	Setup          Setup           `json:"setup"`
	Throughput     []Summary       `json:"throughput,omitempty"`
	Ratios         []Ratio         `json:"ratios,omitempty"`
	History        []HistoryCount  `json:"history,omitempty"`
	ServerWork     []ServerWork    `json:"server_work,omitempty"`
	Storm          *StormResult    `json:"storm,omitempty"`
	Parked         *ParkedResult   `json:"parked,omitempty"`
	KeyFingerprint *KeyFingerprint `json:"key_fingerprint,omitempty"`
	Targets        []Target        `json:"targets"`
}

// Setup says what was measured, on what.
type Setup struct {
	Server string `json:"server"`
	// Temporal is the server and namespace the run used; ServerPIDs and
	// ServerMetrics where its CPU time and counters were read and summed,
	// if anywhere.
	Temporal      lab.ServerInfo `json:"temporal"`
	ServerPIDs    []int          `json:"server_pids,omitempty"`
	ServerMetrics []string       `json:"server_metrics,omitempty"`
	Worker        string         `json:"worker"`
	CPUs          int            `json:"cpus"`
	GoVersion     string         `json:"go_version"`
	Phases        []string       `json:"phases"`
	Concurrency   []int          `json:"concurrency,omitempty"`
	Rounds        int            `json:"rounds,omitempty"`
	WindowSeconds float64        `json:"window_seconds,omitempty"`
	LeadSeconds   float64        `json:"lead_seconds,omitempty"`
}

// Target is one target next to its measurement.
type Target struct {
	Name     string  `json:"name"`
	Target   string  `json:"target"`
	Measured float64 `json:"measured"`
	Pass     bool    `json:"pass"`
}

// Failed lists the targets that failed.
func (r Report) Failed() []Target {
	var out []Target
	for _, t := range r.Targets {
		if !t.Pass {
			out = append(out, t)
		}
	}
	return out
}

// runner is one run in progress.
type runner struct {
	opts    Options
	st      *stack
	starter *starter.Client
	runID   string
	seq     atomic.Int64
	payload []byte
}

// Run starts the stack, runs the phases and returns the report. An error
// means the benchmark itself could not run; failed targets are in the report.
func Run(ctx context.Context, o Options) (Report, error) {
	o = o.withDefaults()
	rep := Report{Started: time.Now().UTC()}
	for _, p := range o.Phases {
		if !slices.Contains(AllPhases, p) {
			return rep, fmt.Errorf("unknown phase %q; use %s", p, strings.Join(AllPhases, ", "))
		}
	}
	if err := checkServer(ctx, o); err != nil {
		return rep, err
	}
	rep.Setup = Setup{
		Server: "Temporal dev server (CLI " + devserver.CLIVersion + "), SQLite file",
		Worker: "`courier worker` subprocess; the bare workflow's worker in the bench process",
		CPUs:   runtime.NumCPU(), GoVersion: runtime.Version(), Phases: o.Phases,
	}
	if o.has(PhaseThroughput) {
		rep.Setup.Concurrency, rep.Setup.Rounds = o.Concurrency, o.Rounds
		rep.Setup.WindowSeconds, rep.Setup.LeadSeconds = o.Window.Seconds(), max(o.Lead, 0).Seconds()
	}

	// The key phase needs no stack, and is timed before anything else loads
	// the machine.
	if o.has(PhaseKey) {
		o.progress("timing key + fingerprint of a 1 KiB payload")
		kf := measureKeyFingerprint(o.KeyRuns)
		rep.KeyFingerprint = &kf
	}
	needStack := false
	for _, p := range o.Phases {
		needStack = needStack || p != PhaseKey
	}
	if needStack {
		st, err := startStack(ctx, o)
		if err != nil {
			return rep, err
		}
		defer st.close()
		rep.Setup.Temporal, rep.Setup.ServerPIDs, rep.Setup.ServerMetrics = st.Temporal.Info(), st.serverPIDs, st.metricsURLs
		if !st.Temporal.Own {
			rep.Setup.Server = "Temporal server at " + st.Temporal.HostPort
		}
		r := &runner{
			opts: o, st: st, starter: st.Starter,
			runID:   strconv.FormatInt(time.Now().Unix(), 36) + strconv.Itoa(rand.IntN(1000)),
			payload: ticketPayload,
		}
		if err := r.run(ctx, &rep); err != nil {
			return rep, err
		}
	}
	rep.Targets = targets(rep, o)
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, nil
}

func (r *runner) run(ctx context.Context, rep *Report) error {
	o := r.opts
	if o.has(PhaseThroughput) {
		sums, err := r.throughput(ctx)
		if err != nil {
			return err
		}
		rep.Throughput, rep.Ratios = sums, ratios(sums)
	}
	if o.has(PhaseHistory) {
		h, work, err := r.history(ctx)
		if err != nil {
			return err
		}
		rep.History, rep.ServerWork = h, work
	}
	if o.has(PhaseStorm) {
		s, err := r.storm(ctx)
		if err != nil {
			return err
		}
		rep.Storm = &s
	}
	if o.has(PhaseParked) {
		p, err := r.parked(ctx)
		if err != nil {
			return err
		}
		rep.Parked = &p
	}
	return ctx.Err()
}
