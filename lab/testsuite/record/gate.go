package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/lab/wftest"
	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// gateSeed names the gate's scenarios in a history index.
const gateSeed = "gate"

// gateCoolDown is short, so that a scenario waits for its probes in seconds.
const gateCoolDown = 2 * time.Second

// gateConfig is the recording worker's destinations file: each scenario's
// destination and its breaker.
var gateConfig = destinations.Config{Destinations: map[string]destinations.Destination{
	"rec-breaker": {Contract: contract.Contract{Breaker: &contract.Breaker{
		Failures: 3, Window: contract.Duration(time.Minute), CoolDown: contract.Duration(gateCoolDown)}}},
	"rec-paused-breaker": {Contract: contract.Contract{Breaker: &contract.Breaker{
		Failures: 2, Window: contract.Duration(time.Minute), CoolDown: contract.Duration(time.Hour)}}},
	"rec-pause": {},
	"rec-resume-breaker": {Contract: contract.Contract{Breaker: &contract.Breaker{
		Failures: 2, Window: contract.Duration(time.Minute), CoolDown: contract.Duration(time.Hour)}}},
	"rec-plain":       {},
	"rec-own-stopped": {},
	"rec-own-hand":    {},
	"rec-signed": {Reviewers: destinations.Reviewers{
		{Name: "alice", Key: reviewproof.FormatPublicKey(gateAlice.Public().(ed25519.PublicKey)), Decisions: reviewproof.GateActions},
		{Name: "bob", Key: reviewproof.FormatPublicKey(gateBob.Public().(ed25519.PublicKey)), Decisions: reviewproof.Decisions},
	}},
}, Reviewers: destinations.Plain("alice", "bob")}

// gateAlice may pause and resume rec-signed, gateBob only review there.
var gateAlice, gateBob = gateKey(), gateKey()

func gateKey() ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

// gateScenario drives one destination's gate as workers and operators do.
type gateScenario struct {
	name, dest string
	run        func(ctx context.Context, g *gateDriver) error
}

var gateScenarios = []gateScenario{
	{"a bare run after terminate recovers the pause, a resume ends it", "rec-own-stopped", func(ctx context.Context, g *gateDriver) error {
		g.pause(ctx, gate.PauseRequest{Reason: "partner maintenance", By: "alice"})
		g.await(ctx, gate.Paused)
		g.fail(g.c.TerminateWorkflow(ctx, gate.WorkflowID(g.dest), "", "by hand"))
		bare := g.byHand(ctx, gate.WorkflowID(g.dest), gate.DestinationInput{Name: g.dest})
		g.until(ctx, "the bare run's recovered pause", func(st gate.DestinationState) bool { return st.Run == bare && st.State == gate.Paused })
		g.resume(ctx, gate.ResumeRequest{By: "bob", Note: "maintenance over"})
		g.await(ctx, gate.Closed)
		return g.err
	}},
	{"a run started by hand with a paused input holds nothing", "rec-own-hand", func(ctx context.Context, g *gateDriver) error {
		since := time.Now().Add(-time.Hour)
		forged := &gate.DestinationState{Name: g.dest, State: gate.Paused, Since: since, Breaker: gate.Breaker{State: gate.Closed},
			Paused: &gate.Pause{Reason: "mine now", By: "mallory", Since: since}}
		run := g.byHand(ctx, gate.WorkflowID(g.dest), gate.DestinationInput{Name: g.dest, State: forged})
		g.until(ctx, "its own state", func(st gate.DestinationState) bool { return st.Run == run })
		g.await(ctx, gate.Closed)
		return g.err
	}},
	{"a name its workflow ID does not carry refuses itself (its run fails)", "rec-own-name", func(ctx context.Context, g *gateDriver) error {
		run := g.byHand(ctx, gate.WorkflowID(g.dest), gate.DestinationInput{Name: "rec-own-other"})
		if g.err == nil {
			if err := g.c.GetWorkflow(ctx, gate.WorkflowID(g.dest), run).Get(ctx, nil); err == nil {
				g.fail(fmt.Errorf("gate %s ran under another name", g.dest))
			}
		}
		return g.err
	}},
	{"breaker opens, a probe fails, the next closes it", "rec-breaker", func(ctx context.Context, g *gateDriver) error {
		for i, cl := range []contract.Class{contract.ClassNotSent, contract.ClassThrottled, contract.ClassServerError} {
			g.report(ctx, cl, fmt.Sprintf("fail-%d", i))
		}
		g.await(ctx, gate.Open)
		for i, next := range []contract.Class{contract.ClassServerError, contract.ClassCreated} {
			g.probe(ctx, fmt.Sprintf("probe-%d", i))
			g.await(ctx, gate.HalfOpen)
			g.report(ctx, next, fmt.Sprintf("probe-%d", i))
			if next.FoundDown() {
				g.await(ctx, gate.Open)
			}
		}
		g.await(ctx, gate.Closed)
		return g.err
	}},
	{"pause, resume, and a pause that ends by itself", "rec-pause", func(ctx context.Context, g *gateDriver) error {
		g.pause(ctx, gate.PauseRequest{Reason: "partner maintenance", By: "alice"})
		g.await(ctx, gate.Paused)
		g.resume(ctx, gate.ResumeRequest{By: "bob", Note: "maintenance over"})
		g.await(ctx, gate.Closed)
		g.pause(ctx, gate.PauseRequest{Reason: "window", By: "alice", Until: time.Now().Add(3 * time.Second)})
		g.await(ctx, gate.Paused)
		g.await(ctx, gate.Closed)
		return g.err
	}},
	{"breaker opens while paused, resume, an answer closes it", "rec-paused-breaker", func(ctx context.Context, g *gateDriver) error {
		g.pause(ctx, gate.PauseRequest{Reason: "partner outage", By: "alice"})
		g.await(ctx, gate.Paused)
		g.report(ctx, contract.ClassNotSent, "a")
		g.report(ctx, contract.ClassNotSent, "b")
		g.awaitBreaker(ctx, gate.Open)
		g.resume(ctx, gate.ResumeRequest{By: "bob", Note: "partner back"})
		g.report(ctx, contract.ClassCreated, "c")
		g.await(ctx, gate.Closed)
		return g.err
	}},
	{"resume closes an open breaker", "rec-resume-breaker", func(ctx context.Context, g *gateDriver) error {
		g.report(ctx, contract.ClassNotSent, "a")
		g.report(ctx, contract.ClassServerError, "b")
		g.await(ctx, gate.Open)
		g.resume(ctx, gate.ResumeRequest{By: "bob", Note: "partner confirmed"})
		g.await(ctx, gate.Closed)
		return g.err
	}},
	{"a forged report opens nothing, a pause by a stranger is refused", "rec-plain", func(ctx context.Context, g *gateDriver) error {
		g.forge(ctx)
		g.until(ctx, "the report decided", func(st gate.DestinationState) bool { return len(st.Recent) == 1 })
		g.refusedPause(ctx, gate.PauseRequest{Reason: "mine now", By: "mallory"})
		g.await(ctx, gate.Closed)
		return g.err
	}},
	{"signed pause and resume; unsigned, not allowed and replayed ones refused", "rec-signed", func(ctx context.Context, g *gateDriver) error {
		alice, bob := starter.Signer{Name: "alice", Key: gateAlice}, starter.Signer{Name: "bob", Key: gateBob}
		g.refusedPause(ctx, gate.PauseRequest{Reason: "maintenance", By: "alice"})
		g.refusedPause(ctx, g.signPause(ctx, gate.PauseRequest{Reason: "maintenance"}, bob))
		g.pause(ctx, g.signPause(ctx, gate.PauseRequest{Reason: "maintenance"}, alice))
		g.await(ctx, gate.Paused)
		resume := g.signResume(ctx, gate.ResumeRequest{Note: "done"}, alice)
		g.resume(ctx, resume)
		g.await(ctx, gate.Closed)
		g.pause(ctx, g.signPause(ctx, gate.PauseRequest{Reason: "second window"}, alice))
		g.await(ctx, gate.Paused)
		g.refusedResume(ctx, resume)
		g.resume(ctx, g.signResume(ctx, gate.ResumeRequest{Note: "over"}, alice))
		g.await(ctx, gate.Closed)
		return g.err
	}},
}

// recordGates runs every gate scenario against a worker in this process
// and returns their histories.
func recordGates(ctx context.Context, c client.Client, logger *slog.Logger) (map[string][]byte, []wftest.RecordedCase, error) {
	w := sdkworker.New(c, workflows.TaskQueue, sdkworker.Options{})
	worker.Register(w, gateConfig, &activities.Activities{Contracts: gateConfig.Contracts(), Reviewers: gateConfig.Reviewers.Names(),
		Reviewing: worker.Reviewing(gateConfig)})
	gates := gateclient.NewCache(c, "default", nil, gateConfig, client.MetricsNopHandler, logger)
	w.RegisterActivityWithOptions(gates.Recover, activity.RegisterOptions{Name: gate.ActivityRecover})
	// The scenarios stand in for the workers' attempts: what they report
	// and the probes they ask for count as a Delivery's would.
	w.RegisterActivityWithOptions(func(context.Context, gate.Report) (string, error) { return "", nil },
		activity.RegisterOptions{Name: gate.ActivityVerifyReport})
	w.RegisterActivityWithOptions(func(context.Context, string) (string, error) { return "", nil },
		activity.RegisterOptions{Name: gate.ActivityVerifyProbe})
	if err := w.Start(); err != nil {
		return nil, nil, err
	}
	defer w.Stop()
	files := map[string][]byte{}
	var index []wftest.RecordedCase
	for _, sc := range gateScenarios {
		g := &gateDriver{c: c, s: starter.New(c), dest: sc.dest}
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := sc.run(sctx, g)
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("scenario %q: %w", sc.name, err)
		}
		id := gate.WorkflowID(sc.dest)
		// The gate runs until cancelled: its history is then complete.
		var done *serviceerror.NotFound
		if err := c.CancelWorkflow(ctx, id, ""); err != nil && !errors.As(err, &done) {
			return nil, nil, fmt.Errorf("scenario %q: %w", sc.name, err)
		}
		rc, err := recordLatest(ctx, c, gateSeed, sc.name, id, files)
		if err != nil {
			return nil, nil, err
		}
		index = append(index, rc)
		logger.Warn("recorded", "scenario", sc.name)
	}
	return files, index, nil
}

// recordLatest adds the history of workflow id's latest run to files, as
// scenario of seed, and returns its index entry.
func recordLatest(ctx context.Context, c client.Client, seed, scenario, id string, files map[string][]byte) (wftest.RecordedCase, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return wftest.RecordedCase{}, fmt.Errorf("scenario %q: %w", scenario, err)
	}
	e := &workflowExecution{id: id, runID: desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()}
	b, err := history(ctx, c, e)
	if err != nil {
		return wftest.RecordedCase{}, fmt.Errorf("scenario %q: %w", scenario, err)
	}
	name := fileName(seed, scenario, 0)
	files[name] = b
	return wftest.RecordedCase{Seed: seed, Case: scenario,
		Histories: []wftest.RecordedHistory{{File: name, WorkflowID: e.id, RunID: e.runID}}}, nil
}

// gateDriver sends a scenario's reports and operator changes to one gate;
// its first failure stops the scenario's later steps.
type gateDriver struct {
	c    client.Client
	s    *starter.Client
	dest string
	err  error
}

func (g *gateDriver) fail(err error) {
	if g.err == nil && err != nil {
		g.err = err
	}
}

// report signals-with-start a report, as a worker does after an attempt.
func (g *gateDriver) report(ctx context.Context, cl contract.Class, key string) {
	if g.err != nil {
		return
	}
	r := gate.Report{Class: cl, Key: key, At: time.Now()}
	if cl.FoundDown() {
		r.Error = "recorded failure"
	}
	g.signal(ctx, r)
}

// forge signals-with-start a report as anyone can by hand, with a breaker
// of one failure and a year's cool-down.
func (g *gateDriver) forge(ctx context.Context) {
	if g.err == nil {
		g.signal(ctx, gate.Report{Class: contract.ClassNotSent, Key: "by-hand", Error: "forged", At: time.Now(),
			Breaker: &contract.Breaker{Failures: 1, Window: contract.Duration(time.Minute), CoolDown: contract.Duration(8760 * time.Hour)}})
	}
}

func (g *gateDriver) signal(ctx context.Context, r gate.Report) {
	id := gate.WorkflowID(g.dest)
	_, err := g.c.SignalWithStartWorkflow(ctx, id, gate.SignalReport, r,
		gateclient.StartOptions(g.dest), gate.WorkflowType, gate.DestinationInput{Name: g.dest})
	g.fail(err)
}

// byHand starts a run of the gate as anyone can, with the temporal CLI,
// and returns its run ID.
func (g *gateDriver) byHand(ctx context.Context, id string, in gate.DestinationInput) string {
	if g.err != nil {
		return ""
	}
	run, err := g.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, gate.WorkflowType, in)
	if err != nil {
		g.fail(err)
		return ""
	}
	return run.GetRunID()
}

// probe asks for the probe, as a worker does once the cool-down is over.
func (g *gateDriver) probe(ctx context.Context, key string) {
	for g.err == nil {
		h, err := g.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: gate.WorkflowID(g.dest), UpdateName: gate.UpdateProbe,
			Args: []any{key}, WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		var granted bool
		if err == nil {
			err = h.Get(ctx, &granted)
		}
		if granted || err != nil {
			g.fail(err)
			return
		}
		g.sleep(ctx, gateCoolDown/4)
	}
}

func (g *gateDriver) pause(ctx context.Context, r gate.PauseRequest) {
	if g.err == nil {
		_, err := g.s.Pause(ctx, g.dest, r)
		g.fail(err)
	}
}

// refusedPause sends a pause the gate must refuse.
func (g *gateDriver) refusedPause(ctx context.Context, r gate.PauseRequest) {
	if g.err != nil {
		return
	}
	var refused *gateclient.RefusedError
	if _, err := g.s.Pause(ctx, g.dest, r); !errors.As(err, &refused) {
		g.fail(fmt.Errorf("pause by %s: want refused, got %v", r.By, err))
	}
}

func (g *gateDriver) signPause(ctx context.Context, r gate.PauseRequest, sg starter.Signer) gate.PauseRequest {
	if g.err == nil {
		var err error
		r, err = g.s.SignPause(ctx, g.dest, r, sg)
		g.fail(err)
	}
	return r
}

func (g *gateDriver) signResume(ctx context.Context, r gate.ResumeRequest, sg starter.Signer) gate.ResumeRequest {
	if g.err == nil {
		var err error
		r, err = g.s.SignResume(ctx, g.dest, r, sg)
		g.fail(err)
	}
	return r
}

// refusedResume sends a resume the gate must refuse.
func (g *gateDriver) refusedResume(ctx context.Context, r gate.ResumeRequest) {
	if g.err != nil {
		return
	}
	var refused *gateclient.RefusedError
	if _, err := g.s.Resume(ctx, g.dest, r); !errors.As(err, &refused) {
		g.fail(fmt.Errorf("resume by %s: want refused, got %v", r.By, err))
	}
}

func (g *gateDriver) resume(ctx context.Context, r gate.ResumeRequest) {
	if g.err == nil {
		_, err := g.s.Resume(ctx, g.dest, r)
		g.fail(err)
	}
}

// await waits until the gate's effective state is state.
func (g *gateDriver) await(ctx context.Context, state string) {
	g.until(ctx, "state "+state, func(st gate.DestinationState) bool { return st.State == state })
}

// awaitBreaker waits until the gate's breaker is in state, paused or not.
func (g *gateDriver) awaitBreaker(ctx context.Context, state string) {
	g.until(ctx, "breaker "+state, func(st gate.DestinationState) bool { return st.Breaker.State == state })
}

func (g *gateDriver) until(ctx context.Context, what string, ok func(gate.DestinationState) bool) {
	for g.err == nil {
		st, err := g.s.Destination(ctx, g.dest)
		if err != nil {
			g.fail(err)
			return
		}
		if ok(st.DestinationState) {
			return
		}
		if ctx.Err() != nil {
			g.fail(fmt.Errorf("gate %s never reached %s (it is %s)", g.dest, what, st.State))
			return
		}
		g.sleep(ctx, 200*time.Millisecond)
	}
}

func (g *gateDriver) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
		g.fail(errors.Join(ctx.Err(), fmt.Errorf("gate %s", g.dest)))
	case <-time.After(d):
	}
}
