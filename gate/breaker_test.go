package gate_test

import (
	"time"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/workflows"
)

// The breaker's part of GateSuite: reports open and close it, the probe,
// and what a forged report cannot do.

// TestBreakerOpensProbesAndCloses: failures within the window open it (the
// notifier is told); before the cool-down no probe is granted; after it one
// is, and only one; the probe's answer closes it and releases the held.
func (s *GateSuite) TestBreakerOpensProbesAndCloses() {
	s.at(time.Second, func() {
		s.report(contract.ClassNotSent, "a")
		s.report(contract.ClassThrottled, "b")
	})
	s.at(2*time.Second, func() {
		s.Equal(gate.Closed, s.state().State, "two failures are under the threshold")
		s.report(contract.ClassServerError, "c")
	})
	s.at(3*time.Second, func() {
		st := s.state()
		s.Equal(gate.Open, st.State)
		h, probe := st.Hold(st.Breaker.OpenedAt.Add(time.Second))
		s.Require().NotNil(h)
		s.Equal(string(workflows.StateCircuitOpen), h.State)
		s.False(probe, "no probe before the cool-down")
		s.Len(s.notified, 1, "the notifier is told the breaker opened")
		s.update(gate.UpdateProbe, "early", "d", func(v any, err error) {
			s.NoError(err)
			s.Equal(false, v, "no probe before the cool-down")
		})
	})
	s.at(40*time.Second, func() {
		s.update(gate.UpdateProbe, "p1", "probe-key", func(v any, err error) { s.NoError(err); s.Equal(true, v) })
	})
	s.at(40*time.Second+500*time.Millisecond, func() {
		s.update(gate.UpdateProbe, "p2", "other", func(v any, err error) { s.NoError(err); s.Equal(false, v, "one probe at a time") })
	})
	s.at(41*time.Second, func() {
		s.Equal(gate.HalfOpen, s.state().State)
		s.report(contract.ClassCreated, "late-straggler") // not the probe: changes nothing
	})
	s.at(42*time.Second, func() {
		s.Equal(gate.HalfOpen, s.state().State)
		s.report(contract.ClassCreated, "probe-key")
	})
	s.at(43*time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State)
		s.Equal(1, s.released, "closing releases the held deliveries")
		var path []string
		for _, t := range st.Transitions {
			path = append(path, t.To)
		}
		s.Equal([]string{gate.Open, gate.HalfOpen, gate.Closed}, path)
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
		s.Equal(gate.Closed, st.State)
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
		s.update(gate.UpdateProbe, "p", "probe", func(v any, err error) { s.NoError(err); s.Equal(true, v) })
	})
	s.at(time.Minute+time.Second, func() { s.report(contract.ClassThrottled, "probe") })
	s.at(time.Minute+2*time.Second, func() {
		st := s.state()
		s.Equal(gate.Open, st.State)
		s.Equal(st.Breaker.OpenedAt.Add(testBreaker.CoolDown.D()), st.Breaker.ReopensAt())
		s.Zero(s.released)
	})
	s.run()
}

// TestForgedReportOpensNothing: reports sent by hand with a breaker of one
// failure and a year's cool-down, at a destination the destinations file
// gives no breaker, leave it closed: nothing is held, no one is told.
func (s *GateSuite) TestForgedReportOpensNothing() {
	s.dest = "plain"
	s.at(time.Second, func() {
		s.forge(contract.ClassNotSent, "a")
		s.forge(contract.ClassServerError, "b")
	})
	s.at(2*time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State)
		s.Zero(st.Breaker.Failures)
		s.Nil(st.Breaker.Config)
		s.Empty(st.Transitions)
		s.Require().Len(st.Recent, 2, "what was reported is shown")
		s.Nil(st.Recent[0].Breaker, "but not the breaker it carried")
		h, probe := st.Hold(s.env.Now())
		s.Nil(h)
		s.False(probe)
		s.Empty(s.notified)
	})
	s.run()
}

// TestForgedBreakerIsIgnored: at a destination with a breaker, a report's
// own breaker changes neither the threshold nor the cool-down.
func (s *GateSuite) TestForgedBreakerIsIgnored() {
	s.at(time.Second, func() { s.forge(contract.ClassNotSent, "a") })
	s.at(2*time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State, "one failure is under the configured threshold")
		s.Equal(1, st.Breaker.Failures)
		s.Equal(testBreaker, st.Breaker.Config)
		s.forge(contract.ClassNotSent, "b")
		s.forge(contract.ClassNotSent, "c")
	})
	s.at(3*time.Second, func() {
		st := s.state()
		s.Equal(gate.Open, st.State, "the configured threshold opens it")
		s.Equal(st.Breaker.OpenedAt.Add(testBreaker.CoolDown.D()), st.Breaker.ReopensAt(), "the configured cool-down")
	})
	s.run()
}

// TestReportsCountOnlyFromDeliveries: reports that would open the breaker,
// or close it once open, count only when their Delivery recorded them; a
// probe is granted only to a delivery with an attempt under way. Hand-sent
// ones change nothing: three failures open nothing, a created report
// closes nothing, a hand-asked probe is refused.
func (s *GateSuite) TestReportsCountOnlyFromDeliveries() {
	s.at(time.Second, func() {
		for _, key := range []string{"by-hand-1", "by-hand-2", "by-hand-3"} {
			s.report(contract.ClassNotSent, key)
		}
	})
	s.at(2*time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State, "the failure that would open it is not its delivery's")
		s.Equal(2, st.Breaker.Failures, "failures under the threshold are counted as told")
		for _, key := range []string{"a", "b", "c"} {
			s.report(contract.ClassNotSent, key)
		}
	})
	s.at(3*time.Second, func() {
		s.Equal(gate.Open, s.state().State)
		s.report(contract.ClassCreated, "by-hand-4")
	})
	s.at(4*time.Second, func() {
		s.Equal(gate.Open, s.state().State, "a created report sent by hand closes nothing")
		s.Zero(s.released)
	})
	s.at(40*time.Second, func() {
		s.update(gate.UpdateProbe, "forged", "forged-probe", func(v any, err error) { s.NoError(err); s.Equal(false, v) })
	})
	s.at(41*time.Second, func() {
		s.Equal(gate.Open, s.state().State, "a hand-asked probe is not granted")
		s.update(gate.UpdateProbe, "real", "d", func(v any, err error) { s.NoError(err); s.Equal(true, v) })
	})
	s.at(42*time.Second, func() { s.Equal(gate.HalfOpen, s.state().State) })
	s.run()
}

// TestCarriedForgedBreakerCloses: a run that continues one whose breaker a
// report opened, at a destination that has none, starts closed and
// releases what was held.
func (s *GateSuite) TestCarriedForgedBreakerCloses() {
	s.dest = "plain"
	opened := s.env.Now().Add(-time.Hour)
	carried := &gate.DestinationState{Name: "plain", State: gate.Open, Since: opened,
		Breaker: gate.Breaker{State: gate.Open, Failures: 1, OpenedAt: opened, Config: forgedBreaker}}
	s.at(time.Second, func() {
		st := s.state()
		s.Equal(gate.Closed, st.State)
		s.Nil(st.Breaker.Config)
		s.Equal([]string{"closed by breaker"}, path(st))
		s.Equal(1, s.released)
	})
	s.runFrom(carried)
}
