package testsuite

// Deliveries stopped from outside (the web UI offers Terminate and Request
// Cancellation on every running one), on a real dev server with real
// `courier worker` processes and a sandbox counting stored effects: none
// is left wedged, and none sends twice without a review.

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// parkedAtNone is a stack with a worker serving "plain" (dedup none) and a
// delivery parked there after its one attempt committed and lost its
// response.
func parkedAtNone(ctx context.Context, t *testing.T, name string) (*opsStack, workflows.DeliveryInput, workflows.DeliveryStatus, string) {
	t.Helper()
	s := newOpsStack(t, map[string]sandbox.Mode{"plain": sandbox.ModeNoKeys})
	s.deploy(destinations.Config{Reviewers: destinations.Plain("ops"), Destinations: map[string]destinations.Destination{
		"plain": s.dest("plain", contract.Contract{Dedup: contract.DedupNone, Retry: contract.Retry{MaxAttempts: 3,
			AttemptTimeout: contract.Duration(2 * time.Second), Deadline: contract.Duration(time.Minute)}}),
	}})
	s.startWorker()
	require.NoError(t, s.sandbox.Inject("plain", sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit, Count: 1}))
	in := s.input("plain", name)
	st := s.deliver(ctx, in)
	require.Equal(t, workflows.StateAwaitingReview, st.State)
	require.Equal(t, 1, s.effects("plain"))
	return s, in, st, s.describe(ctx, st.Key).GetExecution().GetRunId()
}

// listedAwaitingReview: the key is among the deliveries listed as awaiting review.
func (s *opsStack) listedAwaitingReview(ctx context.Context, key string) bool {
	s.t.Helper()
	ds, err := s.starter.ListAwaitingReview(ctx)
	require.NoError(s.t, err)
	return slices.ContainsFunc(ds, func(d starter.Delivery) bool { return d.Key == key })
}

// TestTerminatedDeliveryMovesOn: a parked delivery terminated from outside
// reads as terminated (not as the awaiting_review it replays to), leaves
// the awaiting-review listing, refuses a review saying how to go on, and a
// new delivery of the operation runs again and parks naming the terminated
// run: still one effect.
func TestTerminatedDeliveryMovesOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, in, st, runID := parkedAtNone(ctx, t, "terminated")
	require.Eventually(t, func() bool { return s.listedAwaitingReview(ctx, st.Key) }, 10*time.Second, 100*time.Millisecond)

	cli, err := devserver.Binary()
	require.NoError(t, err)
	out, err := exec.CommandContext(ctx, cli, "workflow", "terminate",
		"--address", s.temporal.HostPort, "--namespace", s.temporal.Namespace,
		"--workflow-id", workflows.WorkflowID(st.Key), "--reason", "stuck, says the web UI").CombinedOutput()
	require.NoError(t, err, "%s", out)

	now, err := s.starter.Status(ctx, st.Key)
	require.NoError(t, err)
	require.Equal(t, workflows.State(workflows.StatusTerminated), now.State)
	require.Equal(t, workflows.StatusTerminated, now.Status)
	require.NotNil(t, now.Ended)
	require.Equal(t, runID, now.Ended.RunID)
	require.Contains(t, now.Ended.Reason, "stuck, says the web UI")
	require.WithinDuration(t, time.Now(), now.Ended.At, time.Minute)
	require.Len(t, now.Attempts, 1, "what the run recorded before it was stopped")

	require.Eventually(t, func() bool { return !s.listedAwaitingReview(ctx, st.Key) }, 10*time.Second, 100*time.Millisecond,
		"a terminated run is no longer awaiting review")

	_, err = s.starter.Review(ctx, st.Key, workflows.ReviewDecision{Decision: "retry", Reviewer: "ops", Note: "try again"})
	var notAwaiting *starter.NotAwaitingReviewError
	require.ErrorAs(t, err, &notAwaiting)
	require.ErrorContains(t, err, "was terminated")
	require.ErrorContains(t, err, "deliver the operation again")

	again := s.deliver(ctx, in)
	require.Equal(t, workflows.StateAwaitingReview, again.State, "%+v", again)
	require.Equal(t, contract.ClassEarlierRun, again.Attempts[0].Class)
	require.Contains(t, again.Review.Evidence, runID, "the evidence names the terminated run")
	require.Contains(t, again.Review.Evidence, "terminated")
	require.NotEqual(t, runID, s.describe(ctx, st.Key).GetExecution().GetRunId())
	require.Equal(t, 1, s.effects("plain"), "nothing sent again without a review")

	s.review(ctx, st.Key, workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops", Note: "found it sent"})
	res := s.result(ctx, st.Key)
	require.Equal(t, workflows.StatusAbandoned, res.Status)
	s.requireSound(ctx, res)
	require.Equal(t, 1, s.effects("plain"))
}

// TestCanceledDeliveryEnds: a cancel request on a parked delivery ends it
// as canceled, in its result, its status query and its CourierState; it
// counts as possibly applied (its run fails Unconfirmed), so delivering
// the operation again parks naming it.
func TestCanceledDeliveryEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, in, st, runID := parkedAtNone(ctx, t, "canceled")
	wid := workflows.WorkflowID(st.Key)
	require.NoError(t, s.c.CancelWorkflow(ctx, wid, ""))

	res := s.result(ctx, st.Key)
	require.Equal(t, workflows.StatusCanceled, res.Status, "%+v", res)
	require.False(t, res.LeftNoEffect())
	require.Contains(t, res.Error, "may have applied")
	_, unconfirmed := workflows.Failure(s.c.GetWorkflow(ctx, wid, runID).Get(ctx, nil), workflows.ErrUnconfirmed)
	require.True(t, unconfirmed, "its run fails Unconfirmed, not NotDelivered: its attempt may have applied")
	now, err := s.starter.Status(ctx, st.Key)
	require.NoError(t, err)
	require.Equal(t, workflows.State(workflows.StatusCanceled), now.State)
	require.Nil(t, now.Ended, "the run ended itself")
	require.Eventually(t, func() bool {
		resp, err := s.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf(
			"WorkflowId = '%s' AND RunId = '%s' AND %s = '%s'", wid, runID, workflows.SAState.GetName(), workflows.StatusCanceled)})
		require.NoError(t, err)
		return len(resp.GetExecutions()) == 1
	}, 10*time.Second, 100*time.Millisecond, "CourierState says canceled")
	require.Eventually(t, func() bool { return !s.listedAwaitingReview(ctx, st.Key) }, 10*time.Second, 100*time.Millisecond)
	s.requireSound(ctx, res)

	again := s.deliver(ctx, in)
	require.Equal(t, workflows.StateAwaitingReview, again.State, "%+v", again)
	require.Equal(t, contract.ClassEarlierRun, again.Attempts[0].Class)
	require.Contains(t, again.Review.Evidence, runID)
	require.Contains(t, again.Review.Evidence, string(workflows.StatusCanceled))
	require.Equal(t, 1, s.effects("plain"))
}

// TestCanceledInFlight: a cancel request while an attempt is in flight
// records that attempt as an unknown outcome and ends canceled; the
// destination holds one effect.
func TestCanceledInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, _, key := slowAttempt(ctx, t, "canceled-in-flight")
	require.NoError(t, s.c.CancelWorkflow(ctx, workflows.WorkflowID(key), ""))
	res := s.result(ctx, key)
	require.Equal(t, workflows.StatusCanceled, res.Status, "%+v", res)
	require.Len(t, res.Attempts, 1)
	require.Equal(t, contract.ClassUnknown, res.Attempts[0].Class, "an attempt in flight is an unknown outcome")
	require.False(t, res.LeftNoEffect())
	s.requireSound(ctx, res)
	require.Equal(t, 1, s.effects("slow"))
}
