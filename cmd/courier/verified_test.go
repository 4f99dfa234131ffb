package main

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// destPlain is legacy's service under the file's plain default reviewers:
// a destination from before keys, deciding as it always did.
const destPlain = "legacy-plain"

// TestReviewVerified: at a destination whose reviewers have keys, every
// kind of bad proof is refused by update and ignored by signal, each with
// its reason, and nothing moves; a signed decision is accepted, and the
// result and the history record who it proves decided. A destination of
// plain names decides as before.
func TestReviewVerified(t *testing.T) {
	keys := newReviewerKeys(t, "alice", "bob", "mallory")
	pub := keys.pub
	b := startLab(t, 10*time.Minute, func(cfg *destinations.Config) {
		cfg.Reviewers = destinations.Plain("ops")
		legacy := cfg.Destinations[lab.DestLegacy]
		cfg.Destinations[destPlain] = legacy
		legacy.Reviewers = destinations.Reviewers{
			{Name: "alice", Key: pub("alice"), Decisions: []string{"retry", "delivered", "abandon"}},
			{Name: "bob", Key: pub("bob"), Decisions: []string{"abandon"}},
		}
		cfg.Destinations[lab.DestLegacy] = legacy
	})
	ctx, st := b.ctx, b.st
	dir := t.TempDir()
	keyFile := func(name string) string { return keys.file(t, dir, name) }
	park := func(dest, id string) workflows.DeliveryStatus {
		t.Helper()
		require.NoError(t, st.Sandbox.Inject(lab.SandboxService(st.Config.Destinations[dest]), sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
		s, err := st.Starter.Deliver(ctx, lab.TicketInput(dest, id))
		require.NoError(t, err)
		require.Equal(t, workflows.StateAwaitingReview, s.State, "%s parks: its response was lost after the commit", id)
		return s
	}
	a, other := park(lab.DestLegacy, "verified-1"), park(lab.DestLegacy, "verified-2")
	proofFor := func(s workflows.DeliveryStatus, signer string, name string, d workflows.ReviewDecision, edit func(*reviewproof.Decision), at time.Time) workflows.ReviewDecision {
		pd := reviewproof.Decision{Key: s.Key, Destination: s.Operation.Destination, Parked: s.Review.Requested,
			Decision: d.Decision, ResourceID: d.ResourceID, Note: d.Note}
		if edit != nil {
			edit(&pd)
		}
		var err error
		d.Proof, err = reviewproof.Sign(keys[signer], name, pd, at, 10*time.Minute)
		require.NoError(t, err)
		return d
	}
	retry := workflows.ReviewDecision{Decision: workflows.DecisionRetry, Reviewer: "Alice A.", Note: "not in legacy"}
	now := time.Now()
	altered := proofFor(a, "alice", "alice", retry, nil, now)
	altered.Note = "changed after signing"
	bad := []struct {
		name string
		d    workflows.ReviewDecision
		why  error
		says string
	}{
		{"no proof", retry, reviewproof.ErrMissing, "legacy's reviewers sign their decisions"},
		{"forged", proofFor(a, "mallory", "alice", retry, nil, now), reviewproof.ErrSignature, "does not verify with alice's key"},
		{"unknown key id", proofFor(a, "mallory", "mallory", retry, nil, now), reviewproof.ErrUnknownKey, `"mallory" is not among legacy's reviewers (alice, bob)`},
		{"altered", altered, reviewproof.ErrAltered, "note (its sha-256 differs)"},
		{"expired", proofFor(a, "alice", "alice", retry, nil, now.Add(-time.Hour)), reviewproof.ErrExpired, "sign the decision again"},
		{"another delivery's", proofFor(other, "alice", "alice", retry, nil, now), reviewproof.ErrOtherDelivery, "signed for delivery " + `"` + other.Key + `"`},
		{"another destination's", proofFor(a, "alice", "alice", retry, func(d *reviewproof.Decision) { d.Destination = lab.DestCRM }, now),
			reviewproof.ErrOtherDestination, `signed for "crm", this delivery goes to "legacy"`},
		{"not allowed", proofFor(a, "bob", "bob", retry, nil, now), reviewproof.ErrNotAllowed, "legacy's reviewers: bob may abandon"},
	}
	for _, c := range bad {
		_, err := st.Starter.Review(ctx, a.Key, c.d)
		var refused *starter.ReviewRefusedError
		require.True(t, errors.As(err, &refused), "%s: %v", c.name, err)
		require.Contains(t, refused.Reason, "proof: "+c.why.Error(), c.name)
		require.Contains(t, refused.Reason, c.says, c.name)
		require.NoError(t, st.Temporal.Client().SignalWorkflow(ctx, workflows.WorkflowID(a.Key), "", workflows.SignalReview, c.d))
	}
	var s workflows.DeliveryStatus
	require.Eventually(t, func() bool {
		var err error
		s, err = st.Starter.Status(ctx, a.Key)
		require.NoError(t, err)
		return s.Review.Ignored == len(bad)
	}, time.Minute, 100*time.Millisecond, "every bad signal is recorded as ignored")
	require.Equal(t, workflows.StateAwaitingReview, s.State, "nothing moved")
	require.Zero(t, s.Review.AcceptedDecisions())
	for i, c := range bad {
		rec := s.Review.Decisions[i]
		require.Equal(t, "signal", rec.Via)
		require.False(t, rec.Accepted)
		require.Contains(t, rec.Reason, c.says, c.name)
		require.Empty(t, rec.Principal)
	}
	require.Len(t, st.Sandbox.Requests(lab.SandboxService(st.Config.Destinations[lab.DestLegacy])), 2, "no bad decision sent anything")

	// alice signs a retry with the CLI: accepted, recorded as alice's by the
	// policy that allowed it. The retry's response is lost too, so it parks again.
	require.NoError(t, st.Sandbox.Inject("legacy", sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
	printed := b.runWith([]string{envReviewerKey + "=" + keyFile("alice")},
		"review", a.Key, "--decision", "retry", "--reviewer", "Alice A.", "--note", "not in legacy", "--print")
	require.Equal(t, cli.CodeOK, printed.code, printed.stderr)
	var signed workflows.ReviewDecision
	require.NoError(t, json.Unmarshal([]byte(printed.stdout), &signed), printed.stdout)
	require.NotEmpty(t, signed.Proof)
	s, err := st.Starter.Status(ctx, a.Key)
	require.NoError(t, err)
	require.Equal(t, len(bad), s.Review.Ignored, "--print sends nothing")

	r := b.run("review", a.Key, "--decision", "retry", "--reviewer", "Alice A.", "--note", "not in legacy", "--key", keyFile("alice"))
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	var rec workflows.ReviewRecord
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rec), r.stdout)
	require.True(t, rec.Accepted)
	require.Equal(t, "alice", rec.Principal)
	require.Equal(t, "legacy's reviewers: alice may retry, delivered, abandon", rec.Policy)
	require.Equal(t, "Alice A.", rec.Reviewer, "the typed name, for display")
	require.Empty(t, rec.Proof, "the record holds what the proof proved; the history's update holds the proof")

	s, err = st.Starter.Wait(ctx, a.Key)
	require.NoError(t, err)
	require.Equal(t, workflows.StateAwaitingReview, s.State, "the retry's response was lost as well")
	require.Len(t, s.Attempts, 2)
	// The history's update carries the verified principal.
	found := false
	it := st.Temporal.Client().GetWorkflowHistory(ctx, workflows.WorkflowID(a.Key), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if done := e.GetWorkflowExecutionUpdateCompletedEventAttributes(); done != nil {
			// The deliver updates' answers complete here too.
			var got workflows.ReviewRecord
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(done.GetOutcome().GetSuccess(), &got))
			found = found || got.Accepted && got.Principal == "alice" && got.Policy == rec.Policy
		}
	}
	require.True(t, found, "the accepted update's answer in the history names alice")

	// The decision alice signed for the first park cannot decide the second.
	_, err = st.Starter.Review(ctx, a.Key, signed)
	var refused *starter.ReviewRefusedError
	require.True(t, errors.As(err, &refused), "%v", err)
	require.Contains(t, refused.Reason, "proof: "+reviewproof.ErrEarlierPark.Error())
	require.NoError(t, st.Temporal.Client().SignalWorkflow(ctx, workflows.WorkflowID(a.Key), "", workflows.SignalReview, signed))

	// bob may abandon: signed with the CLI, sent by signal, accepted.
	printed = b.runWith([]string{envReviewerKey + "=" + keyFile("bob")},
		"review", other.Key, "--decision", "abandon", "--reviewer", "bob", "--note", "customer cancelled", "--print")
	require.Equal(t, cli.CodeOK, printed.code, printed.stderr)
	require.NoError(t, json.Unmarshal([]byte(printed.stdout), &signed))
	require.NoError(t, st.Temporal.Client().SignalWorkflow(ctx, workflows.WorkflowID(other.Key), "", workflows.SignalReview, signed))
	s, err = st.Starter.Wait(ctx, other.Key)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusAbandoned, s.Status)
	i := len(s.Review.Decisions) - 1
	require.True(t, s.Review.Decisions[i].Accepted)
	require.Equal(t, "bob", s.Review.Decisions[i].Principal)
	require.Equal(t, "signal", s.Review.Decisions[i].Via)
	require.Contains(t, s.Error, "abandoned by bob (verified)")

	s, err = st.Starter.Status(ctx, a.Key)
	require.NoError(t, err)
	last := s.Review.Decisions[len(s.Review.Decisions)-1]
	require.False(t, last.Accepted)
	require.Contains(t, last.Reason, "signed for another park", "the replayed signal too")

	// A destination of plain names: a name off the list is refused, a listed
	// one decides with no proof, as before.
	p := park(destPlain, "plain-1")
	_, err = st.Starter.Review(ctx, p.Key, workflows.ReviewDecision{Decision: "abandon", Reviewer: "mallory", Note: "x"})
	require.True(t, errors.As(err, &refused), "%v", err)
	require.Contains(t, refused.Reason, `reviewer: "mallory" may not review deliveries; allowed: ops`)
	rec, err = st.Starter.Review(ctx, p.Key, workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops", Note: "x"})
	require.NoError(t, err)
	require.True(t, rec.Accepted)
	require.Empty(t, rec.Principal)
}
