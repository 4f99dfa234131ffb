package workflows_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"time"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/workflows"
)

// TestSignedBatchJob: where the recorded reviewers have keys, a batch
// job's decision counts only with the job's proof, verified by the
// delivery against itself and its own clock: a proof whose filter leaves
// the delivery out, an expired one, and one delivery's proof sent as a
// job's are recorded and ignored; the job's proof inside its filter
// decides, recorded as alice's, from a signed job.
func (s *TermsSuite) TestSignedBatchJob() {
	_, alice, err := ed25519.GenerateKey(rand.Reader)
	s.Require().NoError(err)
	policy := reviewproof.Policy{Source: "helpdesk's reviewers", Reviewers: []reviewproof.Reviewer{
		{Name: "alice", Key: reviewproof.FormatPublicKey(alice.Public().(ed25519.PublicKey)), Decisions: []string{"retry", "abandon"}},
	}}
	s.acts.Reviewing[lab.DestHelpdesk] = activities.Reviewing{Policy: &policy} // the workers' file lists alice
	s.answer(activities.Outcome{
		Class: contract.ClassUnknown, Error: "lost", Terms: &activities.Terms{Policy: &policy, Contract: &contract.Contract{
			Dedup: contract.DedupNone, Retry: contract.Retry{MaxAttempts: 1, AttemptTimeout: contract.Duration(time.Second), Deadline: contract.Duration(time.Minute)}}},
	}, nil)
	abandon := workflows.ReviewDecision{Decision: "abandon", Reviewer: "Alice A.", Note: "customer cancelled"}
	job := func(id string, f reviewproof.JobFilter, at time.Time) workflows.ReviewDecision {
		d := abandon
		d.BatchJob = id
		d.Proof, err = reviewproof.SignJob(alice, "alice", reviewproof.Job{ID: id, Decision: d.Decision, Note: d.Note, Filter: f}, at, 10*time.Minute)
		s.Require().NoError(err)
		return d
	}
	var filter reviewproof.JobFilter
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.Require().Equal(workflows.StateAwaitingReview, st.State)
		s.Equal("helpdesk's reviewers", st.KeyedReviewers)
		now := s.env.Now()
		filter = reviewproof.JobFilter{Destination: st.Operation.Destination, Tenant: st.Operation.Tenant, Operation: st.Operation.Operation, ParkedBefore: now}
		outside := filter
		outside.Operation = "another-operation"
		single := abandon
		single.BatchJob = "job-single"
		single.Proof, err = reviewproof.Sign(alice, "alice", reviewproof.Decision{Key: st.Key, Destination: st.Operation.Destination,
			Parked: st.Review.Requested, Decision: abandon.Decision, Note: abandon.Note}, now, 10*time.Minute)
		s.Require().NoError(err)
		s.env.SignalWorkflow(workflows.SignalReview, job("job-outside", outside, now))
		s.env.SignalWorkflow(workflows.SignalReview, job("job-expired", filter, now.Add(-time.Hour)))
		s.env.SignalWorkflow(workflows.SignalReview, single)
	}, time.Hour)
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.Equal(workflows.StateAwaitingReview, st.State, "nothing was decided")
		s.Require().Len(st.Review.Decisions, 3)
		for i, says := range []string{
			`proof: outside the signed job's filter: this delivery's operation "` + st.Operation.Operation + `", not "another-operation"`,
			"proof: proof expired",
			`proof: wrong audience: aud "courier-review", not "courier-review-job"`,
		} {
			s.False(st.Review.Decisions[i].Accepted)
			s.Contains(st.Review.Decisions[i].Reason, says)
		}
		s.env.SignalWorkflow(workflows.SignalReview, job("job-good", filter, s.env.Now()))
	}, 2*time.Hour)
	res := s.run()
	s.Equal(workflows.StatusAbandoned, res.Status)
	rec := res.Review.Decisions[len(res.Review.Decisions)-1]
	s.True(rec.Accepted)
	s.True(rec.SignedJob)
	s.Equal("alice", rec.Principal)
	s.Equal("helpdesk's reviewers: alice may retry, abandon", rec.Policy)
	s.Contains(res.Error, "abandoned by alice (verified)")
}
