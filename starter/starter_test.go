package starter_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

func newStarter() *starter.Client { return starter.New(fx.client) }

// uniqueID is a business id no other test run on this server has used, so
// the tests hold under -count=N against the one dev server.
func uniqueID(prefix string) string { return prefix + "-" + uuid.NewString()[:8] }

// helpdeskTicket is a helpdesk ticket under a business id no other run
// has used, and that id.
func helpdeskTicket(prefix, subject string) (string, workflows.DeliveryInput) {
	id := uniqueID(prefix)
	return id, lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, subject))
}

func effects(t *testing.T, dest, id string) int {
	t.Helper()
	n, err := fx.env.Effects(dest, id)
	require.NoError(t, err)
	return n
}

// deliver delivers in and returns its status; an error fails the test.
func deliver(t *testing.T, s *starter.Client, in workflows.DeliveryInput) workflows.DeliveryStatus {
	t.Helper()
	st, err := s.Deliver(context.Background(), in)
	require.NoError(t, err)
	return st
}

// ticketOf finds the ticket the sandbox stored for a business id, as an
// operator checking the destination would.
func ticketOf(t *testing.T, dest, id string) string {
	t.Helper()
	recs, err := fx.env.Sandbox.Records(dest)
	require.NoError(t, err)
	for _, r := range recs {
		var p struct {
			RequestID string `json:"request_id"`
		}
		if json.Unmarshal(r.Payload, &p) == nil && p.RequestID == id {
			return r.TicketID
		}
	}
	require.Failf(t, "no ticket", "no %s ticket for %s", dest, id)
	return ""
}

func keys(ds []starter.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Key
	}
	return out
}

// eventuallyListed polls a listing until check holds: visibility lags the
// workflows, so a bounded poll is the honest test.
func eventuallyListed(t *testing.T, s *starter.Client, o starter.ListOptions, check func([]string) bool) []starter.Delivery {
	t.Helper()
	var ds []starter.Delivery
	require.Eventually(t, func() bool {
		var err error
		ds, err = s.List(context.Background(), o)
		require.NoError(t, err)
		return check(keys(ds))
	}, 30*time.Second, 200*time.Millisecond, "listing %s: got %v", o.Query(), keys(ds))
	return ds
}

// TestListByState lists deliveries by CourierState through the visibility
// API: one created, one parked for review and then abandoned.
func TestListByState(t *testing.T) {
	ctx := context.Background()
	s := newStarter()
	createdID, parkedID := uniqueID("vis-created"), uniqueID("vis-parked")
	created := lab.Input(lab.DestHelpdesk, createdID, lab.Ticket(createdID, "Book the room"))
	parked := lab.Input(lab.DestLegacy, parkedID, lab.Ticket(parkedID, "Call back the customer"))
	createdKey, parkedKey := opkey.Key(created.Operation), opkey.Key(parked.Operation)

	st := deliver(t, s, created)
	require.Equal(t, workflows.StatusCreated, st.Status)
	require.NoError(t, fx.env.Inject(lab.DestLegacy, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
	st = deliver(t, s, parked)
	require.Equal(t, workflows.StateAwaitingReview, st.State)

	awaiting := eventuallyListed(t, s, starter.ListOptions{State: "awaiting_review"}, func(ks []string) bool {
		return slices.Contains(ks, parkedKey)
	})
	require.NotContains(t, keys(awaiting), createdKey)
	i := slices.Index(keys(awaiting), parkedKey)
	require.Equal(t, starter.Delivery{
		Key: parkedKey, Destination: lab.DestLegacy, Operation: "create-ticket", BusinessID: parkedID,
		State: "awaiting_review", Started: awaiting[i].Started, WorkflowID: workflows.WorkflowID(parkedKey),
	}, awaiting[i])
	require.WithinDuration(t, time.Now(), awaiting[i].Started, time.Minute)

	viaShortcut, err := s.ListAwaitingReview(ctx)
	require.NoError(t, err)
	require.Contains(t, keys(viaShortcut), parkedKey)

	createdList := eventuallyListed(t, s, starter.ListOptions{State: "created"}, func(ks []string) bool {
		return slices.Contains(ks, createdKey)
	})
	require.NotContains(t, keys(createdList), parkedKey)

	byDest, err := s.List(ctx, starter.ListOptions{Destination: lab.DestLegacy})
	require.NoError(t, err)
	require.Contains(t, keys(byDest), parkedKey)
	require.NotContains(t, keys(byDest), createdKey)

	all, err := s.List(ctx, starter.ListOptions{})
	require.NoError(t, err)
	require.Subset(t, keys(all), []string{createdKey, parkedKey})
	one, err := s.List(ctx, starter.ListOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, one, 1)

	// Decided, it leaves the awaiting list and shows under its final state.
	rec, err := s.Review(ctx, parkedKey, workflows.ReviewDecision{Decision: "abandon", Reviewer: "alice", Note: "customer called us"})
	require.NoError(t, err)
	require.True(t, rec.Accepted)
	eventuallyListed(t, s, starter.ListOptions{State: "abandoned"}, func(ks []string) bool {
		return slices.Contains(ks, parkedKey)
	})
	eventuallyListed(t, s, starter.ListOptions{State: "awaiting_review"}, func(ks []string) bool {
		return !slices.Contains(ks, parkedKey)
	})

	_, err = s.List(ctx, starter.ListOptions{State: "waiting"})
	var invalid *starter.InvalidRequestError
	require.ErrorAs(t, err, &invalid)
	require.ErrorContains(t, err, `state "waiting" unknown; use one of delivering, retry_wait, paused, circuit_open, awaiting_review`)
}

func TestListQuery(t *testing.T) {
	require.Equal(t, `WorkflowType = "Delivery"`, starter.ListOptions{}.Query())
	require.Equal(t, `WorkflowType = "Delivery" AND CourierState = "awaiting_review" AND ExecutionStatus = "Running" AND CourierDestination = "legacy"`,
		starter.ListOptions{State: "awaiting_review", Destination: "legacy"}.Query())
	require.Equal(t, `WorkflowType = "Delivery" AND CourierState = "abandoned"`,
		starter.ListOptions{State: "abandoned"}.Query(), "a final state is final however the run closed")
}

func TestStartJoinsAndConflicts(t *testing.T) {
	ctx := context.Background()
	s := newStarter()
	id, in := helpdeskTicket("join", "Move the workshop booking")

	h, err := s.Start(ctx, in)
	require.NoError(t, err)
	require.False(t, h.Joined)
	require.Equal(t, workflows.WorkflowID(h.Key), h.WorkflowID)

	// Same operation, same payload written differently: the same fingerprint.
	same := in
	same.Payload = json.RawMessage(`{ "subject": "Move the workshop booking", "request_id": "` + id + `" }`)
	joined, err := s.Start(ctx, same)
	require.NoError(t, err)
	require.True(t, joined.Joined)
	require.Equal(t, h.RunID, joined.RunID)

	st := deliver(t, s, same)
	require.Equal(t, workflows.StatusDuplicate, st.Status)
	require.Equal(t, id, st.Operation.BusinessID)

	other := in
	other.Payload = lab.Ticket(id, "Another subject")
	_, err = s.Deliver(ctx, other)
	var conflict *starter.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, h.Key, conflict.Key)
	require.Equal(t, h.Fingerprint, conflict.ExistingFingerprint)
	require.Equal(t, 1, effects(t, lab.DestHelpdesk, id))
}

// TestJoinWithoutMemo: a delivery started by another SDK without the
// fingerprint memo is still compared, by the fingerprint the workflow
// derived from its own input.
func TestJoinWithoutMemo(t *testing.T) {
	ctx := context.Background()
	s := newStarter()
	id, in := helpdeskTicket("nomemo", "Order lunch")
	key := opkey.Key(in.Operation)
	run, err := fx.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflows.WorkflowID(key), TaskQueue: workflows.TaskQueue,
	}, workflows.WorkflowType, in)
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))

	st := deliver(t, s, in)
	require.Equal(t, workflows.StatusDuplicate, st.Status)

	other := in
	other.Payload = lab.Ticket(id, "Order dinner")
	_, err = s.Start(ctx, other)
	var conflict *starter.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, 1, effects(t, lab.DestHelpdesk, id))
}

func TestInvalidRequest(t *testing.T) {
	s := newStarter()
	for _, tc := range []struct {
		in   workflows.DeliveryInput
		want string
	}{
		{lab.Input("", "x", lab.Ticket("x", "s")), "destination: required"},
		{lab.Input(lab.DestHelpdesk, "x", json.RawMessage(`{"subject": }`)), "invalid JSON at offset 12"},
		{lab.Input(lab.DestHelpdesk, "x", json.RawMessage(`[]`)), "must be a JSON object"},
	} {
		_, err := s.Start(context.Background(), tc.in)
		var invalid *starter.InvalidRequestError
		require.ErrorAs(t, err, &invalid)
		require.ErrorContains(t, err, tc.want)
	}
}

func TestReviewErrors(t *testing.T) {
	ctx := context.Background()
	s := newStarter()
	decision := workflows.ReviewDecision{Decision: "retry", Reviewer: "alice", Note: "checked"}

	_, err := s.Review(ctx, uuid.NewString(), decision)
	require.ErrorIs(t, err, starter.ErrUnknownKey)
	_, err = s.Status(ctx, uuid.NewString())
	require.ErrorIs(t, err, starter.ErrUnknownKey)

	_, in := helpdeskTicket("review-done", "s")
	st := deliver(t, s, in)
	_, err = s.Review(ctx, st.Key, decision)
	var notAwaiting *starter.NotAwaitingReviewError
	require.ErrorAs(t, err, &notAwaiting)
	require.Equal(t, workflows.State(workflows.StatusCreated), notAwaiting.State)

	_, err = s.Review(ctx, st.Key, workflows.ReviewDecision{Decision: "maybe", Reviewer: "alice"})
	var invalid *starter.InvalidRequestError
	require.ErrorAs(t, err, &invalid)
	require.ErrorContains(t, err, `decision: "maybe" unknown`)
}

func TestParseKey(t *testing.T) {
	const key = "9911f040-05da-5df4-9971-bd649f21908f"
	for _, s := range []string{key, "delivery-" + key, " " + key + "\n"} {
		got, err := starter.ParseKey(s)
		require.NoError(t, err, s)
		require.Equal(t, key, got)
	}
	for _, s := range []string{"", "ticket-1", "9911F040-05DA-5DF4-9971-BD649F21908F", "delivery-", "{" + key + "}"} {
		_, err := starter.ParseKey(s)
		require.ErrorContains(t, err, "is not a delivery key", s)
	}
}

// TestRejectedDoesNotConsumeTheKey: a request the destination rejected can be
// sent again corrected, as a new run under the same key; a created delivery
// stays final.
func TestRejectedDoesNotConsumeTheKey(t *testing.T) {
	ctx := context.Background()
	s := newStarter()
	id, bad := helpdeskTicket("rejected", "")
	st := deliver(t, s, bad)
	require.Equal(t, workflows.StatusRejected, st.Status)

	// The same request again is a new run too: a rejected run applied
	// nothing (the destination refuses it again here).
	st = deliver(t, s, bad)
	require.Equal(t, workflows.StatusRejected, st.Status)
	runs, err := fx.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: "WorkflowId = '" + workflows.WorkflowID(st.Key) + "'"})
	require.NoError(t, err)
	require.Len(t, runs.GetExecutions(), 2, "the repeated rejected request ran again")

	fixed := bad
	fixed.Payload = lab.Ticket(id, "Move the workshop booking")
	st = deliver(t, s, fixed)
	require.Equal(t, workflows.StatusCreated, st.Status, "the corrected request is a new run")
	require.Equal(t, 1, effects(t, lab.DestHelpdesk, id))

	again := deliver(t, s, fixed)
	require.Equal(t, workflows.StatusDuplicate, again.Status)
	require.Equal(t, st.Receipt.ResourceID, again.Receipt.ResourceID)
	require.Equal(t, 1, effects(t, lab.DestHelpdesk, id))
}

// TestStatusCarriedOnce: Deliver answers with the whole status (attempts,
// receipt, events), and the delivery's history carries it once: the run's
// result holds it, the deliver update's answer says only that it is final.
func TestStatusCarriedOnce(t *testing.T) {
	ctx := context.Background()
	s := newStarter()
	_, in := helpdeskTicket("once", "Order the badges")
	st := deliver(t, s, in)
	require.Equal(t, workflows.StatusCreated, st.Status)
	require.Equal(t, workflows.State(workflows.StatusCreated), st.State)
	require.Len(t, st.Attempts, 1)
	require.NotEmpty(t, st.Receipt.ResourceID)
	require.NotEmpty(t, st.Events)

	var answers []string
	var result string
	iter := fx.client.GetWorkflowHistory(ctx, workflows.WorkflowID(st.Key), "", false, 0)
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		if a := e.GetWorkflowExecutionUpdateCompletedEventAttributes(); a != nil {
			answers = append(answers, string(a.GetOutcome().GetSuccess().GetPayloads()[0].GetData()))
		}
		if a := e.GetWorkflowExecutionCompletedEventAttributes(); a != nil {
			result = string(a.GetResult().GetPayloads()[0].GetData())
		}
	}
	require.Len(t, answers, 1)
	var brief map[string]any
	require.NoError(t, json.Unmarshal([]byte(answers[0]), &brief))
	require.Equal(t, map[string]any{"state": "created", "status": "created", "starter": brief["starter"], "brief": true}, brief)
	require.Contains(t, result, st.Receipt.ResourceID, "the run's result holds the receipt")

}

// TestWaitWhileRunning: Wait on a delivery still attempting answers
// through the deliver update, whose brief answer the run's result
// completes; the operation comes from the delivery as well.
func TestWaitWhileRunning(t *testing.T) {
	ctx := context.Background()
	s := newStarter()
	id, in := helpdeskTicket("wait", "Book the meeting room")
	require.NoError(t, fx.env.Inject(lab.DestHelpdesk, sandbox.Fault{Kind: sandbox.FaultDelayAfterCommit, Delay: lab.CaseBudget.AttemptTimeout / 2}))
	h, err := s.Start(ctx, in)
	require.NoError(t, err)
	st, err := s.Wait(ctx, h.Key)
	require.NoError(t, err)
	// Created, or on a machine slow enough to time the attempt out, a
	// duplicate: the helpdesk honours the key either way.
	require.Contains(t, []workflows.Status{workflows.StatusCreated, workflows.StatusDuplicate}, st.Status)
	require.Equal(t, in.Operation, st.Operation)
	require.NotEmpty(t, st.Attempts)
	require.NotEmpty(t, st.Receipt.ResourceID)
	require.Equal(t, 1, effects(t, lab.DestHelpdesk, id))
}
