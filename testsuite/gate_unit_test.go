package testsuite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	sdktest "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/workflows"
)

// GateSuite drives a destination's gate workflow in the test environment:
// the breaker's transitions from reports, the probe, and pause and resume
// with their refusals.
type GateSuite struct {
	suite.Suite
	sdktest.WorkflowTestSuite
	env      *sdktest.TestWorkflowEnvironment
	released int
	notified []activities.GateNotice
}

func TestGate(t *testing.T) { suite.Run(t, new(GateSuite)) }

var testBreaker = &contract.Breaker{Failures: 3, Window: contract.Duration(time.Minute), CoolDown: contract.Duration(30 * time.Second)}

func (s *GateSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	s.env.RegisterWorkflowWithOptions(workflows.Destination, workflow.RegisterOptions{Name: workflows.DestinationWorkflowType})
	s.released, s.notified = 0, nil
	acts := &activities.Activities{}
	s.env.RegisterActivity(acts)
	s.env.OnActivity(acts.ReleaseHeld, mock.Anything, "legacy").Return(func(context.Context, string) error { s.released++; return nil }).Maybe()
	s.env.OnActivity(acts.NotifyGate, mock.Anything, mock.Anything).Return(func(_ context.Context, n activities.GateNotice) error {
		s.notified = append(s.notified, n)
		return nil
	}).Maybe()
}

func (s *GateSuite) at(d time.Duration, fn func()) { s.env.RegisterDelayedCallback(fn, d) }

func (s *GateSuite) report(cl contract.Class, key string) {
	s.env.SignalWorkflow(workflows.SignalReport, workflows.Report{Class: cl, Key: key, Breaker: testBreaker})
}

func (s *GateSuite) state() workflows.DestinationState {
	v, err := s.env.QueryWorkflow(workflows.QueryGate)
	s.Require().NoError(err)
	var st workflows.DestinationState
	s.Require().NoError(v.Get(&st))
	return st
}

func (s *GateSuite) update(name, id string, arg any, check func(any, error)) {
	s.env.UpdateWorkflow(name, id, &sdktest.TestUpdateCallback{
		OnAccept: func() {}, OnReject: func(err error) { check(nil, err) }, OnComplete: check,
	}, arg)
}

func (s *GateSuite) run() {
	s.at(24*time.Hour, s.env.CancelWorkflow)
	s.env.ExecuteWorkflow(workflows.DestinationWorkflowType, workflows.DestinationInput{Name: "legacy"})
	s.Require().True(s.env.IsWorkflowCompleted())
}

// TestBreakerOpensProbesAndCloses: failures within the window open it (the
// notifier is told); before the cool-down no probe is granted; after it one
// is, and only one; the probe's answer closes it and releases the held.
func (s *GateSuite) TestBreakerOpensProbesAndCloses() {
	s.at(time.Second, func() {
		s.report(contract.ClassNotSent, "a")
		s.report(contract.ClassThrottled, "b")
	})
	s.at(2*time.Second, func() {
		s.Equal(workflows.GateClosed, s.state().State, "two failures are under the threshold")
		s.report(contract.ClassServerError, "c")
	})
	s.at(3*time.Second, func() {
		st := s.state()
		s.Equal(workflows.GateOpen, st.State)
		h, probe := st.Hold(st.Breaker.OpenedAt.Add(time.Second))
		s.Require().NotNil(h)
		s.Equal(string(workflows.StateCircuitOpen), h.State)
		s.False(probe, "no probe before the cool-down")
		s.Len(s.notified, 1, "the notifier is told the breaker opened")
		s.update(workflows.UpdateProbe, "early", "d", func(v any, err error) {
			s.NoError(err)
			s.Equal(false, v, "no probe before the cool-down")
		})
	})
	s.at(40*time.Second, func() {
		s.update(workflows.UpdateProbe, "p1", "probe-key", func(v any, err error) { s.NoError(err); s.Equal(true, v) })
		s.update(workflows.UpdateProbe, "p2", "other", func(v any, err error) { s.NoError(err); s.Equal(false, v, "one probe at a time") })
	})
	s.at(41*time.Second, func() {
		s.Equal(workflows.GateHalfOpen, s.state().State)
		s.report(contract.ClassCreated, "late-straggler") // not the probe: changes nothing
	})
	s.at(42*time.Second, func() {
		s.Equal(workflows.GateHalfOpen, s.state().State)
		s.report(contract.ClassCreated, "probe-key")
	})
	s.at(43*time.Second, func() {
		st := s.state()
		s.Equal(workflows.GateClosed, st.State)
		s.Equal(1, s.released, "closing releases the held deliveries")
		var path []string
		for _, t := range st.Transitions {
			path = append(path, t.To)
		}
		s.Equal([]string{workflows.GateOpen, workflows.GateHalfOpen, workflows.GateClosed}, path)
	})
	s.run()
}

// TestFailuresOutsideTheWindowDoNotOpen: failures spread wider than the
// window never add up, and an answer resets the count.
func (s *GateSuite) TestFailuresOutsideTheWindowDoNotOpen() {
	s.at(time.Second, func() { s.report(contract.ClassNotSent, "a"); s.report(contract.ClassNotSent, "b") })
	s.at(2*time.Minute, func() { s.report(contract.ClassNotSent, "c") })
	s.at(2*time.Minute+time.Second, func() {
		s.report(contract.ClassNotSent, "d")
		s.report(contract.ClassCreated, "e")
		s.report(contract.ClassNotSent, "f")
	})
	s.at(3*time.Minute, func() {
		st := s.state()
		s.Equal(workflows.GateClosed, st.State)
		s.Equal(1, st.Breaker.Failures)
		s.Empty(st.Transitions)
	})
	s.run()
}

// TestProbeFailureReopens: a probe that finds it down again opens it for
// another cool-down.
func (s *GateSuite) TestProbeFailureReopens() {
	s.at(time.Second, func() {
		for _, k := range []string{"a", "b", "c"} {
			s.report(contract.ClassNotSent, k)
		}
	})
	s.at(time.Minute, func() {
		s.update(workflows.UpdateProbe, "p", "probe", func(v any, err error) { s.NoError(err); s.Equal(true, v) })
	})
	s.at(time.Minute+time.Second, func() { s.report(contract.ClassThrottled, "probe") })
	s.at(time.Minute+2*time.Second, func() {
		st := s.state()
		s.Equal(workflows.GateOpen, st.State)
		s.Equal(st.Breaker.OpenedAt.Add(testBreaker.CoolDown.D()), st.Breaker.ReopensAt())
		s.Zero(s.released)
	})
	s.run()
}

// TestPauseAndResume: a pause needs a reason and who; until must be ahead;
// resume needs a pause; until ends a pause by itself; each transition
// records who and why.
func (s *GateSuite) TestPauseAndResume() {
	s.at(time.Second, func() {
		s.update(workflows.UpdatePause, "bad", workflows.PauseRequest{}, func(_ any, err error) {
			s.ErrorContains(err, "reason: required")
			s.ErrorContains(err, "by: required")
		})
		s.update(workflows.UpdateResume, "early", workflows.ResumeRequest{By: "alice"}, func(_ any, err error) {
			s.ErrorContains(err, "is not paused")
		})
		s.update(workflows.UpdatePause, "past", workflows.PauseRequest{Reason: "x", By: "alice", Until: s.env.Now().Add(-time.Minute)},
			func(_ any, err error) { s.ErrorContains(err, "is not in the future") })
		s.update(workflows.UpdatePause, "ok", workflows.PauseRequest{Reason: "maintenance", By: "alice"}, func(v any, err error) {
			s.Require().NoError(err)
			s.Equal(workflows.GatePaused, v.(workflows.DestinationState).State)
		})
	})
	s.at(time.Minute, func() {
		h, probe := s.state().Hold(s.env.Now())
		s.Require().NotNil(h)
		s.False(probe)
		s.Equal("maintenance (paused by alice)", h.Reason)
		s.update(workflows.UpdateResume, "resume", workflows.ResumeRequest{By: "bob", Note: "done"}, func(_ any, err error) { s.NoError(err) })
	})
	s.at(2*time.Minute, func() {
		s.Equal(1, s.released)
		s.update(workflows.UpdatePause, "until", workflows.PauseRequest{Reason: "window", By: "alice", Until: s.env.Now().Add(time.Hour)},
			func(_ any, err error) { s.NoError(err) })
	})
	s.at(2*time.Minute+time.Hour+time.Second, func() {
		st := s.state()
		s.Equal(workflows.GateClosed, st.State, "until ended the pause")
		s.Equal(2, s.released)
		var by []string
		for _, t := range st.Transitions {
			by = append(by, t.To+" by "+t.By)
		}
		s.Equal([]string{"paused by alice", "closed by bob", "paused by alice", "closed by courier"}, by)
	})
	s.run()
}
