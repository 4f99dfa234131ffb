package testsuite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// RealLab runs the fault cases against a real Temporal server. Each case
// gets fresh destinations and a Courier worker in this process (whose
// adapters the cases that fault an adapter wrap), except the cases that run
// `courier worker` and `courier deliver` processes of their own. Cases run
// one after another: they share the task queue.
type RealLab struct {
	// Temporal is the server, and the lab's client of its namespace, which
	// has Courier's search attributes.
	Temporal *lab.Temporal
	// Courier is the courier binary the process cases run.
	Courier string
	// Dir holds each case's data files.
	Dir string
	// Log receives the processes' output; nil discards it.
	Log io.Writer
	// RunID makes business ids unique to this run, so a server that keeps
	// history never joins a delivery of an earlier run.
	RunID string
	// AbandonParked closes, after each case, the deliveries it left
	// awaiting review, so a shared server's review queue keeps no faultlab
	// leftovers. The report has already recorded them parked.
	AbandonParked bool
}

// caseTimeout bounds one case; the slowest waits out a lost attempt.
const caseTimeout = 2 * time.Minute

// RealCases is Cases with the real-only cases runnable.
func RealCases() []Case {
	cases := Cases()
	for i, c := range cases {
		if run, ok := realOnly[c.Name]; ok {
			cases[i].Run = run
		}
	}
	return cases
}

// Execute runs one case against fresh destinations and returns its checked
// report. An error means the case could not be set up.
func (l *RealLab) Execute(ctx context.Context, c Case) (Report, error) {
	if c.Run == nil {
		return Report{}, fmt.Errorf("case %q has no real run", c.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, caseTimeout)
	defer cancel()
	dir, err := os.MkdirTemp(l.Dir, "case-")
	if err != nil {
		return Report{}, err
	}
	env, err := NewEnv(dir)
	if err != nil {
		return Report{}, err
	}
	defer env.Close()

	st := starter.New(l.Temporal.Client())
	rd := &Real{Starter: st, Temporal: l.Temporal.Client(), Signal: c.Name == reviewBySignal, rl: l}
	if !ownWorkers[c.Name] {
		stop, err := l.startWorker(env)
		if err != nil {
			return Report{}, err
		}
		defer stop()
	}
	id := caseID(c)
	r := &Run{Env: env, Deliverer: rd, ID: func(base string) string { return id(base) + "-" + l.RunID }}
	rep := c.Execute(ctx, r)
	if l.AbandonParked {
		l.abandon(ctx, rd.Parked())
	}
	if c.Name == reviewBySignal {
		checkReviewVia(&rep, rd.Results(), "signal")
	}
	return rep, nil
}

// reviewBySignal is the case whose decision goes through the signal, to
// prove that path on a real server; every other review uses the update.
const reviewBySignal = "review"

// checkReviewVia fails a report whose resolved delivery did not accept its
// decision through via.
func checkReviewVia(rep *Report, results []workflows.DeliveryResult, via string) {
	for _, res := range results {
		if res.Status != workflows.StatusDeliveredByReview || res.Review == nil {
			continue
		}
		for _, d := range res.Review.Decisions {
			if d.Accepted && d.Via == via {
				if rep.Extra == nil {
					rep.Extra = map[string]any{}
				}
				rep.Extra["review_via"] = via
				return
			}
		}
	}
	rep.Failures = append(rep.Failures, "review: no decision accepted by "+via)
	rep.Passed = false
}

// startWorker runs a Courier worker over env's destinations until stop.
func (l *RealLab) startWorker(env *Env) (stop func(), err error) {
	c := l.Temporal.Client()
	ws := worker.New(c, env.Config, env.WorkerActivities(c), sdkworker.Options{})
	for i, w := range ws {
		if err := w.Start(); err != nil {
			for _, started := range ws[:i] {
				started.Stop()
			}
			return nil, fmt.Errorf("start worker: %w", err)
		}
	}
	return func() {
		for _, w := range ws {
			w.Stop()
		}
	}, nil
}

// Run runs every case, in the seeds' order.
func (l *RealLab) Run(ctx context.Context) (LabReport, error) {
	rep := LabReport{Status: "PASS", Mode: "real", Environment: environment()}
	for _, c := range RealCases() {
		r, err := l.Execute(ctx, c)
		if err != nil {
			return rep, fmt.Errorf("case %q: %w", c.Name, err)
		}
		if !r.Passed {
			rep.Status = "FAIL"
		}
		rep.Cases = append(rep.Cases, r)
	}
	return rep, nil
}

// RealOptions configure RunReal.
type RealOptions struct {
	// Courier is the courier binary the process cases run.
	Courier string
	// Logger receives the SDK's logs; nil discards them.
	Logger *slog.Logger
	// Log receives the dev server's and the processes' output.
	Log io.Writer
}

// RunReal runs every case against the server TEMPORAL_ADDRESS names, or a
// dev server of its own (in memory), with fresh destinations under a
// temporary folder and real worker and client processes.
func RunReal(ctx context.Context, o RealOptions) (LabReport, error) {
	began := time.Now()
	if o.Log == nil {
		o.Log = io.Discard
	}
	dir, err := os.MkdirTemp("", "courier-faultlab-real-")
	if err != nil {
		return LabReport{}, err
	}
	defer os.RemoveAll(dir)
	t, err := lab.StartTemporal(ctx, lab.TemporalOptions{UseEnvironment: true, Log: o.Log, Logger: o.Logger})
	if err != nil {
		return LabReport{}, err
	}
	defer t.Close()
	rl := &RealLab{Temporal: t, Courier: o.Courier, Dir: dir, Log: o.Log, RunID: uuid.NewString()[:8], AbandonParked: !t.Own}
	rep, err := rl.Run(ctx)
	if err != nil {
		return rep, err
	}
	rep.Environment["temporal"] = t.HostPort
	if t.Own {
		rep.Environment["temporal"] = "dev server (in memory, started for this run)"
	}
	if v, err := serverVersion(ctx, t.Client()); err == nil {
		rep.Environment["temporal_server"] = v
	}
	rep.Environment["wall_seconds"] = time.Since(began).Round(time.Millisecond).Seconds()
	return rep, nil
}

// abandon closes parked deliveries; the case's worker is still running.
func (l *RealLab) abandon(ctx context.Context, keys []string) {
	st := starter.New(l.Temporal.Client())
	for _, key := range keys {
		_, err := st.Review(ctx, key, workflows.ReviewDecision{
			Decision: workflows.DecisionAbandon, Reviewer: "faultlab", Note: "faultlab run finished with this case"})
		if err != nil {
			slog.Warn("faultlab: could not abandon a parked delivery", "key", key, "error", err)
			continue
		}
		// Closed before the case's worker stops: the decision is recorded
		// in the outcome ledger by a step of its own.
		if _, err := st.Result(ctx, key, ""); err != nil {
			if _, ok := workflows.UndeliveredResult(err); !ok {
				slog.Warn("faultlab: an abandoned delivery did not close", "key", key, "error", err)
			}
		}
	}
}

func serverVersion(ctx context.Context, c client.Client) (string, error) {
	info, err := c.WorkflowService().GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{})
	if err != nil {
		return "", err
	}
	if v := info.GetServerVersion(); v != "" {
		return v, nil
	}
	return "", errors.New("server did not say its version")
}

// worker starts `courier worker` over the destinations file cfg, with env
// added to its environment; the workers of one case share the outcome
// ledger beside cfg.
func (l *RealLab) worker(ctx context.Context, cfg string, env ...string) (*lab.Worker, error) {
	return lab.StartWorker(ctx, lab.WorkerOptions{Courier: l.Courier, Destinations: cfg, Temporal: l.Temporal,
		Env: env, Args: []string{"--log-level", "warn"}, Log: l.Log,
		Ledger: "sqlite:" + filepath.Join(filepath.Dir(cfg), lab.OutcomesDB)})
}

// caseDir is a file in the case's data folder.
func caseDir(env *Env, name string) string { return filepath.Join(filepath.Dir(env.LedgerPath), name) }
