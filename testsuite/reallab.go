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
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/abde64c9/courier/devserver"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// RealLab runs the fault cases against a real Temporal server. Each case
// gets fresh destinations and its own Courier worker in this process,
// except the cases that run their workers as separate processes. Cases run
// one after another: they share the task queue.
type RealLab struct {
	// Client is connected to the server's namespace, which has Courier's
	// search attributes.
	Client client.Client
	// HostPort and Namespace, when set, are given to helper processes as
	// TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE; otherwise they inherit this
	// process's Temporal environment.
	HostPort, Namespace string
	// Process is the command line that runs this program again as a helper
	// process: its main must call RealProcessMain when RealProcessRole is set.
	Process []string
	// Dir holds each case's data files.
	Dir string
	// Log receives the helper processes' output; nil is os.Stderr.
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

	st := starter.New(l.Client)
	rd := &Real{Starter: st, Temporal: l.Client, Signal: c.Name == reviewBySignal, lab: l}
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
	ws := worker.New(l.Client, env.Config, env.WorkerActivities(l.Client), sdkworker.Options{})
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
	// Client is a connected client to use; nil starts a dev server (in
	// memory) for the run.
	Client client.Client
	// Address names Client's server in the report.
	Address string
	// Process runs this program again as a helper process (see RealLab).
	Process []string
	// Logger receives the SDK's logs; nil discards them.
	Logger *slog.Logger
	// Log receives the dev server's and helper processes' output.
	Log io.Writer
}

// RunReal runs every case against a real server, fresh destinations under a
// temporary folder, and real worker and client processes.
func RunReal(ctx context.Context, o RealOptions) (LabReport, error) {
	began := time.Now()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	dir, err := os.MkdirTemp("", "courier-faultlab-real-")
	if err != nil {
		return LabReport{}, err
	}
	defer os.RemoveAll(dir)

	lab := &RealLab{Client: o.Client, Process: o.Process, Dir: dir, Log: o.Log, RunID: uuid.NewString()[:8],
		AbandonParked: o.Client != nil}
	server := o.Address
	if lab.Client == nil {
		srv, err := devserver.Start(ctx, devserver.Options{Log: o.Log,
			ClientOptions: client.Options{Logger: sdklog.NewStructuredLogger(o.Logger)}})
		if err != nil {
			return LabReport{}, err
		}
		defer func() { _ = srv.Stop() }()
		defer srv.Client().Close()
		lab.Client, lab.HostPort, lab.Namespace = srv.Client(), srv.FrontendHostPort(), "default"
		server = "dev server (in memory, started for this run)"
	}
	rep, err := lab.Run(ctx)
	if err != nil {
		return rep, err
	}
	rep.Environment["temporal"] = server
	if v, err := serverVersion(ctx, lab.Client); err == nil {
		rep.Environment["temporal_server"] = v
	}
	rep.Environment["wall_seconds"] = time.Since(began).Round(time.Millisecond).Seconds()
	return rep, nil
}

// abandon closes parked deliveries; the case's worker is still running.
func (l *RealLab) abandon(ctx context.Context, keys []string) {
	st := starter.New(l.Client)
	for _, key := range keys {
		_, err := st.Review(ctx, key, workflows.ReviewDecision{
			Decision: workflows.DecisionAbandon, Reviewer: "faultlab", Note: "faultlab run finished with this case"})
		if err != nil {
			slog.Warn("faultlab: could not abandon a parked delivery", "key", key, "error", err)
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

// caseDir is a file in the case's data folder.
func caseDir(env *Env, name string) string { return filepath.Join(filepath.Dir(env.LedgerPath), name) }
