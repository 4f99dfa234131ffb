package testsuite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/activities/ledger"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// forgetfulServer is a dev server of the ledger tests' own that deletes a
// closed run as soon as it is asked: the server deletes one only once its
// close is acknowledged, which it records every 30 s by default.
func forgetfulServer(t *testing.T) *lab.Temporal {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp, err := lab.StartTemporal(ctx, lab.TemporalOptions{Logger: testLogger,
		ServerArgs: []string{"--dynamic-config-value", `history.transferProcessorUpdateAckInterval="1s"`}})
	require.NoError(t, err)
	t.Cleanup(tmp.Close)
	return tmp
}

// ledgerTest is realTest on the forgetful server.
func ledgerTest(t *testing.T, timeout time.Duration) (context.Context, *RealLab, *Env) {
	t.Helper()
	ctx, rl, env := realTest(t, timeout)
	rl.Temporal = forgetfulServer(t)
	return ctx, rl, env
}

// forget deletes every run of the delivery with this key, as the
// namespace's retention deletes closed runs, and waits until the server
// and its visibility no longer know any: from then on only the outcome
// ledger remembers the operation.
func forget(ctx context.Context, t *testing.T, c client.Client, ns, key string) {
	t.Helper()
	wid := workflows.WorkflowID(key)
	var runs []string
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = %q", wid)})
	require.NoError(t, err)
	for _, e := range resp.GetExecutions() {
		runs = append(runs, e.GetExecution().GetRunId())
	}
	require.NotEmpty(t, runs, "no run of %s to forget", wid)
	for _, run := range runs {
		_, err := c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace: ns, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: run}})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		_, err := c.DescribeWorkflowExecution(ctx, wid, "")
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) {
			return false
		}
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = %q", wid)})
		return err == nil && len(resp.GetExecutions()) == 0
	}, 30*time.Second, 200*time.Millisecond, "the server still knows %s", wid)
}

// deliverSettled delivers in and returns its settled status: a final
// result, or parked for review; a conflict the starter refuses is
// returned as status conflict.
func deliverSettled(ctx context.Context, t *testing.T, st *starter.Client, in workflows.DeliveryInput) workflows.DeliveryStatus {
	t.Helper()
	s, err := st.Deliver(ctx, in)
	var conflict *starter.ConflictError
	if errors.As(err, &conflict) {
		s.Status = workflows.StatusConflict
		return s
	}
	require.NoError(t, err)
	return s
}

func effects(t *testing.T, env *Env, dest, id string) int {
	t.Helper()
	n, err := env.Effects(dest, id)
	require.NoError(t, err)
	return n
}

// TestLedgerRemembersPastRetention: at every dedup kind, a delivery's
// repeat after its run is gone answers the first outcome from the outcome
// ledger without contacting the destination (one effect, the same
// receipt), and the same key with another payload is a conflict.
func TestLedgerRemembersPastRetention(t *testing.T) {
	ctx, rl, env := ledgerTest(t, 4*time.Minute)
	rl.withWorker(t, env)
	c := rl.Temporal.Client()
	st := starter.New(c)
	for _, dest := range lab.OneOfEachDedup {
		t.Run(dest, func(t *testing.T) {
			id := "remember-" + dest + "-" + rl.RunID
			in := lab.Input(dest, id, lab.Ticket(id, "Move the workshop booking"))
			first := deliverSettled(ctx, t, st, in)
			require.Equal(t, workflows.StatusCreated, first.Status, first.Error)
			forget(ctx, t, c, rl.Temporal.Namespace, first.Key)

			again := deliverSettled(ctx, t, st, in)
			require.Equal(t, workflows.StatusDuplicate, again.Status, again.Error)
			require.Equal(t, first.Receipt.ResourceID, again.Receipt.ResourceID, "the first run's receipt")
			require.Equal(t, activities.SourceLedger, again.Receipt.Source)
			require.Equal(t, 1, effects(t, env, dest, id))

			forget(ctx, t, c, rl.Temporal.Namespace, first.Key)
			other := deliverSettled(ctx, t, st, lab.Input(dest, id, lab.Ticket(id, "Cancel the workshop booking")))
			require.Equal(t, workflows.StatusConflict, other.Status, other.Error)
			require.Equal(t, 1, effects(t, env, dest, id), "another payload sends nothing")
		})
	}
}

// TestLedgerRemembersReviews: at a destination without dedup, what a
// reviewer decided outlives the run: delivered answers its receipt,
// abandoned parks the repeat naming the first run; a rejected request and
// a spent budget that applied nothing leave the operation free to run
// again.
func TestLedgerRemembersReviews(t *testing.T) {
	ctx, rl, env := ledgerTest(t, 4*time.Minute)
	rl.withWorker(t, env)
	c := rl.Temporal.Client()
	st := starter.New(c)
	rd := &Real{Starter: st, Temporal: c, rl: rl}
	decide := func(decision, id string) Decider {
		return func(workflows.DeliveryStatus) *workflows.ReviewDecision {
			d := &workflows.ReviewDecision{Decision: decision, Reviewer: "ops", Note: "checked the helpdesk"}
			if decision == workflows.DecisionDelivered {
				recs, err := env.Sandbox.Records(lab.DestLegacy)
				require.NoError(t, err)
				for _, r := range recs {
					if containsID(r.Payload, id) {
						d.ResourceID = r.TicketID
					}
				}
			}
			return d
		}
	}

	t.Run("delivered by review", func(t *testing.T) {
		id := "reviewed-" + rl.RunID
		in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Call the customer back"))
		require.NoError(t, env.Inject(lab.DestLegacy, closeAfterCommit(1)))
		o, err := rd.Deliver(ctx, in, decide(workflows.DecisionDelivered, id))
		require.NoError(t, err)
		require.Equal(t, workflows.StatusDeliveredByReview, o.Result.Status)
		forget(ctx, t, c, rl.Temporal.Namespace, o.Result.Key)

		again := deliverSettled(ctx, t, st, in)
		require.Equal(t, workflows.StatusDuplicate, again.Status, again.Error)
		require.Equal(t, o.Result.Receipt.ResourceID, again.Receipt.ResourceID, "the ticket the reviewer found")
		require.Equal(t, 1, effects(t, env, lab.DestLegacy, id))
	})

	t.Run("abandoned", func(t *testing.T) {
		id := "abandoned-" + rl.RunID
		in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Call the customer back"))
		require.NoError(t, env.Inject(lab.DestLegacy, closeAfterCommit(1)))
		o, err := rd.Deliver(ctx, in, decide(workflows.DecisionAbandon, id))
		require.NoError(t, err)
		require.Equal(t, workflows.StatusAbandoned, o.Result.Status)
		forget(ctx, t, c, rl.Temporal.Namespace, o.Result.Key)

		again := deliverSettled(ctx, t, st, in)
		require.Equal(t, workflows.StateAwaitingReview, again.State, "not known whether the first applied it: a person decides")
		require.Contains(t, again.Review.Evidence, "outcome ledger")
		require.Equal(t, 1, effects(t, env, lab.DestLegacy, id))
		// A reviewer who saw the first run named may still send again.
		_, err = st.Review(ctx, again.Key, workflows.ReviewDecision{Decision: workflows.DecisionRetry, Reviewer: "ops", Note: "the customer asked again"})
		require.NoError(t, err)
		sent, err := st.Wait(ctx, again.Key)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusCreated, sent.Status, sent.Error)
		require.Equal(t, 2, effects(t, env, lab.DestLegacy, id), "the reviewer's retry, and only it")
	})

	t.Run("rejected, then corrected", func(t *testing.T) {
		id := "rejected-" + rl.RunID
		first := deliverSettled(ctx, t, st, lab.Input(lab.DestLegacy, id, lab.Ticket(id, "")))
		require.Equal(t, workflows.StatusRejected, first.Status, first.Error)
		forget(ctx, t, c, rl.Temporal.Namespace, first.Key)
		fixed := deliverSettled(ctx, t, st, lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Call the customer back")))
		require.Equal(t, workflows.StatusCreated, fixed.Status, "a rejected request consumed nothing: %s", fixed.Error)
		require.Equal(t, 1, effects(t, env, lab.DestLegacy, id))
	})

	t.Run("attempt limit with nothing applied", func(t *testing.T) {
		id := "spent-" + rl.RunID
		in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Call the customer back"))
		require.NoError(t, env.Inject(lab.DestLegacy, sandbox.Fault{Kind: sandbox.FaultFail503, Count: 50}))
		first := deliverSettled(ctx, t, st, in)
		require.Equal(t, workflows.StatusAttemptLimit, first.Status, first.Error)
		require.NoError(t, env.Sandbox.Reset(lab.SandboxService(env.Config.Destinations[lab.DestLegacy])))
		forget(ctx, t, c, rl.Temporal.Namespace, first.Key)
		again := deliverSettled(ctx, t, st, in)
		require.Equal(t, workflows.StatusCreated, again.Status, again.Error)
		require.Equal(t, 1, effects(t, env, lab.DestLegacy, id))
	})

	t.Run("twenty at once", func(t *testing.T) {
		id := "stampede-" + rl.RunID
		in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Call the customer back"))
		first := deliverSettled(ctx, t, st, in)
		require.Equal(t, workflows.StatusCreated, first.Status, first.Error)
		forget(ctx, t, c, rl.Temporal.Namespace, first.Key)
		var wg sync.WaitGroup
		statuses := make([]workflows.Status, 20)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := st.Deliver(ctx, in)
				if err == nil {
					statuses[i] = s.Status
				}
			}()
		}
		wg.Wait()
		for i, s := range statuses {
			require.Equal(t, workflows.StatusDuplicate, s, "repeat %d", i)
		}
		require.Equal(t, 1, effects(t, env, lab.DestLegacy, id))
	})
}

// TestLedgerDownSendsNothing: a repeat whose ledger cannot be read is not
// sent blind: it parks, saying why.
func TestLedgerDownSendsNothing(t *testing.T) {
	ctx, rl, env := ledgerTest(t, 2*time.Minute)
	rl.withWorker(t, env)
	c := rl.Temporal.Client()
	st := starter.New(c)
	id := "ledger-down-" + rl.RunID
	in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Call the customer back"))
	first := deliverSettled(ctx, t, st, in)
	require.Equal(t, workflows.StatusCreated, first.Status, first.Error)
	forget(ctx, t, c, rl.Temporal.Namespace, first.Key)

	require.NoError(t, env.Outcomes.Close()) // the worker's ledger is gone
	again := deliverSettled(ctx, t, st, in)
	require.Equal(t, workflows.StateAwaitingReview, again.State)
	require.Contains(t, again.Review.Evidence, "outcome ledger could not be read")
	require.Equal(t, 1, effects(t, env, lab.DestLegacy, id))
	_, err := st.Review(ctx, again.Key, workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "ops", Note: "ledger test"})
	require.NoError(t, err)
}

// TestLedgerRowsOfOneRun: the ledger holds one row per operation, written
// by the run that decided it.
func TestLedgerRowsOfOneRun(t *testing.T) {
	ctx, rl, env := ledgerTest(t, time.Minute)
	rl.withWorker(t, env)
	st := starter.New(rl.Temporal.Client())
	id := "row-" + rl.RunID
	res := deliverSettled(ctx, t, st, lab.Input(lab.DestLedger, id, lab.Ticket(id, "Book the room")))
	require.Equal(t, workflows.StatusCreated, res.Status)
	e, ok, err := env.Outcomes.Get(ctx, res.Key)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "created", e.Status)
	require.Equal(t, res.Fingerprint, e.Fingerprint)
	require.Equal(t, workflows.WorkflowID(res.Key), e.WorkflowID)
	require.NotEqual(t, ledger.StatusPending, e.Status)
}

// TestLedgerUnreadableReceiptParks: a ledger row whose receipt cannot be
// read (damaged, or sealed with a key the worker does not hold) answers
// nothing: the repeat parks, saying why, and nothing is sent.
func TestLedgerUnreadableReceiptParks(t *testing.T) {
	ctx, rl, env := realTest(t, time.Minute)
	rl.withWorker(t, env)
	st := starter.New(rl.Temporal.Client())
	id := "unreadable-" + rl.RunID
	in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Call the customer back"))
	fp, err := opkey.Fingerprint(in.Payload)
	require.NoError(t, err)
	key := opkey.Key(in.Operation)
	require.NoError(t, env.Outcomes.Put(ctx, ledger.Entry{Key: key, Fingerprint: fp, Status: "created", Destination: lab.DestLegacy,
		Receipt: []byte("not a payload"), WorkflowID: workflows.WorkflowID(key), RunID: "run-before"}))

	res := deliverSettled(ctx, t, st, in)
	require.Equal(t, workflows.StateAwaitingReview, res.State, "status %s: %s", res.Status, res.Error)
	require.Contains(t, res.Review.Evidence, "its receipt cannot be read")
	require.Equal(t, 0, effects(t, env, lab.DestLegacy, id))
	_, err = st.Review(ctx, res.Key, workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "ops", Note: "ledger test"})
	require.NoError(t, err)
}
