package testsuite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// TestRetryPastKeyRetention runs the real Delivery workflow in the Temporal
// test environment against the sandbox, whose answer is lost after it
// committed the ticket (close_after_commit), at a key destination whose
// retry waits 2s and may take its attempt's 500ms to arrive.
//
//   - key_retention 1s, shorter than that: the retry would arrive after
//     it, when the destination no longer recognises the key. The sandbox's
//     service that ignores keys stands in for it, as a destination past
//     its retention does: the delivery parks with one ticket, where a
//     retry makes a second.
//   - key_retention 1h: the retry arrives within it, at the service that
//     honours keys, and replays the first ticket.
func TestRetryPastKeyRetention(t *testing.T) {
	for _, c := range []struct {
		name, dest string
		retention  time.Duration
		parks      bool
	}{
		{"a retry would arrive after the key retention: parks", lab.DestIgnoring, time.Second, true},
		{"the key retention outlasts the retry: duplicate", lab.DestHelpdesk, time.Hour, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := envWithContract(t, c.dest, func(k *contract.Contract) {
				k.KeyRetention = contract.Duration(c.retention)
				k.Retry.InitialInterval = contract.Duration(2 * time.Second)
				k.Retry.MaxInterval = contract.Duration(2 * time.Second)
				k.Retry.AttemptTimeout = contract.Duration(500 * time.Millisecond)
			})
			require.NoError(t, env.Inject(c.dest, closeAfterCommit(1)))

			id := "retention-" + c.dest
			var parked *workflows.DeliveryStatus
			out, err := TestEnv{Env: env}.Deliver(t.Context(), lab.Input(c.dest, id, lab.Ticket(id, "Move the workshop booking")),
				func(st workflows.DeliveryStatus) *workflows.ReviewDecision {
					parked = &st
					recs, err := env.Sandbox.Records(lab.SandboxService(env.Config.Destinations[c.dest]))
					require.NoError(t, err)
					require.Len(t, recs, 1)
					return &workflows.ReviewDecision{Decision: workflows.DecisionDelivered, ResourceID: recs[0].TicketID,
						Reviewer: "ops", Note: "found it"}
				})
			require.NoError(t, err)
			effects, err := env.Effects(c.dest, id)
			require.NoError(t, err)
			require.Equal(t, 1, effects, "one ticket: %+v", out.Result.Attempts)
			if !c.parks {
				require.Nil(t, parked)
				require.Equal(t, workflows.StatusDuplicate, out.Result.Status, "%+v", out.Result.Attempts)
				require.Len(t, out.Result.Attempts, 2)
				return
			}
			require.NotNil(t, parked, "parked for review: %s after %+v", out.Result.Status, out.Result.Attempts)
			require.Len(t, parked.Attempts, 1, "no retry")
			require.Equal(t, contract.ClassUnknown, parked.Attempts[0].Class)
			require.Contains(t, parked.Review.Evidence,
				`destination "ignoring" (dedup key) cannot deduplicate a retry that would arrive after its key retention of 1s`)
			t.Logf("evidence: %s", parked.Review.Evidence)
			require.Equal(t, workflows.StatusDeliveredByReview, out.Result.Status)
		})
	}
}

// TestNoSendPastKeyRetentionAfterUncertain runs the real Delivery workflow
// in the Temporal test environment against the sandbox, at a key
// destination with key_retention 10s whose first answer is lost after it
// committed the ticket (close_after_commit): the retry is decided in time,
// 100ms later, and answered 503 with Retry-After 30s, which carries the
// next send past the retention. The sandbox's service that ignores keys
// stands in for the destination past its retention, where such a send
// makes a second ticket: the delivery parks with one ticket. Controls: the
// same with key_retention 1h at the service that honours keys ends
// duplicate with one ticket, and a reviewer's retry is sent even when it
// is throttled again (the reviewer checked): duplicate, one ticket. A hold
// past the retention is TestHoldPastKeyRetention's, with the real gate.
func TestNoSendPastKeyRetentionAfterUncertain(t *testing.T) {
	throttled := sandbox.Fault{Kind: sandbox.FaultFail503, Delay: 30 * time.Second}
	for _, c := range []struct {
		name, dest string
		retention  time.Duration
		faults     []sandbox.Fault
		decision   string
		// evidence is the review's; empty: not parked.
		evidence string
		status   workflows.Status
		classes  []contract.Class
	}{
		{name: "throttled past the retention: parks", dest: lab.DestIgnoring, retention: 10 * time.Second,
			faults: []sandbox.Fault{closeAfterCommit(1), throttled}, decision: workflows.DecisionDelivered,
			evidence: `attempt 2: throttled (HTTP 503: {"error":"unavailable"}); attempt 1 may have applied, ` +
				`and destination "ignoring" (dedup key) cannot deduplicate a send that would arrive after its key retention of 10s`,
			status: workflows.StatusDeliveredByReview, classes: []contract.Class{unknown, contract.ClassThrottled}},
		{name: "throttled within a long retention: duplicate", dest: lab.DestHelpdesk, retention: time.Hour,
			faults: []sandbox.Fault{closeAfterCommit(1), throttled},
			status: workflows.StatusDuplicate, classes: []contract.Class{unknown, contract.ClassThrottled, replayed}},
		{name: "a reviewer's retry is sent, throttled again or not", dest: lab.DestHelpdesk, retention: 10 * time.Second,
			faults: []sandbox.Fault{closeAfterCommit(1), throttled, throttled}, decision: workflows.DecisionRetry,
			evidence: `attempt 2: throttled (HTTP 503: {"error":"unavailable"}); attempt 1 may have applied, ` +
				`and destination "helpdesk" (dedup key) cannot deduplicate a send that would arrive after its key retention of 10s`,
			status: workflows.StatusDuplicate, classes: []contract.Class{unknown, contract.ClassThrottled, contract.ClassThrottled, replayed}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := envWithContract(t, c.dest, func(k *contract.Contract) {
				k.KeyRetention = contract.Duration(c.retention)
				k.Retry.InitialInterval = contract.Duration(100 * time.Millisecond)
				k.Retry.AttemptTimeout = contract.Duration(500 * time.Millisecond)
				k.Retry.Deadline = contract.Duration(time.Hour)
			})
			for _, f := range c.faults {
				require.NoError(t, env.Inject(c.dest, f))
			}

			id := "after-uncertain-" + c.dest
			var parked []workflows.DeliveryStatus
			out, err := TestEnv{Env: env}.Deliver(t.Context(), lab.Input(c.dest, id, lab.Ticket(id, "Move the workshop booking")),
				func(st workflows.DeliveryStatus) *workflows.ReviewDecision {
					parked = append(parked, st)
					recs, err := env.Sandbox.Records(lab.SandboxService(env.Config.Destinations[c.dest]))
					require.NoError(t, err)
					require.Len(t, recs, 1, "one ticket when parked")
					return &workflows.ReviewDecision{Decision: c.decision, ResourceID: recs[0].TicketID, Reviewer: "ops", Note: "checked"}
				})
			require.NoError(t, err)
			effects, err := env.Effects(c.dest, id)
			require.NoError(t, err)
			require.Equal(t, 1, effects, "one ticket: %s after %+v", out.Result.Status, out.Result.Attempts)
			require.Equal(t, c.status, out.Result.Status, "%+v", out.Result.Attempts)
			var classes []contract.Class
			for _, at := range out.Result.Attempts {
				classes = append(classes, at.Class)
			}
			require.Equal(t, c.classes, classes)
			if c.evidence == "" {
				require.Empty(t, parked)
				return
			}
			require.Len(t, parked, 1, "parked once: a reviewer's retry is theirs")
			require.Equal(t, c.evidence, parked[0].Review.Evidence)
			t.Logf("evidence: %s", parked[0].Review.Evidence)
		})
	}
}

// TestLateStartPastKeyRetention: on a real dev server with `courier
// worker` processes, a key destination declared with key_retention 8s
// loses its first answer after the commit. The retry is decided in time
// (3s later, a 1s attempt), then no worker runs until 13s, past the 7s
// its start was allowed and the server's 5s latency: the one that comes
// back does not start the retry, which could now arrive past the
// retention (it ends not sent), and the delivery parks with one ticket.
// The sandbox's service that ignores keys stands in for the destination
// past its retention: a retry started then makes a second ticket. An
// attempt that waits in a rate-limited destination's task queue is bound
// the same way, by its schedule-to-start timeout.
func TestLateStartPastKeyRetention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const svc = "late"
	s, name, w := retentionStack(t, svc, 8*time.Second, nil)
	began, h := s.retrying(ctx, name, "late-start")
	w.Kill()
	time.Sleep(time.Until(began.Add(13 * time.Second)))
	s.startWorker()
	st := s.parked(ctx, h.Key)
	require.Len(t, st.Attempts, 2, "%+v", st.Attempts)
	require.Equal(t, contract.ClassUnknown, st.Attempts[0].Class)
	require.Equal(t, contract.ClassNotSent, st.Attempts[1].Class)
	require.Contains(t, st.Review.Evidence, "attempt 2: not_sent (not sent: no worker started it by ")
	require.Contains(t, st.Review.Evidence, fmt.Sprintf(`; attempt 1 may have applied, and destination %q (dedup key) `+
		"cannot deduplicate a send that would arrive after its key retention of 8s", name))
	t.Logf("evidence: %s", st.Review.Evidence)
	require.Equal(t, 1, s.effects(svc), "one ticket")

	_, err := s.starter.Review(ctx, h.Key, workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "ops", Note: "checked"})
	require.NoError(t, err)
}

// TestHoldPastKeyRetention: on a real dev server with a `courier worker`
// process and the destination's real gate, a key destination declared
// with key_retention 10s loses its first answer after the commit. The
// retry is decided in time (3s later, a 1s attempt); the destination is
// paused before it goes and resumed at 11s. The send the gate releases
// would arrive past the retention: the delivery parks with one ticket,
// where sending makes a second at the service that ignores keys (standing
// in for the destination past its retention). A reviewer's retry is then
// sent: theirs to decide, it is not parked again.
func TestHoldPastKeyRetention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const svc = "heldlate"
	s, name, w := retentionStack(t, svc, 10*time.Second, gate.WorkflowID)
	began, h := s.retrying(ctx, name, "held-late")
	_, err := s.starter.Pause(ctx, name, gate.PauseRequest{Reason: "partner maintenance", By: "alice"})
	require.NoError(t, err)
	seesGate(t, w, name, gate.Paused)
	s.waitFor(ctx, h.Key, 30*time.Second, "held", func(st workflows.DeliveryStatus) bool { return st.State == workflows.StatePaused })
	time.Sleep(time.Until(began.Add(11 * time.Second)))
	_, err = s.starter.Resume(ctx, name, gate.ResumeRequest{By: "alice", Note: "maintenance over"})
	require.NoError(t, err)

	st := s.parked(ctx, h.Key)
	require.Len(t, st.Attempts, 1, "nothing sent after the hold: %+v", st.Attempts)
	require.Equal(t, fmt.Sprintf("the send after attempt 1 was held (paused: partner maintenance (paused by alice)) until now; attempt 1 may have applied, "+
		"and destination %q (dedup key) cannot deduplicate a send that would arrive after its key retention of 10s", name), st.Review.Evidence)
	t.Logf("evidence: %s", st.Review.Evidence)
	require.Equal(t, 1, s.effects(svc), "one ticket")

	_, err = s.starter.Review(ctx, h.Key, workflows.ReviewDecision{Decision: workflows.DecisionRetry, Reviewer: "ops", Note: "checked: send it again"})
	require.NoError(t, err)
	st = s.waitFor(ctx, h.Key, time.Minute, "finished", func(st workflows.DeliveryStatus) bool { return st.Status != "" })
	require.Equal(t, workflows.StatusCreated, st.Status, "the reviewer's retry is sent: %+v", st.Attempts)
	require.Len(t, st.Attempts, 2)
	require.Equal(t, 2, s.effects(svc), "the reviewer's retry made its effect at the service that ignores keys")
}

// envWithContract is a test environment whose destination dest runs
// under its contract changed by edit, on activities that find no earlier
// runs; it closes with the test.
func envWithContract(t *testing.T, dest string, edit func(*contract.Contract)) *Env {
	t.Helper()
	env, err := NewEnv(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(env.Close)
	d := env.Config.Destinations[dest]
	edit(&d.Contract)
	env.Config.Destinations[dest] = d
	env.Activities = worker.NewActivities(nil, env.Config, env.Adapters)
	env.Activities.Runs = noEarlierRuns{}
	return env
}

// retentionStack deploys destination svc-RUN, a key destination
// (retriesIn3s) with this key retention whose service ignores keys,
// standing in for the destination past its retention, and starts a
// `courier worker` process; the service loses its first answer after the
// commit. more, when set, names another workflow of the destination's to
// clean up (its gate).
func retentionStack(t *testing.T, svc string, retention time.Duration, more func(name string) string) (*opsStack, string, *lab.Worker) {
	s := newOpsStack(t, map[string]sandbox.Mode{svc: sandbox.ModeIgnoresKeys})
	name := svc + "-" + s.run
	if more != nil {
		*s.workflow = append(*s.workflow, more(name))
	}
	s.deploy(destinations.Config{Destinations: map[string]destinations.Destination{name: s.dest(svc, retriesIn3s(retention))}})
	w := s.startWorker()
	require.NoError(t, s.sandbox.Inject(svc, closeAfterCommit(1)))
	return s, name, w
}

// retrying starts the delivery of id to dest and waits until its retry is
// scheduled; began is just before the start.
func (s *opsStack) retrying(ctx context.Context, dest, id string) (began time.Time, h starter.Handle) {
	s.t.Helper()
	began = time.Now()
	h, err := s.starter.Start(ctx, s.input(dest, id))
	require.NoError(s.t, err)
	s.waitFor(ctx, h.Key, 30*time.Second, "retrying", func(st workflows.DeliveryStatus) bool { return st.State == workflows.StateRetryWait })
	return began, h
}

// parked waits until the delivery parks or ends, and requires it parked.
func (s *opsStack) parked(ctx context.Context, key string) workflows.DeliveryStatus {
	s.t.Helper()
	st := s.waitFor(ctx, key, time.Minute, "parked or finished", func(st workflows.DeliveryStatus) bool {
		return st.State == workflows.StateAwaitingReview || st.Status != ""
	})
	require.Equal(s.t, workflows.StateAwaitingReview, st.State, "%s after %+v", st.Status, st.Attempts)
	return st
}

// retriesIn3s is a key destination's contract with key_retention
// retention, whose retry is decided 3s after an attempt of at most 1s.
func retriesIn3s(retention time.Duration) contract.Contract {
	return contract.Contract{
		Dedup: contract.DedupKey, KeyRetention: contract.Duration(retention),
		Retry: contract.Retry{MaxAttempts: 3, InitialInterval: contract.Duration(3 * time.Second), MaxInterval: contract.Duration(3 * time.Second),
			AttemptTimeout: contract.Duration(time.Second), Deadline: contract.Duration(time.Minute)},
	}
}
