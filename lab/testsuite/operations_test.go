package testsuite

// Operations: what an operator does to running deliveries (a destinations
// file deploy, a second run from the web UI or a reset, a flood of bad
// review signals, a lost worker) against a real dev server, with real
// `courier worker` processes and a real sandbox counting stored effects.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// opsStack is one operations test's world: the shared dev server, a
// sandbox of its own, and `courier worker` processes serving a
// destinations file the test rewrites.
type opsStack struct {
	t        *testing.T
	temporal *lab.Temporal
	c        client.Client
	starter  *starter.Client
	sandbox  *lab.Sandbox
	file     string
	run      string    // makes business ids unique to this test run
	workflow *[]string // terminated at the end, if still running
}

// on is the stack for a subtest.
func (s *opsStack) on(t *testing.T) *opsStack {
	c := *s
	c.t = t
	return &c
}

func newOpsStack(t *testing.T, modes map[string]sandbox.Mode) *opsStack {
	t.Helper()
	return newOpsStackOn(t, sharedServer(t), modes)
}

// newOpsStackOn is an operations stack on a server of the test's own.
func newOpsStackOn(t *testing.T, tmp *lab.Temporal, modes map[string]sandbox.Mode) *opsStack {
	t.Helper()
	dir := t.TempDir()
	sb, err := lab.StartSandbox(filepath.Join(dir, lab.SandboxDB), "", modes)
	require.NoError(t, err)
	s := &opsStack{
		t: t, temporal: tmp, c: tmp.Client(), sandbox: sb,
		file: filepath.Join(dir, lab.DestinationsFile), run: uuid.NewString()[:8], workflow: new([]string),
	}
	s.starter = starter.New(s.c)
	t.Cleanup(func() {
		// Leave nothing running on the shared server for other tests' workers.
		for _, id := range *s.workflow {
			_ = s.c.TerminateWorkflow(context.Background(), id, "", "test over")
		}
		_ = sb.Close()
	})
	return s
}

// dest is an HTTP destination at the sandbox service named path.
func (s *opsStack) dest(path string, c contract.Contract) destinations.Destination {
	return destinations.Destination{Adapter: destinations.AdapterHTTP, URL: s.sandbox.URL + "/" + path + "/tickets", Contract: c.WithDefaults()}
}

// deploy writes the destinations file the next worker process reads.
func (s *opsStack) deploy(cfg destinations.Config) {
	s.t.Helper()
	b, err := json.MarshalIndent(cfg, "", "  ")
	require.NoError(s.t, err)
	require.NoError(s.t, os.WriteFile(s.file, b, 0o644))
}

// startWorker starts `courier worker` on the current destinations file and
// waits until its /healthz answers; the test's end kills it.
func (s *opsStack) startWorker() *lab.Worker {
	t := s.t
	t.Helper()
	log, err := os.CreateTemp(t.TempDir(), "worker-*.log")
	require.NoError(t, err)
	defer log.Close() // the process has its own copy
	w, err := lab.StartWorker(context.Background(), lab.WorkerOptions{
		Courier: courierPath(t), Destinations: s.file, Temporal: s.temporal, Args: []string{"--log-level", "info"}, Log: log,
	})
	if err != nil {
		b, _ := os.ReadFile(log.Name())
		t.Fatalf("%v:\n%s", err, b)
	}
	t.Cleanup(w.Kill)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("worker %d's log, the end:\n%s", w.PID(), b[max(0, len(b)-8<<10):])
		}
	})
	return w
}

func (s *opsStack) input(dest, name string) workflows.DeliveryInput {
	id := name + "-" + s.run
	in := lab.Input(dest, id, lab.Ticket(id, "operations: "+name))
	*s.workflow = append(*s.workflow, workflows.WorkflowID(opkey.Key(in.Operation)))
	return in
}

// deliver delivers in through the starter and returns its status.
func (s *opsStack) deliver(ctx context.Context, in workflows.DeliveryInput) workflows.DeliveryStatus {
	s.t.Helper()
	st, err := s.starter.Deliver(ctx, in)
	require.NoError(s.t, err)
	return st
}

// effects counts what the sandbox service stored at path.
func (s *opsStack) effects(path string) int {
	s.t.Helper()
	recs, err := s.sandbox.Records(path)
	require.NoError(s.t, err)
	return len(recs)
}

// waitFor polls the delivery's status until ok, failing after timeout.
func (s *opsStack) waitFor(ctx context.Context, key string, timeout time.Duration, what string, ok func(workflows.DeliveryStatus) bool) workflows.DeliveryStatus {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var last workflows.DeliveryStatus
	var lastErr error
	for time.Now().Before(deadline) {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last, lastErr = s.starter.Status(qctx, key)
		cancel()
		if lastErr == nil && ok(last) {
			return last
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, _ := json.MarshalIndent(last, "", "  ")
	s.t.Fatalf("delivery %s: not %s within %s (last error %v):\n%s", key, what, timeout, lastErr, b)
	return last
}

func parked(st workflows.DeliveryStatus) bool { return st.State == workflows.StateAwaitingReview }

// historyFacts reads one run's history: how many workflow tasks failed and
// how many attempts it scheduled.
func (s *opsStack) historyFacts(ctx context.Context, wid, runID string) (hist *historypb.History, failedTasks, attempts int) {
	s.t.Helper()
	hist = &historypb.History{}
	it := s.c.GetWorkflowHistory(ctx, wid, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(s.t, err)
		hist.Events = append(hist.Events, ev)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			// A reset marks the point it resets to with a failed task.
			if ev.GetWorkflowTaskFailedEventAttributes().GetCause() != enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
				failedTasks++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == workflows.ActivityAttempt {
				attempts++
			}
		}
	}
	return hist, failedTasks, attempts
}

// requireSound checks what every delivery must satisfy whatever was done to
// it: no failed workflow task, a result listing every attempt history
// holds, rejected only when nothing was applied, and a history that replays
// on a worker with no destinations at all (its decisions are in it).
func (s *opsStack) requireSound(ctx context.Context, res workflows.DeliveryResult) {
	s.t.Helper()
	wid := workflows.WorkflowID(res.Key)
	desc, err := s.c.DescribeWorkflowExecution(ctx, wid, "")
	require.NoError(s.t, err)
	runID := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	hist, failed, attempts := s.historyFacts(ctx, wid, runID)
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflow(replayer, destinations.Config{})
	require.NoError(s.t, replayer.ReplayWorkflowHistoryWithOptions(replayLogger, hist,
		sdkworker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: wid, RunID: runID}}),
		"%s: replay without destinations", wid)
	require.Zero(s.t, failed, "%s: a workflow task failed", wid)
	require.Len(s.t, res.Attempts, attempts, "%s: the result lists every attempt of its history", wid)
	if res.Status == workflows.StatusRejected {
		require.True(s.t, res.LeftNoEffect(), "%s: rejected, yet an attempt may have applied: %+v", wid, res.Attempts)
	}
}

func (s *opsStack) result(ctx context.Context, key string) workflows.DeliveryResult {
	s.t.Helper()
	res, err := s.starter.Result(ctx, key, "")
	require.NoError(s.t, err)
	return res
}

func (s *opsStack) review(ctx context.Context, key string, d workflows.ReviewDecision) {
	s.t.Helper()
	_, err := s.starter.Review(ctx, key, d)
	require.NoError(s.t, err)
}

// firstTicket is the id of the first effect stored at path, for a reviewer
// who found it.
func (s *opsStack) firstTicket(path string) string {
	s.t.Helper()
	recs, err := s.sandbox.Records(path)
	require.NoError(s.t, err)
	require.NotEmpty(s.t, recs)
	return recs[0].TicketID
}

// TestConfigDeployInFlight: a destinations-file deploy changes the dedup
// kind, the budget and the intervals of destinations with deliveries in
// retry_wait and parked for review, and removes one of each. The worker is
// killed and a new one starts on the new file, so every history replays.
// Each delivery carries on under the contract it recorded.
func TestConfigDeployInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	changes := []string{"dedup", "budget", "interval", "removed"}
	modes := map[string]sandbox.Mode{}
	for _, ch := range changes {
		modes["rw-"+ch] = sandbox.ModeHonoursKeys
		modes["park-"+ch] = sandbox.ModeNoKeys
	}
	s := newOpsStack(t, modes)
	marker := &contract.ReplayMarker{Header: "Idempotent-Replayed", Value: "true"}
	// A retry wait long enough to span the worker's restart.
	retry := contract.Retry{MaxAttempts: 3, InitialInterval: contract.Duration(6 * time.Second),
		MaxInterval: contract.Duration(6 * time.Second), Backoff: 2,
		AttemptTimeout: contract.Duration(2 * time.Second), Deadline: contract.Duration(5 * time.Minute)}
	before := destinations.Config{Reviewers: destinations.Plain("ops"), Destinations: map[string]destinations.Destination{}}
	after := destinations.Config{Reviewers: destinations.Plain("ops"), Destinations: map[string]destinations.Destination{}}
	for _, ch := range changes {
		key := contract.Contract{Dedup: contract.DedupKey, KeyHeader: "Idempotency-Key", ReplayMarker: marker, Retry: retry}
		none := contract.Contract{Dedup: contract.DedupNone, Retry: retry}
		before.Destinations["rw-"+ch] = s.dest("rw-"+ch, key)
		before.Destinations["park-"+ch] = s.dest("park-"+ch, none)
		keyAfter, noneAfter := key, none
		switch ch {
		case "dedup":
			keyAfter.Dedup, keyAfter.KeyHeader, keyAfter.ReplayMarker = contract.DedupNone, "", nil
			noneAfter.Dedup, noneAfter.KeyHeader = contract.DedupKey, "Idempotency-Key"
		case "budget":
			keyAfter.Retry.MaxAttempts, noneAfter.Retry.MaxAttempts = 1, 1
		case "interval":
			for _, c := range []*contract.Contract{&keyAfter, &noneAfter} {
				c.Retry.InitialInterval, c.Retry.MaxInterval = contract.Duration(time.Hour), contract.Duration(time.Hour)
			}
		case "removed":
			continue
		}
		after.Destinations["rw-"+ch] = s.dest("rw-"+ch, keyAfter)
		after.Destinations["park-"+ch] = s.dest("park-"+ch, noneAfter)
	}
	// The worker must keep serving something: a destination no delivery uses.
	after.Destinations["unused"] = s.dest("unused", contract.Contract{Dedup: contract.DedupNone, Retry: retry})

	s.deploy(before)
	w1 := s.startWorker()
	keys := map[string]string{}
	for _, ch := range changes {
		for _, dest := range []string{"rw-" + ch, "park-" + ch} {
			require.NoError(t, s.sandbox.Inject(dest, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit, Count: 1}))
			h, err := s.starter.Start(ctx, s.input(dest, "deploy-"+dest))
			require.NoError(t, err)
			keys[dest] = h.Key
		}
	}
	for _, ch := range changes {
		s.waitFor(ctx, keys["rw-"+ch], 20*time.Second, "in retry_wait", func(st workflows.DeliveryStatus) bool {
			return st.State == workflows.StateRetryWait
		})
		s.waitFor(ctx, keys["park-"+ch], 20*time.Second, "parked", parked)
	}

	w1.Kill()
	s.deploy(after)
	s.startWorker()

	// Parked deliveries: a reviewer's retry makes the next attempt, under
	// the recorded contract (none: no key header; the budget and intervals
	// as they were).
	retryBy := workflows.ReviewDecision{Decision: "retry", Reviewer: "ops", Note: "checked: no ticket"}
	for _, ch := range changes {
		s.review(ctx, keys["park-"+ch], retryBy)
	}
	for _, ch := range changes {
		rw, park := "rw-"+ch, "park-"+ch
		if ch == "removed" {
			// Attempted before and now unknown to the workers: parked with
			// the reason, never rejected.
			for _, dest := range []string{rw, park} {
				st := s.waitFor(ctx, keys[dest], time.Minute, "parked for the missing destination", func(st workflows.DeliveryStatus) bool {
					return parked(st) && st.Review != nil && strings.Contains(st.Review.Evidence, "not configured")
				})
				require.Equal(t, contract.ClassUnconfigured, st.Attempts[len(st.Attempts)-1].Class)
				s.review(ctx, keys[dest], workflows.ReviewDecision{Decision: "delivered", Reviewer: "ops",
					ResourceID: s.firstTicket(dest), Note: "found it"})
			}
			res := s.result(ctx, keys[rw])
			require.Equal(t, workflows.StatusDeliveredByReview, res.Status)
			s.requireSound(ctx, res)
			require.Equal(t, 1, s.effects(rw))
			res = s.result(ctx, keys[park])
			require.Equal(t, workflows.StatusDeliveredByReview, res.Status)
			s.requireSound(ctx, res)
			require.Equal(t, 1, s.effects(park), "a removed destination is never sent to again")
			continue
		}
		// In retry_wait: the retry with the same key finds the first ticket.
		res := s.result(ctx, keys[rw])
		require.Equal(t, workflows.StatusDuplicate, res.Status, "%s: %+v", rw, res)
		require.Len(t, res.Attempts, 2, rw)
		s.requireSound(ctx, res)
		require.Equal(t, 1, s.effects(rw), rw)
		for _, req := range s.sandbox.Requests(rw) {
			require.NotNil(t, req.Key, "%s: every attempt carries the recorded key header", rw)
		}
		// Parked: the reviewer's retry is the second effect, and the only one.
		res = s.result(ctx, keys[park])
		require.Equal(t, workflows.StatusCreated, res.Status, "%s: %+v", park, res)
		require.Len(t, res.Attempts, 2, park)
		s.requireSound(ctx, res)
		require.Equal(t, 2, s.effects(park), "%s: the first ticket and the one the reviewer allowed", park)
	}
}

// uiStart is the request the web UI's "Start Workflow Like This One" sends:
// the same workflow ID, input, search attributes and summary, no memo, and
// the server's default reuse policy.
func (s *opsStack) uiStart(ctx context.Context, in workflows.DeliveryInput) client.WorkflowRun {
	s.t.Helper()
	key := opkey.Key(in.Operation)
	run, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        workflows.WorkflowID(key),
		TaskQueue: workflows.TaskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.OperationSearchAttributes(in.Operation, key, workflows.StateDelivering)...),
		StaticSummary: workflows.Summary(in.Operation),
	}, workflows.WorkflowType, in)
	require.NoError(s.t, err)
	return run
}

// TestSecondRunNeverSendsBlind: a finished delivery started again from the
// web UI, or reset, sends again only where the destination deduplicates the
// repeat; at a destination without dedup it parks, naming the earlier run.
func TestSecondRunNeverSendsBlind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// forgetful stands in for a key destination past its key retention:
	// it no longer recognises the key, so a repeat is a second effect.
	s := newOpsStack(t, map[string]sandbox.Mode{"plain": sandbox.ModeNoKeys, "keyed": sandbox.ModeHonoursKeys, "forgetful": sandbox.ModeIgnoresKeys})
	retry := contract.Retry{MaxAttempts: 3, InitialInterval: contract.Duration(100 * time.Millisecond),
		MaxInterval: contract.Duration(time.Second), Backoff: 2,
		AttemptTimeout: contract.Duration(2 * time.Second), Deadline: contract.Duration(time.Minute)}
	s.deploy(destinations.Config{Reviewers: destinations.Plain("ops"), Destinations: map[string]destinations.Destination{
		"plain": s.dest("plain", contract.Contract{Dedup: contract.DedupNone, Retry: retry}),
		"keyed": s.dest("keyed", contract.Contract{Dedup: contract.DedupKey, KeyHeader: "Idempotency-Key",
			KeyRetention: contract.Duration(24 * time.Hour),
			ReplayMarker: &contract.ReplayMarker{Header: "Idempotent-Replayed", Value: "true"}, Retry: retry}),
		"forgetful": s.dest("forgetful", contract.Contract{Dedup: contract.DedupKey, KeyHeader: "Idempotency-Key",
			KeyRetention: contract.Duration(time.Second), Retry: retry}),
	}})
	s.startWorker()

	t.Run("web UI start at a destination without dedup", func(t *testing.T) {
		s := s.on(t)
		in := s.input("plain", "ui-start")
		first := s.deliver(ctx, in)
		require.Equal(t, workflows.StatusCreated, first.Status)
		firstRun := s.describe(ctx, first.Key).GetExecution().GetRunId()

		second := s.uiStart(ctx, in)
		require.NotEqual(t, firstRun, second.GetRunID())
		st := s.waitFor(ctx, first.Key, 30*time.Second, "parked", parked)
		require.Equal(t, contract.ClassEarlierRun, st.Attempts[0].Class)
		require.Contains(t, st.Review.Evidence, firstRun, "the evidence names the earlier run")
		require.Contains(t, st.Review.Evidence, "created")
		require.Equal(t, 1, s.effects("plain"), "nothing sent without a review")
		s.review(ctx, first.Key, workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops", Note: "started by mistake"})
		err := second.Get(ctx, nil)
		res, ok := workflows.UndeliveredResult(err)
		require.True(t, ok, "an abandoned run fails with its result")
		_, ok = workflows.Failure(err, workflows.ErrUnconfirmed)
		require.True(t, ok, "abandoned: an effect may exist (the earlier run's), so Unconfirmed, not NotDelivered: %v", err)
		require.Equal(t, workflows.StatusAbandoned, res.Status)
		s.requireSound(ctx, res)
		require.Equal(t, 1, s.effects("plain"))
	})

	t.Run("web UI start at a key destination", func(t *testing.T) {
		s := s.on(t)
		in := s.input("keyed", "ui-start-key")
		first := s.deliver(ctx, in)
		require.Equal(t, workflows.StatusCreated, first.Status)
		var res workflows.DeliveryResult
		require.NoError(t, s.uiStart(ctx, in).Get(ctx, &res))
		require.Equal(t, workflows.StatusDuplicate, res.Status, "the key still dedups the repeat: %+v", res)
		s.requireSound(ctx, res)
		require.Equal(t, 1, s.effects("keyed"))
	})

	t.Run("reset of a delivery delivered by review", func(t *testing.T) {
		s := s.on(t)
		before := s.effects("plain")
		require.NoError(t, s.sandbox.Inject("plain", sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit, Count: 1}))
		in := s.input("plain", "reset")
		st := s.deliver(ctx, in)
		require.Equal(t, workflows.StateAwaitingReview, st.State)
		recs, err := s.sandbox.Records("plain")
		require.NoError(t, err)
		s.review(ctx, st.Key, workflows.ReviewDecision{Decision: "delivered", Reviewer: "ops",
			ResourceID: recs[len(recs)-1].TicketID, Note: "found it"})
		require.Equal(t, workflows.StatusDeliveredByReview, s.result(ctx, st.Key).Status)
		baseRun := s.describe(ctx, st.Key).GetExecution().GetRunId()

		cli, err := devserver.Binary()
		require.NoError(t, err)
		out, err := exec.CommandContext(ctx, cli, "workflow", "reset",
			"--address", s.temporal.HostPort, "--namespace", s.temporal.Namespace,
			"--workflow-id", workflows.WorkflowID(st.Key), "--type", "FirstWorkflowTask",
			"--reason", "operator reset").CombinedOutput()
		require.NoError(t, err, "%s", out)
		reset := s.waitFor(ctx, st.Key, 30*time.Second, "parked after the reset", func(st workflows.DeliveryStatus) bool {
			return parked(st) && len(st.Attempts) > 0 && st.Attempts[len(st.Attempts)-1].Class == contract.ClassEarlierRun
		})
		require.Contains(t, reset.Review.Evidence, baseRun)
		require.Contains(t, reset.Review.Evidence, string(workflows.StatusDeliveredByReview))
		require.Equal(t, before+1, s.effects("plain"), "no second effect without a review")
		s.review(ctx, st.Key, workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops", Note: "reset by mistake"})
		res := s.result(ctx, st.Key)
		require.Equal(t, workflows.StatusAbandoned, res.Status)
		s.requireSound(ctx, res)
	})

	t.Run("search attributes a caller set are replaced by the input's", func(t *testing.T) {
		s := s.on(t)
		in := s.input("keyed", "claimed-attributes")
		key := opkey.Key(in.Operation)
		before := s.effects("keyed")
		claimed := opkey.Operation{Destination: "plain", Operation: in.Operation.Operation, BusinessID: "someone-else"}
		run, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: workflows.WorkflowID(key), TaskQueue: workflows.TaskQueue,
			TypedSearchAttributes: temporal.NewSearchAttributes(
				workflows.OperationSearchAttributes(claimed, key, workflows.StateDelivering)...),
		}, workflows.WorkflowType, in)
		require.NoError(t, err)
		var res workflows.DeliveryResult
		require.NoError(t, run.Get(ctx, &res))
		require.Equal(t, workflows.StatusCreated, res.Status)
		list := func(dest, businessID string) int {
			resp, err := s.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf(
				"WorkflowId = '%s' AND CourierDestination = '%s' AND CourierBusinessID = '%s'", workflows.WorkflowID(key), dest, businessID)})
			require.NoError(t, err)
			return len(resp.GetExecutions())
		}
		require.Eventually(t, func() bool { return list("keyed", in.BusinessID) == 1 }, 10*time.Second, 100*time.Millisecond,
			"listed under its own destination and business id")
		require.Zero(t, list("plain", "someone-else"), "not under the claimed ones")
		require.Equal(t, before+1, s.effects("keyed"))
	})

	t.Run("a second run with the starter's memo, past the key retention", func(t *testing.T) {
		s := s.on(t)
		in := s.input("forgetful", "memo-second-run")
		first := s.deliver(ctx, in)
		require.Equal(t, workflows.StatusCreated, first.Status)
		firstRun := s.describe(ctx, first.Key).GetExecution().GetRunId()
		time.Sleep(1500 * time.Millisecond) // past the key retention

		// What the starter sends for an operation's first run, memo included:
		// any client can send it, so it proves nothing.
		second, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: workflows.WorkflowID(first.Key), TaskQueue: workflows.TaskQueue,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			Memo:                  map[string]any{"fingerprint": first.Fingerprint}, // as earlier starters set it
			TypedSearchAttributes: temporal.NewSearchAttributes(
				workflows.OperationSearchAttributes(in.Operation, first.Key, workflows.StateDelivering)...),
		}, workflows.WorkflowType, in)
		require.NoError(t, err)
		require.NotEqual(t, firstRun, second.GetRunID())
		st := s.waitFor(ctx, first.Key, 30*time.Second, "parked", parked)
		require.Equal(t, contract.ClassEarlierRun, st.Attempts[0].Class)
		require.Contains(t, st.Review.Evidence, firstRun)
		require.Equal(t, 1, s.effects("forgetful"), "the memo switched no check off: nothing sent")
		s.review(ctx, first.Key, workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops", Note: "a second run by mistake"})
		res, ok := workflows.UndeliveredResult(second.Get(ctx, nil))
		require.True(t, ok)
		require.Equal(t, workflows.StatusAbandoned, res.Status)
		require.Equal(t, 1, s.effects("forgetful"))
	})
}

func (s *opsStack) describe(ctx context.Context, key string) interface {
	GetExecution() *commonpb.WorkflowExecution
} {
	s.t.Helper()
	desc, err := s.c.DescribeWorkflowExecution(ctx, workflows.WorkflowID(key), "")
	require.NoError(s.t, err)
	return desc.GetWorkflowExecutionInfo()
}

// statusBound is the size the status query and the result stay under
// whatever is signalled (see workflows.MaxIgnoredRecords and the field
// limits).
const statusBound = 64 << 10

// TestReviewFloodStaysBounded: 2,000 invalid review signals of every kind
// and 8 with a 300 KB field leave a delivery whose status and result stay
// small, count what they dropped, and still take a valid review.
func TestReviewFloodStaysBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := newOpsStack(t, map[string]sandbox.Mode{"plain": sandbox.ModeNoKeys})
	retry := contract.Retry{MaxAttempts: 3, AttemptTimeout: contract.Duration(2 * time.Second), Deadline: contract.Duration(time.Minute)}
	s.deploy(destinations.Config{Reviewers: destinations.Plain("ops"), Destinations: map[string]destinations.Destination{
		"plain": s.dest("plain", contract.Contract{Dedup: contract.DedupNone, Retry: retry}),
	}})
	s.startWorker()
	require.NoError(t, s.sandbox.Inject("plain", sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit, Count: 1}))
	st := s.deliver(ctx, s.input("plain", "flood"))
	require.Equal(t, workflows.StateAwaitingReview, st.State)
	wid := workflows.WorkflowID(st.Key)

	raw := func(encoding, data string) converter.RawValue {
		return converter.NewRawValue(&commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(encoding)}, Data: []byte(data)})
	}
	kinds := []any{
		workflows.ReviewDecision{Decision: "retry", Reviewer: "mallory"},   // not on the allow-list
		raw(converter.MetadataEncodingJSON, `{"decision": "retry", "revi`), // malformed JSON
		raw(converter.MetadataEncodingBinary, "\x00\x01 not json at all"),  // not JSON
		workflows.ReviewDecision{Decision: "perhaps", Reviewer: "ops"},     // unknown decision
		raw(converter.MetadataEncodingJSON, `[1, 2, 3]`),                   // the wrong shape
	}
	const flood = 2000
	var wg sync.WaitGroup
	errs := make(chan error, flood)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs <- s.c.SignalWorkflow(ctx, wid, "", workflows.SignalReview, kinds[i%len(kinds)])
			}
		}()
	}
	for i := range flood {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	huge := strings.Repeat("x", 300<<10)
	for range 8 {
		require.NoError(t, s.c.SignalWorkflow(ctx, wid, "", workflows.SignalReview,
			workflows.ReviewDecision{Decision: "retry", Reviewer: huge}))
	}

	st = s.waitFor(ctx, st.Key, time.Minute, "done counting the flood", func(st workflows.DeliveryStatus) bool {
		return st.Review != nil && st.Review.Ignored == flood+8
	})
	require.Equal(t, workflows.StateAwaitingReview, st.State, "no invalid decision ends the delivery")
	require.Equal(t, flood+8-workflows.MaxIgnoredRecords, st.Review.Dropped)
	var undecodable int
	for _, rec := range st.Review.Decisions {
		if strings.HasPrefix(rec.Reason, "not a review decision") {
			undecodable++
		}
	}
	require.Positive(t, undecodable, "an undecodable signal is recorded, not lost: %+v", st.Review.Decisions)
	v, err := s.c.QueryWorkflow(ctx, wid, "", workflows.QueryStatus)
	require.NoError(t, err)
	var rawStatus json.RawMessage
	require.NoError(t, v.Get(&rawStatus))
	require.Less(t, len(rawStatus), statusBound, "status query size")

	// A valid review through the validated update still decides it.
	s.review(ctx, st.Key, workflows.ReviewDecision{Decision: "delivered", Reviewer: "ops",
		ResourceID: s.firstTicket("plain"), Note: "found it after the flood"})
	var rawResult json.RawMessage
	require.NoError(t, s.c.GetWorkflow(ctx, wid, "").Get(ctx, &rawResult))
	require.Less(t, len(rawResult), statusBound, "result size")
	res := s.result(ctx, st.Key)
	require.Equal(t, workflows.StatusDeliveredByReview, res.Status)
	s.requireSound(ctx, res)
	require.Equal(t, 1, s.effects("plain"))
	t.Logf("after %d bad signals: status %d bytes, result %d bytes, %d records kept", flood+8, len(rawStatus), len(rawResult), len(res.Review.Decisions))
}

// TestLostWorkerNoticedInSeconds: the worker running a slow attempt (a 60 s
// attempt timeout) is killed; its attempt is an unknown outcome within
// seconds, from the missing heartbeats, and the delivery takes its next
// step on another worker.
func TestLostWorkerNoticedInSeconds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, w1, key := slowAttempt(ctx, t, "lost-worker")
	killed := time.Now()
	w1.Kill()
	s.startWorker()
	st := s.waitFor(ctx, key, 30*time.Second, "past its lost attempt", func(st workflows.DeliveryStatus) bool {
		return len(st.Attempts) > 0
	})
	noticed := time.Since(killed)
	require.Equal(t, contract.ClassUnknown, st.Attempts[0].Class)
	require.Contains(t, strings.ToLower(st.Attempts[0].Error), "heartbeat")
	require.Less(t, noticed, 20*time.Second, "the next step came %s after the kill", noticed)
	t.Logf("lost attempt noticed %s after the worker was killed", noticed.Round(100*time.Millisecond))
	res := s.result(ctx, key)
	require.Equal(t, workflows.StatusDuplicate, res.Status, "the retry with the same key finds the first effect: %+v", res)
	s.requireSound(ctx, res)
	require.Equal(t, 1, s.effects("slow"))
}

// TestGracefulStopReportsCutShortAttempt: a worker told to stop during a
// slow attempt cuts it short before its stop timeout and reports it (an
// unknown outcome: the request was written) before it exits.
func TestGracefulStopReportsCutShortAttempt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, w1, key := slowAttempt(ctx, t, "graceful-stop")
	took, err := w1.Stop(30 * time.Second)
	require.NoError(t, err)
	require.Less(t, took, worker.DefaultStopTimeout+5*time.Second)
	t.Logf("worker stopped in %s", took.Round(100*time.Millisecond))
	s.startWorker()
	res := s.result(ctx, key)
	require.Equal(t, workflows.StatusDuplicate, res.Status, "%+v", res)
	// Reported by the stopping worker, not found lost at the heartbeat timeout.
	require.Equal(t, contract.ClassUnknown, res.Attempts[0].Class)
	require.Contains(t, res.Attempts[0].Error, "canceled after the request was written")
	s.requireSound(ctx, res)
	require.Equal(t, 1, s.effects("slow"))
}

// slowAttempt starts a worker and a delivery whose first attempt the
// destination commits and then holds unanswered, and returns once that
// attempt has heartbeated.
func slowAttempt(ctx context.Context, t *testing.T, name string) (*opsStack, *lab.Worker, string) {
	s := newOpsStack(t, map[string]sandbox.Mode{"slow": sandbox.ModeHonoursKeys})
	s.deploy(destinations.Config{Destinations: map[string]destinations.Destination{
		"slow": s.dest("slow", contract.Contract{Dedup: contract.DedupKey, KeyHeader: "Idempotency-Key",
			ReplayMarker: &contract.ReplayMarker{Header: "Idempotent-Replayed", Value: "true"},
			Retry: contract.Retry{MaxAttempts: 3, InitialInterval: contract.Duration(time.Second),
				AttemptTimeout: contract.Duration(60 * time.Second), Deadline: contract.Duration(5 * time.Minute)}}),
	}})
	w1 := s.startWorker()
	// The service commits, then holds the answer past the test.
	require.NoError(t, s.sandbox.Inject("slow", sandbox.Fault{Kind: sandbox.FaultDelayAfterCommit, Count: 1, Delay: 2 * time.Minute}))
	h, err := s.starter.Start(ctx, s.input("slow", name))
	require.NoError(t, err)
	for deadline := time.Now().Add(20 * time.Second); len(s.sandbox.Requests("slow")) == 0; {
		require.True(t, time.Now().Before(deadline), "the attempt never reached the destination")
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // past the first heartbeat
	return s, w1, h.Key
}
