package testsuite

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/wftest"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// envSuite is the ground of the suites that run one delivery per test in
// the Temporal test workflow environment: a fresh environment and fresh
// real destinations for each test.
type envSuite struct {
	suite.Suite
	sdktest.WorkflowTestSuite
	dest *Env
	env  *sdktest.TestWorkflowEnvironment
}

func (s *envSuite) SetupTest() {
	var err error
	s.dest, err = NewEnv(s.T().TempDir())
	s.Require().NoError(err)
	s.env = s.NewTestWorkflowEnvironment()
}

func (s *envSuite) TearDownTest() {
	s.env.AssertExpectations(s.T())
	s.dest.Close()
}

// execute runs the delivery of in to its end and returns its result.
func (s *envSuite) execute(in workflows.DeliveryInput) workflows.DeliveryResult {
	return wftest.Execute(s.T(), s.env, in)
}

// metadata is what the web UI reads of the delivery: its current details
// and its handlers' descriptions.
func (s *envSuite) metadata() *sdkpb.WorkflowMetadata {
	v, err := s.env.QueryWorkflow("__temporal_workflow_metadata")
	s.Require().NoError(err)
	var meta sdkpb.WorkflowMetadata
	s.Require().NoError(v.Get(&meta))
	return &meta
}

func (s *envSuite) status() workflows.DeliveryStatus {
	st, err := wftest.QueryStatus(s.env)
	s.Require().NoError(err)
	return st
}

// ReviewSuite drives the review paths with signals and updates sent from
// delayed callbacks, against a real lost response at the legacy (no keys)
// destination.
type ReviewSuite struct {
	envSuite
	id string
}

func TestReview(t *testing.T) { suite.Run(t, new(ReviewSuite)) }

func (s *ReviewSuite) SetupTest() {
	s.envSuite.SetupTest()
	s.id = "review-" + s.T().Name()
	s.Require().NoError(s.dest.Inject(lab.DestLegacy, closeAfterCommit(1)))
}

func (s *ReviewSuite) start(cfg destinations.Config) workflows.DeliveryResult {
	worker.Register(s.env, cfg, s.dest.Activities)
	in := lab.Input(lab.DestLegacy, s.id, lab.Ticket(s.id, "Move the workshop booking"))
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(opkey.Key(in.Operation))})
	return s.execute(in)
}

func (s *ReviewSuite) at(d time.Duration, fn func()) { s.env.RegisterDelayedCallback(fn, d) }

func (s *ReviewSuite) signal(d workflows.ReviewDecision) {
	s.env.SignalWorkflow(workflows.SignalReview, d)
}

func (s *ReviewSuite) effects() int {
	n, err := s.dest.Effects(lab.DestLegacy, s.id)
	s.Require().NoError(err)
	return n
}

func (s *ReviewSuite) TestQueryWhileParked() {
	s.at(time.Hour, func() {
		st := s.status()
		s.Equal(workflows.StateAwaitingReview, st.State)
		s.Equal(opkey.Key(st.Operation), st.Key)
		s.Len(st.Attempts, 1)
		s.Equal(contract.ClassUnknown, st.Attempts[0].Class)
		s.Require().NotNil(st.Review)
		s.Contains(st.Review.Evidence, `destination "legacy" (dedup none) cannot deduplicate a retry`)
		s.signal(workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops", Note: "checked"})
	})
	res := s.start(s.dest.Config)
	s.Equal(workflows.StatusAbandoned, res.Status)
	s.Equal(1, s.effects())
}

// TestCanceledWhileParked: a cancel request ends a parked delivery as
// canceled, in its result, its status query and its details, and says its
// attempt may have applied.
func (s *ReviewSuite) TestCanceledWhileParked() {
	s.at(time.Hour, func() {
		s.Equal(workflows.StateAwaitingReview, s.status().State)
		s.env.CancelWorkflow()
	})
	res := s.start(s.dest.Config)
	s.Equal(workflows.StatusCanceled, res.Status)
	s.False(res.LeftNoEffect(), "its attempt lost its response")
	s.Contains(res.Error, "may have applied")
	st := s.status()
	s.Equal(workflows.State(workflows.StatusCanceled), st.State)
	s.Contains(s.metadata().GetCurrentDetails(), "**canceled**")
	s.NotContains(s.metadata().GetCurrentDetails(), "courier review")
	s.Equal(1, s.effects())
}

// TestDetailsTellTheStory: the web UI's current details say in their first
// line why the delivery waits, then give the evidence copyable, the
// commands and the update template; they name who decided what, and why a
// decision was ignored; the handlers describe themselves.
func (s *ReviewSuite) TestDetailsTellTheStory() {
	s.at(time.Hour, func() {
		meta := s.metadata()
		d := meta.GetCurrentDetails()
		first, _, _ := strings.Cut(d, "\n")
		s.Equal("**awaiting review**: attempt 1 lost its response after the request was (or may have been) written; "+
			"legacy (dedup none) cannot tell whether it applied: check the destination", first)
		s.Contains(d, "```\nattempt 1: unknown_outcome (", "the evidence is a code block")
		s.Contains(d, "Send an Update")
		s.Contains(d, "\"resource_id\": \"<ID-YOU-FOUND>\",\n  \"reviewer\": \"<YOUR-NAME>\",")
		s.Contains(d, "dedup none · 3 attempts within 1m0s")
		s.Contains(d, "/workflows?query="+url.QueryEscape(`CourierBusinessID="`+s.id+`"`))
		described := map[string]string{}
		for _, h := range meta.GetDefinition().GetUpdateDefinitions() {
			described["update "+h.GetName()] = h.GetDescription()
		}
		for _, h := range meta.GetDefinition().GetSignalDefinitions() {
			described["signal "+h.GetName()] = h.GetDescription()
		}
		for _, h := range meta.GetDefinition().GetQueryDefinitions() {
			described["query "+h.GetName()] = h.GetDescription()
		}
		s.Contains(described["update review"], `{"decision": "retry|delivered|abandon"`)
		s.Contains(described["signal review"], "Prefer the review update")
		s.Contains(described["query status"], "every attempt")
		s.signal(workflows.ReviewDecision{Decision: "delivered", Reviewer: "ops"}) // no resource_id: ignored
	})
	s.at(2*time.Hour, func() {
		d := s.metadata().GetCurrentDetails()
		s.Contains(d, "Ignored 1 decision(s); the last (via signal): `resource_id: required with decision delivered")
		s.signal(workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops", Note: "found nothing to match"})
	})
	res := s.start(s.dest.Config)
	s.Equal(workflows.StatusAbandoned, res.Status)
	first, _, _ := strings.Cut(s.metadata().GetCurrentDetails(), "\n")
	s.Equal("**abandoned**: decided by `ops`: `found nothing to match`", first)
}

func (s *ReviewSuite) TestDelivered() {
	s.at(time.Hour, func() {
		recs, err := s.dest.Sandbox.Records("legacy")
		s.Require().NoError(err)
		s.Require().Len(recs, 1)
		s.signal(workflows.ReviewDecision{Decision: "delivered", Reviewer: "ops", Note: "found it", ResourceID: recs[0].TicketID})
	})
	res := s.start(s.dest.Config)
	s.Equal(workflows.StatusDeliveredByReview, res.Status)
	s.Require().NotNil(res.Receipt)
	s.Equal("ticket-1", res.Receipt.ResourceID)
	s.Require().NotNil(res.Review)
	s.Require().Len(res.Review.Decisions, 1)
	s.Equal("ops", res.Review.Decisions[0].Reviewer, "the audit trail names the reviewer")
	s.Equal(1, s.effects())
}

func (s *ReviewSuite) TestRetryMakesOneMoreAttempt() {
	s.at(time.Hour, func() {
		s.signal(workflows.ReviewDecision{Decision: "retry", Reviewer: "ops", Note: "not there"})
	})
	res := s.start(s.dest.Config)
	s.Equal(workflows.StatusCreated, res.Status)
	s.Len(res.Attempts, 2)
	// The reviewer was wrong on purpose here: the effect did exist. A retry
	// is a human's call, and the count shows what it cost.
	s.Equal(2, s.effects())
}

// TestInvalidSignalsAreIgnored: bad decisions are recorded and never end the
// delivery; the valid one after them does.
func (s *ReviewSuite) TestInvalidSignalsAreIgnored() {
	s.at(time.Hour, func() {
		s.signal(workflows.ReviewDecision{Decision: "maybe", Reviewer: "ops"})
		s.signal(workflows.ReviewDecision{Decision: "delivered", Reviewer: "ops"})
		s.signal(workflows.ReviewDecision{Decision: "abandon"})
		s.env.SignalWorkflow(workflows.SignalReview, "not an object")
	})
	s.at(2*time.Hour, func() {
		st := s.status()
		s.Equal(workflows.StateAwaitingReview, st.State, "still waiting after four bad decisions")
		s.Require().Len(st.Review.Decisions, 4)
		for _, d := range st.Review.Decisions {
			s.False(d.Accepted)
		}
		s.Contains(st.Review.Decisions[0].Reason, `decision: "maybe" unknown`)
		s.Contains(st.Review.Decisions[1].Reason, "resource_id: required")
		s.Contains(st.Review.Decisions[2].Reason, "reviewer: required")
		s.Contains(st.Review.Decisions[3].Reason, "not a review decision")
		s.signal(workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops"})
	})
	res := s.start(s.dest.Config)
	s.Equal(workflows.StatusAbandoned, res.Status)
	s.Len(res.Review.Decisions, 5)
}

// TestUpdateValidator: the update refuses a malformed decision synchronously
// and accepts a good one.
func (s *ReviewSuite) TestUpdateValidator() {
	s.at(time.Hour, func() {
		s.env.UpdateWorkflow(workflows.UpdateReview, "bad", &sdktest.TestUpdateCallback{
			OnReject:   func(err error) { s.ErrorContains(err, "resource_id: required") },
			OnAccept:   func() { s.Fail("a delivered decision without resource_id was accepted") },
			OnComplete: func(any, error) {},
		}, workflows.ReviewDecision{Decision: "delivered", Reviewer: "ops"})
	})
	s.at(2*time.Hour, func() {
		s.env.UpdateWorkflow(workflows.UpdateReview, "good", &sdktest.TestUpdateCallback{
			OnReject:   func(err error) { s.Fail("valid decision rejected", err) },
			OnAccept:   func() {},
			OnComplete: func(any, error) {},
		}, workflows.ReviewDecision{Decision: "delivered", Reviewer: "ops", ResourceID: "ticket-1"})
	})
	res := s.start(s.dest.Config)
	s.Equal(workflows.StatusDeliveredByReview, res.Status)
	s.Len(res.Review.Decisions, 1, "a rejected update leaves no record in history")
}

// TestReminderKeepsWaiting: the review deadline reminds and never decides.
func (s *ReviewSuite) TestReminderKeepsWaiting() {
	cfg := s.dest.Config
	legacy := cfg.Destinations[lab.DestLegacy]
	legacy.Contract.ReviewReminder = contract.Duration(30 * time.Minute)
	cfg.Destinations[lab.DestLegacy] = legacy
	// The first attempt runs under, and records, the worker's contract.
	s.dest.Activities.Contracts[lab.DestLegacy] = legacy.Contract
	var reminded int
	s.dest.Activities.OnReminder = func(activities.Reminder) { reminded++ }
	s.at(100*time.Minute, func() {
		st := s.status()
		s.Equal(workflows.StateAwaitingReview, st.State)
		s.Equal(3, st.Review.Reminders)
		s.signal(workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops"})
	})
	res := s.start(cfg)
	s.Equal(workflows.StatusAbandoned, res.Status)
	s.Equal(1+3, reminded, "one notice when it parked, then one per reminder")
}

// TestDuplicateSignal: the same decision sent twice acts once.
func (s *ReviewSuite) TestDuplicateSignal() {
	s.at(time.Hour, func() {
		d := workflows.ReviewDecision{Decision: "retry", Reviewer: "ops"}
		s.signal(d)
		s.signal(d)
	})
	res := s.start(s.dest.Config)
	s.Equal(workflows.StatusCreated, res.Status)
	s.Len(res.Attempts, 2, "one retry, not two")
	s.Require().Len(res.Review.Decisions, 2)
	s.True(res.Review.Decisions[0].Accepted)
	s.False(res.Review.Decisions[1].Accepted)
	s.Contains(res.Review.Decisions[1].Reason, "not awaiting review")
}

// TestBatchJobDecidesOnce: a batch job's decision that arrives again after
// the delivery parked a second time is recognised, counted on the first
// record, and not acted on; another decision still decides.
func (s *ReviewSuite) TestBatchJobDecidesOnce() {
	// The reviewer's retry loses its response too, so the delivery parks again.
	s.Require().NoError(s.dest.Inject(lab.DestLegacy, closeAfterCommit(1)))
	d := workflows.ReviewDecision{Decision: "retry", Reviewer: "ops", Note: "outage over", BatchJob: "review-job-1"}
	s.at(time.Hour, func() { s.signal(d) })
	s.at(2*time.Hour, func() {
		st := s.status()
		s.Equal(workflows.StateAwaitingReview, st.State, "parked again after the retry")
		s.Len(st.Attempts, 2)
		s.signal(d) // the same job again: a batch retried
		s.env.UpdateWorkflow(workflows.UpdateReview, "again", &sdktest.TestUpdateCallback{
			OnReject:   func(err error) { s.Fail("a repeat is answered with the first record", err) },
			OnAccept:   func() {},
			OnComplete: func(v any, err error) { s.NoError(err) },
		}, d)
	})
	s.at(3*time.Hour, func() {
		st := s.status()
		s.Equal(workflows.StateAwaitingReview, st.State, "the repeats did not retry again")
		s.Len(st.Attempts, 2)
		s.Require().Len(st.Review.Decisions, 1)
		s.Equal(2, st.Review.Decisions[0].Repeats)
		s.Equal("review-job-1", st.Review.Decisions[0].BatchJob)
		s.Zero(st.Review.Ignored, "a repeat is not an ignored decision")
		s.signal(workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops", Note: "gave up", BatchJob: "review-job-2"})
	})
	res := s.start(s.dest.Config)
	s.Equal(workflows.StatusAbandoned, res.Status)
	s.Equal(2, res.Review.AcceptedDecisions())
	s.Equal(2, s.effects(), "the first attempt's and the one retry's")
	var repeated int
	for _, e := range res.Events {
		if e.Event == "review_repeated" {
			repeated++
		}
	}
	s.Equal(2, repeated)
	s.Contains(res.Events[len(res.Events)-2].Detail, "(batch job review-job-2)")
}

// TestReviewerAllowList: with reviewers configured, a decision from anyone
// else is refused by the update and ignored as a signal.
func (s *ReviewSuite) TestReviewerAllowList() {
	cfg := s.dest.Config
	cfg.Reviewers = destinations.Plain("alice")
	// The first attempt records the worker's reviewers with its contract.
	s.dest.Activities.Reviewers = cfg.Reviewers.Names()
	s.at(time.Hour, func() {
		s.env.UpdateWorkflow(workflows.UpdateReview, "mallory", &sdktest.TestUpdateCallback{
			OnReject:   func(err error) { s.ErrorContains(err, `reviewer: "mallory" may not review deliveries; allowed: alice`) },
			OnAccept:   func() { s.Fail("a reviewer outside the allow-list was accepted") },
			OnComplete: func(any, error) {},
		}, workflows.ReviewDecision{Decision: "abandon", Reviewer: "mallory"})
		s.signal(workflows.ReviewDecision{Decision: "abandon", Reviewer: "mallory"})
	})
	s.at(2*time.Hour, func() {
		s.Equal(workflows.StateAwaitingReview, s.status().State)
		s.signal(workflows.ReviewDecision{Decision: "abandon", Reviewer: "alice"})
	})
	res := s.start(cfg)
	s.Equal(workflows.StatusAbandoned, res.Status)
	s.Require().Len(res.Review.Decisions, 2)
	s.False(res.Review.Decisions[0].Accepted)
	s.Equal("alice", res.Review.Decisions[1].Reviewer)
}

// TestHandMadeWorkflowID: a start under an ID that is not the operation's
// is refused before any effect.
func TestHandMadeWorkflowID(t *testing.T) {
	dest, err := NewEnv(t.TempDir())
	require.NoError(t, err)
	defer dest.Close()
	var ts sdktest.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	worker.Register(env, dest.Config, dest.Activities)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "delivery-made-by-hand"})
	in := lab.Input(lab.DestHelpdesk, "hand-made", lab.Ticket("hand-made", "Move the workshop booking"))
	env.ExecuteWorkflow(workflows.WorkflowType, in)
	res, ok := workflows.UndeliveredResult(env.GetWorkflowError())
	require.True(t, ok, "a rejected delivery fails with its result: %v", env.GetWorkflowError())
	require.Equal(t, workflows.StatusRejected, res.Status)
	require.Contains(t, res.Error, `workflow ID "delivery-made-by-hand" does not match the operation: start it as "delivery-`)
	require.Empty(t, res.Attempts)
	n, err := dest.Effects(lab.DestHelpdesk, "hand-made")
	require.NoError(t, err)
	require.Zero(t, n)
}
