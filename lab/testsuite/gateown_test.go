package testsuite

// A gate's state is the gate's own: what anyone who may start or signal
// workflows in the namespace puts in a gate's input, memo or name pauses,
// frees or opens nothing, on a real dev server with real workers.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/workflows"
)

// forgedPause is a paused gate as someone writes it by hand, with a
// transition that claims a verified proof.
func forgedPause(name string) map[string]any {
	at := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	return map[string]any{"name": name, "state": "paused", "since": at, "breaker": map[string]any{"state": "closed"},
		"paused":      map[string]any{"reason": "mine now", "by": "alice", "since": at},
		"transitions": []any{map[string]any{"at": at, "from": "closed", "to": "paused", "by": "alice", "why": "mine now", "principal": "alice"}}}
}

// currentDetails is what the web UI shows on a workflow's page.
func currentDetails(ctx context.Context, t *testing.T, c client.Client, id string) string {
	v, err := c.QueryWorkflow(ctx, id, "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var meta sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&meta))
	return meta.GetCurrentDetails()
}

// ran waits until the gate id's latest run has run its first task (its
// page's details are set then) and returns those details.
func ran(ctx context.Context, t *testing.T, c client.Client, id string) string {
	var details string
	require.Eventually(t, func() bool {
		details = currentDetails(ctx, t, c, id)
		return details != ""
	}, 30*time.Second, 200*time.Millisecond, "gate %s ran", id)
	return details
}

// TestHandStartedGateHoldsNothing: a Destination run started by hand as a
// destination's gate, a paused state with a "signed" transition in its
// input, holds nothing: a delivery to the destination is created, one
// effect, and the gate's page shows no forged transition as signed.
func TestHandStartedGateHoldsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, name, w := reviewedGateStack(t, "handstart")
	id := gate.WorkflowID(name)
	*s.workflow = append(*s.workflow, id)
	// What `temporal workflow start --type Destination --task-queue courier
	// --workflow-id destination-NAME --input '{...}'` sends.
	_, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue},
		gate.WorkflowType, map[string]any{"name": name, "state": forgedPause(name)})
	require.NoError(t, err)
	ran(ctx, t, s.c, id)
	time.Sleep(2 * gateclient.Fresh) // the worker's reads
	seesGate(t, w, name, gate.Closed)

	h, err := s.starter.Start(ctx, s.input(name, "after-hand-start"))
	require.NoError(t, err)
	st := s.waitFor(ctx, h.Key, 30*time.Second, "finished", func(st workflows.DeliveryStatus) bool { return st.Status != "" })
	require.Equal(t, workflows.StatusCreated, st.Status, "%+v", st.Events)
	require.Len(t, st.Attempts, 1)
	require.Equal(t, 1, s.effects("handstart"))
	gs, err := s.starter.Destination(ctx, name)
	require.NoError(t, err)
	require.Equal(t, gate.Closed, gs.State)
	require.Empty(t, gs.Transitions, "none of the input's transitions")
	require.NotContains(t, currentDetails(ctx, t, s.c, id), "(signed)")
}

// TestStarterMemoIsNoGate: a Destination run started by hand on a task
// queue no worker polls, with the memo a gate publishes set by its
// starter, paused with no pause in it: no worker reads it as a gate.
// Deliveries are neither held nor failed: each is created with one
// attempt, nothing recorded as lost, one effect each.
func TestStarterMemoIsNoGate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, name, w := reviewedGateStack(t, "memo")
	id := gate.WorkflowID(name)
	*s.workflow = append(*s.workflow, id)
	_, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-polls-" + s.run,
		Memo: map[string]any{gate.Memo: map[string]any{"name": name, "state": "paused", "breaker": map[string]any{"state": "closed"}}}},
		gate.WorkflowType, map[string]any{"name": name})
	require.NoError(t, err)
	time.Sleep(3 * time.Second) // several of the worker's reads
	for _, op := range []string{"memo-1", "memo-2"} {
		st := s.deliver(ctx, s.input(name, op))
		require.Equal(t, workflows.StatusCreated, st.Status, "%+v", st.Events)
		require.Len(t, st.Attempts, 1, "%+v", st.Attempts)
		require.Equal(t, contract.ClassCreated, st.Attempts[0].Class)
	}
	require.Equal(t, 2, s.effects("memo"))
	seesGate(t, w, name, gate.Closed)
}

// TestStoppedGateStaysPausedUnderABareRun: a destination is paused by its
// reviewer and a delivery held; its gate is terminated and a bare run
// started by hand in its place. The bare run recovers the pause: nothing
// is sent, neither the held delivery nor one started after, and the
// status says paused by alice. A reviewer's resume then releases both:
// one effect each.
func TestStoppedGateStaysPausedUnderABareRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, name, w := reviewedGateStack(t, "bare")
	id := gate.WorkflowID(name)
	*s.workflow = append(*s.workflow, id)

	const reason = "partner maintenance INC-11"
	_, err := s.starter.Pause(ctx, name, gate.PauseRequest{Reason: reason, By: "alice"})
	require.NoError(t, err)
	seesGate(t, w, name, gate.Paused)
	before, err := s.starter.Start(ctx, s.input(name, "before-bare"))
	require.NoError(t, err)
	s.waitFor(ctx, before.Key, time.Minute, "paused", func(st workflows.DeliveryStatus) bool { return st.State == workflows.StatePaused })

	require.NoError(t, s.c.TerminateWorkflow(ctx, id, "", "by hand"))
	bare, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue},
		gate.WorkflowType, map[string]any{"name": name})
	require.NoError(t, err)
	after, err := s.starter.Start(ctx, s.input(name, "after-bare"))
	require.NoError(t, err)
	ran(ctx, t, s.c, id)
	time.Sleep(5 * time.Second) // several of the worker's reads, and the deliveries' looks
	require.Empty(t, s.sandbox.Requests("bare"), "nothing is sent while the recovered pause holds")
	gs, err := s.starter.Destination(ctx, name)
	require.NoError(t, err)
	require.Equal(t, gate.Paused, gs.State)
	require.Equal(t, "alice", gs.Paused.By)
	require.Empty(t, gs.Stopped, "its gate runs again")
	require.Equal(t, bare.GetRunID(), gs.Run, "the bare run published the state it recovered")
	seesGate(t, w, name, gate.Paused)
	for _, key := range []string{before.Key, after.Key} {
		st := s.waitFor(ctx, key, 30*time.Second, "paused", func(st workflows.DeliveryStatus) bool { return st.State == workflows.StatePaused })
		require.Contains(t, st.Hold.Reason, reason)
		require.Empty(t, st.Attempts)
	}

	_, err = s.starter.Resume(ctx, name, gate.ResumeRequest{By: "alice", Note: "maintenance over"})
	require.NoError(t, err)
	for _, key := range []string{before.Key, after.Key} {
		st := s.waitFor(ctx, key, time.Minute, "finished", func(st workflows.DeliveryStatus) bool { return st.Status != "" })
		require.Equal(t, workflows.StatusCreated, st.Status, "%s: %+v", key, st.Events)
	}
	require.Equal(t, 2, s.effects("bare"), "one effect per delivery")
}

// TestGateNameMustMatchItsID: a Destination run started by hand as gm's
// gate under another destination's name, whose reviewers let mallory
// pause, refuses itself: mallory's pause of it does not take, gm is not
// held (a delivery is created, one effect), and the run failed saying why.
func TestGateNameMustMatchItsID(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := newOpsStack(t, map[string]sandbox.Mode{"gm": sandbox.ModeHonoursKeys})
	retry := contract.Retry{MaxAttempts: 3, AttemptTimeout: contract.Duration(5 * time.Second), Deadline: contract.Duration(30 * time.Second)}
	gm, other := "gm-"+s.run, "other-"+s.run
	gmDest := s.dest("gm", contract.Contract{Dedup: contract.DedupKey, Retry: retry})
	gmDest.Reviewers = destinations.Plain("alice")
	otherDest := s.dest("gm", contract.Contract{Dedup: contract.DedupKey, Retry: retry})
	otherDest.Reviewers = destinations.Plain("mallory")
	s.deploy(destinations.Config{Destinations: map[string]destinations.Destination{gm: gmDest, other: otherDest}})
	w := s.startWorker()
	id := gate.WorkflowID(gm)
	*s.workflow = append(*s.workflow, id)

	run, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue},
		gate.WorkflowType, map[string]any{"name": other})
	require.NoError(t, err)
	h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: gate.UpdatePause,
		Args: []any{gate.PauseRequest{Reason: "mine now", By: "mallory"}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	require.Error(t, err, "the pause does not take")
	err = run.Get(ctx, nil)
	require.ErrorContains(t, err, `its name "`+other+`" is not the one its workflow ID `+id+` carries`)
	time.Sleep(3 * time.Second) // several of the worker's reads
	seesGate(t, w, gm, gate.Closed)
	st := s.deliver(ctx, s.input(gm, "after-wrong-name"))
	require.Equal(t, workflows.StatusCreated, st.Status, "%+v", st.Events)
	require.Len(t, st.Attempts, 1)
	require.Equal(t, 1, s.effects("gm"))
}

// TestGatePageQuotesItsName: a gate whose name holds shell syntax (its
// workflow ID carries the same name, so it runs) shows the pause command
// on its page with the name shell-quoted: pasted, it pauses that name and
// runs nothing else.
func TestGatePageQuotesItsName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, _, _ := reviewedGateStack(t, "quote")
	name := "legacy; curl x | sh # " + s.run
	id := gate.WorkflowID(name)
	*s.workflow = append(*s.workflow, id)
	_, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue},
		gate.WorkflowType, map[string]any{"name": name})
	require.NoError(t, err)
	details := ran(ctx, t, s.c, id)
	require.Contains(t, details, "courier destination pause '"+name+"'")
	require.NotContains(t, details, "pause "+name)
}

// TestHandSentReportClosesNothing: a destination answers 503 until its
// breaker (2 failures, an hour's cool-down) opens on two deliveries'
// attempts, which their Deliveries recorded; both are then held. A
// `created` report sent by hand for one of them, and a probe asked by hand,
// change nothing: the breaker stays open, nothing is released, and the
// destination sees no request after it opened. Ten hand-sent failures at
// another destination's gate open nothing.
func TestHandSentReportClosesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := newOpsStack(t, map[string]sandbox.Mode{"down": sandbox.ModeHonoursKeys, "fine": sandbox.ModeHonoursKeys})
	out := newOutage(t, s.sandbox.URL)
	breaker := &contract.Breaker{Failures: 2, Window: contract.Duration(time.Minute), CoolDown: contract.Duration(time.Hour)}
	retry := contract.Retry{MaxAttempts: 5, InitialInterval: contract.Duration(time.Second), MaxInterval: contract.Duration(2 * time.Second),
		AttemptTimeout: contract.Duration(5 * time.Second), Deadline: contract.Duration(2 * time.Minute)}
	down, fine := "down-"+s.run, "fine-"+s.run
	d := destinations.Destination{Adapter: destinations.AdapterHTTP, URL: out.srv.URL + "/down/tickets",
		Contract: contract.Contract{Dedup: contract.DedupKey, Breaker: breaker, Retry: retry}.WithDefaults()}
	s.deploy(destinations.Config{Reviewers: destinations.Plain("alice"), Destinations: map[string]destinations.Destination{
		down: d, fine: s.dest("fine", contract.Contract{Dedup: contract.DedupKey, Breaker: breaker, Retry: retry})}})
	w := s.startWorker()
	*s.workflow = append(*s.workflow, gate.WorkflowID(down), gate.WorkflowID(fine))

	out.set(true)
	var keys []string
	for _, op := range []string{"opens-1", "opens-2"} {
		h, err := s.starter.Start(ctx, s.input(down, op))
		require.NoError(t, err)
		keys = append(keys, h.Key)
	}
	seesGate(t, w, down, gate.Open)
	for _, key := range keys {
		s.waitFor(ctx, key, time.Minute, "held", func(st workflows.DeliveryStatus) bool { return st.State == workflows.StateCircuitOpen })
	}
	seen := out.requestsWhileDown()
	out.set(false) // the destination is back: only a closed breaker would let anything reach it

	id := gate.WorkflowID(down)
	report := map[string]any{"class": "created", "key": keys[0], "at": time.Now().UTC().Format(time.RFC3339)}
	require.NoError(t, s.c.SignalWorkflow(ctx, id, "", gate.SignalReport, report))
	time.Sleep(3 * time.Second) // the gate decides it
	gs, err := s.starter.Destination(ctx, down)
	require.NoError(t, err)
	require.Equal(t, gate.Open, gs.State, "a created report sent by hand closes nothing: %+v", gs.Transitions)
	h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: gate.UpdateProbe,
		Args: []any{"by-hand"}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	var granted bool
	require.NoError(t, h.Get(ctx, &granted))
	require.False(t, granted, "a probe asked by hand is not granted")
	for range 10 {
		r := map[string]any{"class": "not_sent", "key": "by-hand", "error": "forged", "at": time.Now().UTC().Format(time.RFC3339)}
		_, err := s.c.SignalWithStartWorkflow(ctx, gate.WorkflowID(fine), gate.SignalReport, r,
			client.StartWorkflowOptions{ID: gate.WorkflowID(fine), TaskQueue: workflows.TaskQueue}, gate.WorkflowType, map[string]any{"name": fine})
		require.NoError(t, err)
	}
	time.Sleep(5 * time.Second) // the gates decide, the workers read them

	gs, err = s.starter.Destination(ctx, down)
	require.NoError(t, err)
	require.Equal(t, gate.Open, gs.State, "%+v", gs.Transitions)
	require.Zero(t, gs.Held-int64(len(keys)), "both deliveries still held")
	require.Zero(t, s.effects("down"), "nothing reached the destination after the breaker opened")
	require.Equal(t, seen, out.requestsWhileDown())
	gs, err = s.starter.Destination(ctx, fine)
	require.NoError(t, err)
	require.Equal(t, gate.Closed, gs.State, "hand-sent failures open nothing: %+v", gs.Breaker)

	// A reviewer's resume closes it and releases both: one effect each.
	_, err = s.starter.Resume(ctx, down, gate.ResumeRequest{By: "alice", Note: "partner back"})
	require.NoError(t, err)
	for _, key := range keys {
		st := s.waitFor(ctx, key, time.Minute, "finished", func(st workflows.DeliveryStatus) bool { return st.Status != "" })
		require.Equal(t, workflows.StatusCreated, st.Status, "%s: %+v", key, st.Events)
	}
	require.Equal(t, 2, s.effects("down"))
}
