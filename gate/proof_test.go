package gate_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"time"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/lab/wftest"
	"github.com/abde64c9/courier/reviewproof"
)

// signers gives legacy keyed reviewers: alice may pause and resume, bob
// only review; and returns their keys.
func (s *GateSuite) signers() (alice, bob ed25519.PrivateKey) {
	var err error
	_, alice, err = ed25519.GenerateKey(rand.Reader)
	s.Require().NoError(err)
	_, bob, err = ed25519.GenerateKey(rand.Reader)
	s.Require().NoError(err)
	pub := func(k ed25519.PrivateKey) string { return reviewproof.FormatPublicKey(k.Public().(ed25519.PublicKey)) }
	s.acts.Reviewing = map[string]activities.Reviewing{"legacy": {Names: []string{"alice", "bob"}, Policy: &reviewproof.Policy{
		Source: "legacy's reviewers", Reviewers: []reviewproof.Reviewer{
			{Name: "alice", Key: pub(alice), Decisions: []string{"abandon", "pause", "resume"}},
			{Name: "bob", Key: pub(bob), Decisions: reviewproof.Decisions},
		}}}}
	return alice, bob
}

// proof signs change c of the gate as it is now (st), as the CLI does.
func (s *GateSuite) proof(k ed25519.PrivateKey, name string, c reviewproof.GateChange, st gate.DestinationState, at time.Time) string {
	if c.Destination == "" {
		c.Destination = st.Name
	}
	c.State, c.Since = gate.SignedState(st)
	p, err := reviewproof.SignGate(k, name, c, at, 15*time.Minute)
	s.Require().NoError(err)
	return p
}

func (s *GateSuite) refused(name string, arg any, says string) {
	update := gate.UpdatePause
	if _, ok := arg.(gate.ResumeRequest); ok {
		update = gate.UpdateResume
	}
	s.update(update, name, arg, func(_ any, err error) { s.ErrorContains(err, says, name) })
}

// TestSignedPauseAndResume: where the reviewers have keys, a pause or
// resume is refused unless its proof verifies (forged, altered, expired,
// for another destination, by a reviewer not allowed it, replayed after the
// gate moved on), and nothing changes; a verified one is recorded with its
// principal and the rule that allowed it.
func (s *GateSuite) TestSignedPauseAndResume() {
	alice, bob := s.signers()
	_, mallory, _ := ed25519.GenerateKey(rand.Reader)
	fresh := gate.DestinationState{Name: "legacy", State: gate.Closed}
	pause := reviewproof.GateChange{Action: "pause", Reason: "maintenance"}
	var resumeProof string
	s.at(time.Second, func() {
		now := s.env.Now()
		s.refused("unsigned", gate.PauseRequest{Reason: "maintenance", By: "alice"}, "pause refused: proof required")
		s.refused("forged", gate.PauseRequest{Reason: "maintenance", By: "alice", Proof: s.proof(mallory, "alice", pause, fresh, now)}, "bad signature")
		s.refused("altered", gate.PauseRequest{Reason: "mine now", By: "alice", Proof: s.proof(alice, "alice", pause, fresh, now)}, "decision altered after signing: reason")
		s.refused("expired", gate.PauseRequest{Reason: "maintenance", By: "alice", Proof: s.proof(alice, "alice", pause, fresh, now.Add(-20*time.Minute))}, "proof expired")
		other := pause
		other.Destination = "crm"
		s.refused("other destination", gate.PauseRequest{Reason: "maintenance", By: "alice", Proof: s.proof(alice, "alice", other, fresh, now)}, "signed for another destination")
		s.refused("not allowed", gate.PauseRequest{Reason: "maintenance", By: "bob", Proof: s.proof(bob, "bob", pause, fresh, now)}, "decision not allowed: legacy's reviewers: bob may retry")
	})
	s.at(2*time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State, "nothing refused changed the gate")
		s.Empty(st.Transitions)
		s.True(st.Signed)
		s.Contains(wftest.CurrentDetails(s.T(), s.env), "--key <YOUR-KEY-FILE>")
		s.update(gate.UpdatePause, "signed", gate.PauseRequest{Reason: "maintenance", By: "typed", Proof: s.proof(alice, "alice", pause, st, s.env.Now())},
			func(_ any, err error) { s.NoError(err) })
	})
	s.at(3*time.Second, func() {
		st := s.state()
		s.Equal(gate.Paused, st.State)
		s.Equal("alice", st.Paused.By, "the verified principal, not the typed name")
		t := st.Transitions[0]
		s.Equal("alice", t.Principal)
		s.Equal("legacy's reviewers: alice may abandon, pause, resume", t.Policy)
		s.Contains(wftest.CurrentDetails(s.T(), s.env), "→ paused by `alice` (signed): maintenance")
		resume := reviewproof.GateChange{Action: "resume", Reason: "done"}
		resumeProof = s.proof(alice, "alice", resume, st, s.env.Now())
		s.refused("resume not allowed", gate.ResumeRequest{By: "bob", Note: "done", Proof: s.proof(bob, "bob", resume, st, s.env.Now())}, "decision not allowed")
	})
	s.at(3*time.Second+500*time.Millisecond, func() {
		s.update(gate.UpdateResume, "resume", gate.ResumeRequest{By: "alice", Note: "done", Proof: resumeProof}, func(_ any, err error) { s.NoError(err) })
	})
	s.at(4*time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State)
		s.update(gate.UpdatePause, "again", gate.PauseRequest{Reason: "maintenance", By: "alice", Proof: s.proof(alice, "alice", pause, st, s.env.Now())},
			func(_ any, err error) { s.NoError(err) })
	})
	s.at(5*time.Second, func() {
		s.refused("replayed", gate.ResumeRequest{By: "alice", Note: "done", Proof: resumeProof}, "signed for another state of the gate")
	})
	s.at(6*time.Second, func() {
		st := s.state()
		s.Equal(gate.Paused, st.State, "the replayed resume changed nothing")
		s.Equal([]string{"paused by alice", "closed by alice", "paused by alice"}, path(st))
		s.Equal(1, s.released)
	})
	s.run()
}

// TestSignedResumeOfAStoppedGate: a gate started again from what a stopped
// run held (as Update-with-Start does) verifies a proof signed for that
// state, and refuses an unsigned resume.
func (s *GateSuite) TestSignedResumeOfAStoppedGate() {
	alice, _ := s.signers()
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	held := gate.DestinationState{Name: "legacy", State: gate.Paused, Since: since, Breaker: gate.Breaker{State: gate.Closed},
		Paused:      &gate.Pause{Reason: "outage", By: "alice", Since: since},
		Transitions: []gate.Transition{{At: since, From: gate.Closed, To: gate.Paused, By: "alice", Why: "outage"}}}
	s.at(time.Second, func() {
		s.refused("unsigned", gate.ResumeRequest{By: "alice", Note: "back"}, "proof required")
		p := s.proof(alice, "alice", reviewproof.GateChange{Action: "resume", Reason: "back"}, held, s.env.Now())
		s.update(gate.UpdateResume, "signed", gate.ResumeRequest{By: "alice", Note: "back", Proof: p}, func(_ any, err error) { s.NoError(err) })
	})
	s.at(2*time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State)
		s.Equal("alice", st.Transitions[len(st.Transitions)-1].Principal)
	})
	s.runRecovering(&held)
}
