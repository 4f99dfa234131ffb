package gate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	sdktest "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/internal/text"
	"github.com/abde64c9/courier/lab/wftest"
)

// GateSuite drives a destination's gate workflow in the test environment:
// the breaker's transitions from reports, the probe, and pause and resume
// with their refusals. The worker's destinations file gives legacy
// testBreaker, plain no breaker, and alice and bob as reviewers.
type GateSuite struct {
	suite.Suite
	sdktest.WorkflowTestSuite
	env      *sdktest.TestWorkflowEnvironment
	acts     *activities.Activities
	dest     string
	released int
	notified []activities.GateNotice
	// memo is what the gate last wrote to its memo: all Courier reads.
	memo *gate.DestinationState
	// recovered is what activity RecoverGate answers: the state the
	// gate's earlier runs published (nil: none).
	recovered *gate.DestinationState
}

func TestGate(t *testing.T) { suite.Run(t, new(GateSuite)) }

var testBreaker = &contract.Breaker{Failures: 3, Window: contract.Duration(time.Minute), CoolDown: contract.Duration(30 * time.Second)}

// forgedBreaker is what a hand-sent report carries to hold a destination
// for a year.
var forgedBreaker = &contract.Breaker{Failures: 1, Window: contract.Duration(time.Minute), CoolDown: contract.Duration(8760 * time.Hour)}

func (s *GateSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	s.env.RegisterWorkflowWithOptions(gate.Destination, workflow.RegisterOptions{Name: gate.WorkflowType})
	s.released, s.notified, s.dest, s.memo, s.recovered = 0, nil, "legacy", nil, nil
	s.env.RegisterActivityWithOptions(func(context.Context) (*gate.DestinationState, error) { return s.recovered, nil },
		activity.RegisterOptions{Name: gate.ActivityRecover})
	// A Delivery's history records every report but those sent by hand
	// (key by-hand-*), and an attempt under way for every probe asked but
	// those asked by hand (key forged-*).
	s.env.RegisterActivityWithOptions(func(_ context.Context, r gate.Report) (string, error) {
		if strings.HasPrefix(r.Key, "by-hand") {
			return "the delivery scheduled no such attempt", nil
		}
		return "", nil
	}, activity.RegisterOptions{Name: gate.ActivityVerifyReport})
	s.env.RegisterActivityWithOptions(func(_ context.Context, key string) (string, error) {
		if strings.HasPrefix(key, "forged") {
			return "no delivery of key " + key, nil
		}
		return "", nil
	}, activity.RegisterOptions{Name: gate.ActivityVerifyProbe})
	s.env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		// Through the converter, as a reader decodes it.
		p, err := converter.GetDefaultDataConverter().ToPayload(args.Get(0).(map[string]any)[gate.Memo])
		s.Require().NoError(err)
		s.memo = &gate.DestinationState{}
		s.Require().NoError(converter.GetDefaultDataConverter().FromPayload(p, s.memo))
	}).Return(nil).Maybe()
	s.acts = &activities.Activities{
		Contracts: map[string]contract.Contract{"legacy": {Breaker: testBreaker}, "plain": {}},
		Reviewers: []string{"alice", "bob"},
	}
	acts := s.acts
	s.env.RegisterActivity(acts)
	s.env.OnActivity(acts.ReleaseHeld, mock.Anything, mock.Anything).Return(func(context.Context, string) error { s.released++; return nil }).Maybe()
	s.env.OnActivity(acts.NotifyGate, mock.Anything, mock.Anything).Return(func(_ context.Context, n activities.GateNotice) error {
		s.notified = append(s.notified, n)
		return nil
	}).Maybe()
}

func (s *GateSuite) at(d time.Duration, fn func()) { s.env.RegisterDelayedCallback(fn, d) }

func (s *GateSuite) report(cl contract.Class, key string) {
	s.env.SignalWorkflow(gate.SignalReport, gate.Report{Class: cl, Key: key})
}

// forge sends a report as anyone can, by hand, with a breaker of its own.
func (s *GateSuite) forge(cl contract.Class, key string) {
	s.env.SignalWorkflow(gate.SignalReport, gate.Report{Class: cl, Key: key, Error: "forged", Breaker: forgedBreaker})
}

// state is the gate as its memo holds it, which answers as its query does.
func (s *GateSuite) state() gate.DestinationState {
	v, err := s.env.QueryWorkflow(gate.QueryState)
	s.Require().NoError(err)
	var st gate.DestinationState
	s.Require().NoError(v.Get(&st))
	s.Require().NotNil(s.memo, "the gate published its memo")
	s.Require().Equal(st, *s.memo, "the memo answers as the query")
	return *s.memo
}

func (s *GateSuite) update(name, id string, arg any, check func(any, error)) {
	s.env.UpdateWorkflow(name, id, &sdktest.TestUpdateCallback{
		OnAccept: func() {}, OnReject: func(err error) { check(nil, err) }, OnComplete: check,
	}, arg)
}

func (s *GateSuite) run() { s.start(gate.DestinationInput{Name: s.dest}) }

// runFrom runs the gate from the state a previous run of it carried over
// by continuing as new.
func (s *GateSuite) runFrom(st *gate.DestinationState) {
	s.env.SetContinuedExecutionRunID("its-previous-run")
	s.start(gate.DestinationInput{Name: s.dest, State: st})
}

// runRecovering runs a gate started afresh (by an operator, a worker's
// report or by hand) whose earlier runs last published st.
func (s *GateSuite) runRecovering(st *gate.DestinationState) {
	s.recovered = st
	s.run()
}

// start runs the gate as destination-<dest> until it is cancelled a day on.
func (s *GateSuite) start(in gate.DestinationInput) {
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: gate.WorkflowID(s.dest)})
	s.at(24*time.Hour, s.env.CancelWorkflow)
	s.env.ExecuteWorkflow(gate.WorkflowType, in)
	s.Require().True(s.env.IsWorkflowCompleted())
	s.True(temporal.IsCanceledError(s.env.GetWorkflowError()), "the gate ran until cancelled: %v", s.env.GetWorkflowError())
}

// path is the states the gate went through, each with who moved it.
func path(st gate.DestinationState) []string {
	var p []string
	for _, t := range st.Transitions {
		p = append(p, t.To+" by "+t.By)
	}
	return p
}

// TestPauseAndResume: a pause needs a reason and who; until must be ahead;
// resume needs a pause; until ends a pause by itself; each transition
// records who and why.
func (s *GateSuite) TestPauseAndResume() {
	s.at(time.Second, func() {
		s.update(gate.UpdatePause, "bad", gate.PauseRequest{}, func(_ any, err error) {
			s.ErrorContains(err, "reason: required")
			s.ErrorContains(err, "by: required")
		})
		s.update(gate.UpdateResume, "early", gate.ResumeRequest{By: "alice"}, func(_ any, err error) {
			s.ErrorContains(err, "is not paused")
		})
		s.update(gate.UpdatePause, "past", gate.PauseRequest{Reason: "x", By: "alice", Until: s.env.Now().Add(-time.Minute)},
			func(_ any, err error) { s.ErrorContains(err, "is not in the future") })
		s.update(gate.UpdatePause, "ok", gate.PauseRequest{Reason: "maintenance", By: "alice"}, func(v any, err error) {
			s.Require().NoError(err)
			s.Equal(gate.Paused, v.(gate.DestinationState).State)
		})
	})
	s.at(time.Minute, func() {
		h, probe := s.state().Hold(s.env.Now())
		s.Require().NotNil(h)
		s.False(probe)
		s.Equal("maintenance (paused by alice)", h.Reason)
		s.update(gate.UpdateResume, "resume", gate.ResumeRequest{By: "bob", Note: "done"}, func(_ any, err error) { s.NoError(err) })
	})
	s.at(2*time.Minute, func() {
		s.Equal(1, s.released)
		s.update(gate.UpdatePause, "until", gate.PauseRequest{Reason: "window", By: "alice", Until: s.env.Now().Add(time.Hour)},
			func(_ any, err error) { s.NoError(err) })
	})
	s.at(2*time.Minute+time.Hour+time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State, "until ended the pause")
		s.Equal(2, s.released)
		s.Equal([]string{"paused by alice", "closed by bob", "paused by alice", "closed by courier"}, path(st))
	})
	s.run()
}

// TestDetailsFollowTheGate: the web UI's current details are set from the
// start and follow each change: a pause names its reason, who and until,
// and how to resume; after the resume they say how to pause again.
func (s *GateSuite) TestDetailsFollowTheGate() {
	var until, resumed time.Time
	s.at(time.Second, func() {
		d := wftest.CurrentDetails(s.T(), s.env)
		s.True(strings.HasPrefix(d, "**closed**: attempts go to legacy"), d)
		s.Contains(d, "courier destination pause legacy \\\n")
		until = s.env.Now().Add(time.Hour)
		s.update(gate.UpdatePause, "p", gate.PauseRequest{Reason: "[INC-7](http://x)", By: "alice", Until: until},
			func(_ any, err error) { s.NoError(err) })
	})
	s.at(2*time.Second, func() {
		d := wftest.CurrentDetails(s.T(), s.env)
		s.True(strings.HasPrefix(d, "**paused**: \\[INC-7\\](http://x) · by `alice` since "), d)
		s.Contains(d, ", until "+text.UTC(until)+"; no attempt is sent to legacy")
		s.Contains(d, "courier destination resume legacy \\\n  --by <YOUR-NAME> \\\n")
		resumed = s.env.Now()
		s.update(gate.UpdateResume, "r", gate.ResumeRequest{By: "bob", Note: "done"}, func(_ any, err error) { s.NoError(err) })
	})
	s.at(time.Minute, func() {
		d := wftest.CurrentDetails(s.T(), s.env)
		s.True(strings.HasPrefix(d, "**closed**: attempts go to legacy · by `bob` since "+text.UTC(resumed)+": resumed: done"), d)
		s.Contains(d, "- "+text.UTC(resumed)+": paused → closed by `bob`: resumed: done")
		s.Contains(d, "courier destination pause legacy")
	})
	s.run()
}

// TestPauseByUnlistedNameIsRefused: with reviewers listed, a pause or resume
// by anyone else is refused and changes nothing.
func (s *GateSuite) TestPauseByUnlistedNameIsRefused() {
	s.at(time.Second, func() {
		s.update(gate.UpdatePause, "mallory", gate.PauseRequest{Reason: "mine", By: "mallory"}, func(_ any, err error) {
			s.ErrorContains(err, `by: "mallory" may not pause destinations; allowed: alice, bob`)
		})
	})
	s.at(2*time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State)
		s.Nil(st.Paused)
		s.Empty(st.Transitions)
		s.update(gate.UpdatePause, "alice", gate.PauseRequest{Reason: "maintenance", By: "alice"}, func(_ any, err error) { s.NoError(err) })
	})
	s.at(3*time.Second, func() {
		s.update(gate.UpdateResume, "mallory-resume", gate.ResumeRequest{By: "mallory"}, func(_ any, err error) {
			s.ErrorContains(err, `by: "mallory" may not resume destinations`)
		})
	})
	s.at(4*time.Second, func() {
		st := s.state()
		s.Equal(gate.Paused, st.State, "still paused")
		s.Equal("alice", st.Paused.By)
		s.Zero(s.released)
	})
	s.run()
}

// TestAnyoneOperatesWithoutReviewers: with no reviewers listed, anyone may
// pause and resume, as anyone may review.
func (s *GateSuite) TestAnyoneOperatesWithoutReviewers() {
	s.acts.Reviewers = nil
	s.at(time.Second, func() {
		s.update(gate.UpdatePause, "p", gate.PauseRequest{Reason: "x", By: "carol"}, func(_ any, err error) { s.NoError(err) })
	})
	s.at(2*time.Second, func() {
		s.update(gate.UpdateResume, "r", gate.ResumeRequest{By: "dave"}, func(_ any, err error) { s.NoError(err) })
	})
	s.at(3*time.Second, func() {
		s.Equal([]string{"paused by carol", "closed by dave"}, path(s.state()))
	})
	s.run()
}

// TestResumeClosesTheBreaker: resume by an allowed name closes an open
// breaker, recorded as theirs, and releases the held deliveries; with the
// breaker closed and no pause there is nothing to resume.
func (s *GateSuite) TestResumeClosesTheBreaker() {
	s.at(time.Second, func() {
		s.update(gate.UpdateResume, "early", gate.ResumeRequest{By: "alice"}, func(_ any, err error) {
			s.ErrorContains(err, "is not paused and its breaker is closed")
		})
		for _, k := range []string{"a", "b", "c"} {
			s.report(contract.ClassNotSent, k)
		}
	})
	s.at(2*time.Second, func() {
		s.Equal(gate.Open, s.state().State)
		s.update(gate.UpdateResume, "close", gate.ResumeRequest{By: "bob", Note: "partner confirmed"}, func(v any, err error) {
			s.Require().NoError(err)
			s.Equal(gate.Closed, v.(gate.DestinationState).State)
		})
	})
	s.at(3*time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State)
		s.Equal(gate.Closed, st.Breaker.State)
		s.Zero(st.Breaker.Failures)
		s.Equal(1, s.released)
		last := st.Transitions[len(st.Transitions)-1]
		s.Equal("bob", last.By)
		s.Equal("resumed, breaker closed: partner confirmed", last.Why)
		// Paused over an open breaker: resume closes both.
		for _, k := range []string{"d", "e", "f"} {
			s.report(contract.ClassNotSent, k)
		}
	})
	s.at(3*time.Second+500*time.Millisecond, func() {
		s.update(gate.UpdatePause, "pause", gate.PauseRequest{Reason: "outage", By: "alice"}, func(_ any, err error) { s.NoError(err) })
	})
	s.at(4*time.Second, func() {
		st := s.state()
		s.Equal(gate.Paused, st.State)
		s.Equal(gate.Open, st.Breaker.State)
		s.update(gate.UpdateResume, "both", gate.ResumeRequest{By: "alice", Note: "back"}, func(_ any, err error) { s.NoError(err) })
	})
	s.at(5*time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State)
		s.Equal(gate.Closed, st.Breaker.State)
		s.Equal([]string{"open by breaker", "closed by bob", "open by breaker", "paused by alice", "closed by alice"}, path(st))
		s.Equal(2, s.released)
	})
	s.run()
}

// TestStoppedGateStartsAgainPaused: a gate started again from what a
// stopped run held (as pause and resume of a stopped gate start it) is
// paused from its first moment; its reviewers' check applies, and a
// reviewer's resume closes it and releases the held deliveries.
func (s *GateSuite) TestStoppedGateStartsAgainPaused() {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	held := &gate.DestinationState{Name: s.dest, State: gate.Paused, Since: since,
		Paused:      &gate.Pause{Reason: "INC-7", By: "alice", Since: since},
		Breaker:     gate.Breaker{State: gate.Closed},
		Transitions: []gate.Transition{{At: since, From: gate.Closed, To: gate.Paused, By: "alice", Why: "INC-7"}}}
	s.at(time.Second, func() {
		h, probe := s.state().Hold(s.env.Now())
		s.Require().NotNil(h)
		s.False(probe)
		s.Equal("INC-7 (paused by alice)", h.Reason, "running again: no longer stopped")
		s.update(gate.UpdateResume, "mallory", gate.ResumeRequest{By: "mallory"}, func(_ any, err error) {
			s.ErrorContains(err, `by: "mallory" may not resume destinations`)
		})
	})
	s.at(2*time.Second, func() {
		s.Equal(gate.Paused, s.state().State)
		s.Zero(s.released)
		s.update(gate.UpdateResume, "bob", gate.ResumeRequest{By: "bob", Note: "gate back"}, func(_ any, err error) { s.NoError(err) })
	})
	s.at(3*time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State)
		s.Equal(1, s.released)
		s.Equal([]string{"paused by alice", "closed by bob"}, path(st))
	})
	s.runRecovering(held)
}

// TestHandStartedInputHoldsNothing: a run started with a paused state in
// its input, not continued from one of the gate's runs, takes its state
// from what the gate's earlier runs published (none here): closed, with
// none of the input's transitions, its memo naming this run.
func (s *GateSuite) TestHandStartedInputHoldsNothing() {
	since := s.env.Now().Add(-time.Hour)
	forged := &gate.DestinationState{Name: s.dest, State: gate.Paused, Since: since, Breaker: gate.Breaker{State: gate.Closed},
		Paused:      &gate.Pause{Reason: "mine now", By: "alice", Since: since},
		Transitions: []gate.Transition{{At: since, From: gate.Closed, To: gate.Paused, By: "alice", Why: "mine now", Principal: "alice"}}}
	s.at(time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State)
		s.Nil(st.Paused)
		s.Empty(st.Transitions)
		s.NotEmpty(st.Run, "the memo names the run that published it")
		s.NotContains(wftest.CurrentDetails(s.T(), s.env), "(signed)")
	})
	s.start(gate.DestinationInput{Name: s.dest, State: forged})
}

// TestWrongNameRefuses: a gate whose name is not the one its workflow ID
// carries fails at once with the reason, having published nothing.
func (s *GateSuite) TestWrongNameRefuses() {
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: gate.WorkflowID("gm")})
	s.env.ExecuteWorkflow(gate.WorkflowType, gate.DestinationInput{Name: "legacy"})
	s.Require().True(s.env.IsWorkflowCompleted())
	var app *temporal.ApplicationError
	s.Require().ErrorAs(s.env.GetWorkflowError(), &app)
	s.Equal(gate.ErrWrongName, app.Type())
	s.Contains(app.Message(), `its name "legacy" is not the one its workflow ID destination-gm carries`)
	s.Nil(s.memo, "it published nothing")
}
