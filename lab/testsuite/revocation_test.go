package testsuite

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// TestRevokedKeyDecidesNothing: a delivery parks under keyed reviewers
// alice and bob; the workers restart on a destinations file without bob.
// Decisions bob signed (by update, by signal, as a signed batch job's)
// still verify against the keys the delivery recorded, and are refused,
// each saying whose key for which destination is gone: the delivery stays
// parked and nothing is sent. alice, still in the file, then decides it.
func TestRevokedKeyDecidesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const dest = "revoke"
	s := newOpsStack(t, map[string]sandbox.Mode{dest: sandbox.ModeNoKeys})
	key := func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		return k
	}
	alice, bob := key(), key()
	reviewer := func(name string, k ed25519.PrivateKey) reviewproof.Reviewer {
		return reviewproof.Reviewer{Name: name, Key: reviewproof.FormatPublicKey(k.Public().(ed25519.PublicKey)), Decisions: reviewproof.Decisions}
	}
	deploy := func(rs ...reviewproof.Reviewer) {
		d := s.dest(dest, contract.Contract{Dedup: contract.DedupNone, Retry: contract.Retry{MaxAttempts: 1,
			AttemptTimeout: contract.Duration(5 * time.Second), Deadline: contract.Duration(time.Minute)}})
		d.Reviewers = rs
		s.deploy(destinations.Config{Destinations: map[string]destinations.Destination{dest: d}})
	}
	deploy(reviewer("alice", alice), reviewer("bob", bob))
	w1 := s.startWorker()
	require.NoError(t, s.sandbox.Inject(dest, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit, Count: 1}))
	st := s.deliver(ctx, s.input(dest, "revoked"))
	require.Equal(t, workflows.StateAwaitingReview, st.State, "its response was lost after the commit: %+v", st)
	require.Equal(t, 1, s.effects(dest))

	// bob's key leaves the file; the workers restart on it.
	w1.Kill()
	deploy(reviewer("alice", alice))
	s.startWorker()

	revoked := "key of reviewer bob for destination revoke is no longer in the destinations file"
	retry := workflows.ReviewDecision{Decision: workflows.DecisionRetry, Reviewer: "bob", Note: "not there"}
	byBob, err := s.starter.Sign(ctx, st.Key, retry, starter.Signer{Name: "bob", Key: bob})
	require.NoError(t, err)
	_, err = s.starter.Review(ctx, st.Key, byBob)
	var refused *starter.ReviewRefusedError
	require.True(t, errors.As(err, &refused), "the update is refused: %v", err)
	require.Contains(t, refused.Reason, revoked)
	wid := workflows.WorkflowID(st.Key)
	require.NoError(t, s.c.SignalWorkflow(ctx, wid, "", workflows.SignalReview, byBob))
	job := retry
	job.BatchJob = "revoked-job"
	job.Proof, err = reviewproof.SignJob(bob, "bob", reviewproof.Job{ID: job.BatchJob, Decision: job.Decision, Note: job.Note,
		Filter: reviewproof.JobFilter{Destination: dest, ParkedBefore: time.Now()}}, time.Now(), 10*time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.c.SignalWorkflow(ctx, wid, "", workflows.SignalReview, job))

	st = s.waitFor(ctx, st.Key, 30*time.Second, "with bob's three decisions recorded", func(st workflows.DeliveryStatus) bool {
		return st.Review != nil && st.Review.Ignored == 3
	})
	require.Equal(t, workflows.StateAwaitingReview, st.State, "still parked")
	for _, rec := range st.Review.Decisions {
		require.False(t, rec.Accepted)
		require.Contains(t, rec.Reason, revoked, "%+v", rec)
	}
	require.Len(t, s.sandbox.Requests(dest), 1, "nothing was sent")

	// alice is still in the file: she found the ticket.
	found, err := s.starter.Sign(ctx, st.Key, workflows.ReviewDecision{Decision: workflows.DecisionDelivered,
		ResourceID: s.firstTicket(dest), Reviewer: "alice", Note: "found it"}, starter.Signer{Name: "alice", Key: alice})
	require.NoError(t, err)
	rec, err := s.starter.Review(ctx, st.Key, found)
	require.NoError(t, err)
	require.True(t, rec.Accepted)
	require.Equal(t, "alice", rec.Principal)
	res := s.result(ctx, st.Key)
	require.Equal(t, workflows.StatusDeliveredByReview, res.Status)
	s.requireSound(ctx, res)
	require.Equal(t, 1, s.effects(dest))
	require.Len(t, s.sandbox.Requests(dest), 1)
}
