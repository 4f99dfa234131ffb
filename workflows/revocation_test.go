package workflows_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"slices"
	"time"

	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/workflows"
)

// TestRevokedKey: a delivery recorded alice's and bob's keys, and the
// workers' file has since dropped bob's and narrowed alice to abandon. A
// decision bob signed verifies against the recorded keys but is refused,
// by signal and by update (past its validator), naming the reviewer and
// the destination; alice's retry is refused as no longer allowed; her
// abandon decides.
func (s *TermsSuite) TestRevokedKey() {
	key := func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		s.Require().NoError(err)
		return k
	}
	alice, bob := key(), key()
	pub := func(k ed25519.PrivateKey) string { return reviewproof.FormatPublicKey(k.Public().(ed25519.PublicKey)) }
	recorded := reviewproof.Policy{Source: "helpdesk's reviewers", Reviewers: []reviewproof.Reviewer{
		{Name: "alice", Key: pub(alice), Decisions: []string{"retry", "abandon"}},
		{Name: "bob", Key: pub(bob), Decisions: []string{"abandon"}},
	}}
	current := reviewproof.Policy{Source: "helpdesk's reviewers", Reviewers: []reviewproof.Reviewer{
		{Name: "alice", Key: pub(alice), Decisions: []string{"abandon"}},
	}}
	s.acts.Reviewing[lab.DestHelpdesk] = activities.Reviewing{Policy: &current}
	s.answer(activities.Outcome{
		Class: contract.ClassUnknown, Error: "lost", Terms: &activities.Terms{Policy: &recorded, Contract: &contract.Contract{
			Dedup: contract.DedupNone, Retry: contract.Retry{MaxAttempts: 1, AttemptTimeout: contract.Duration(time.Second), Deadline: contract.Duration(time.Minute)}}},
	}, nil)
	signed := func(k ed25519.PrivateKey, name, decision string) workflows.ReviewDecision {
		st := s.status()
		d := workflows.ReviewDecision{Decision: decision, Reviewer: name, Note: "checked"}
		var err error
		d.Proof, err = reviewproof.Sign(k, name, reviewproof.Decision{Key: st.Key, Destination: st.Operation.Destination,
			Parked: st.Review.Requested, Decision: decision, Note: d.Note}, s.env.Now(), 10*time.Minute)
		s.Require().NoError(err)
		return d
	}
	revoked := "key of reviewer bob for destination helpdesk is no longer in the destinations file"
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(workflows.SignalReview, signed(bob, "bob", "abandon"))
		s.env.UpdateWorkflow(workflows.UpdateReview, "bob", &sdktest.TestUpdateCallback{
			OnReject: func(err error) { s.Fail("the validator cannot read the file: it passes", err) },
			OnAccept: func() {},
			OnComplete: func(_ any, err error) {
				s.ErrorContains(err, revoked, "the handler refuses it and says why")
			},
		}, signed(bob, "bob", "abandon"))
		s.env.SignalWorkflow(workflows.SignalReview, signed(alice, "alice", "retry"))
	}, time.Hour)
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.Equal(workflows.StateAwaitingReview, st.State, "nothing was decided")
		s.Require().Len(st.Review.Decisions, 3)
		// The update's handler and the signals each check their signer by a
		// local activity: they may be recorded in either order.
		var reasons []string
		for _, d := range st.Review.Decisions {
			s.False(d.Accepted)
			reasons = append(reasons, d.Reason)
		}
		slices.Sort(reasons)
		s.Contains(reasons[0], revoked)
		s.Contains(reasons[1], revoked)
		s.Contains(reasons[2], "reviewer alice may no longer decide retry at destination helpdesk: the destinations file now gives helpdesk's reviewers: alice may abandon")
		s.env.SignalWorkflow(workflows.SignalReview, signed(alice, "alice", "abandon"))
	}, 2*time.Hour)
	res := s.run()
	s.Equal(workflows.StatusAbandoned, res.Status)
	s.Contains(res.Error, "abandoned by alice (verified)")
}
