package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdktest "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/wftest"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// TermsSuite unit-tests the workflow's orchestration around its recorded
// terms in the test environment, with the attempt's answers scripted: the
// destination goes missing, the first attempt is lost, an earlier run
// stops a second one. Nothing is sent: the lab's destinations are only
// their terms.
type TermsSuite struct {
	suite.Suite
	sdktest.WorkflowTestSuite
	env  *sdktest.TestWorkflowEnvironment
	cfg  destinations.Config
	acts *activities.Activities
	in   workflows.DeliveryInput
}

func TestTerms(t *testing.T) { suite.Run(t, new(TermsSuite)) }

func (s *TermsSuite) SetupTest() {
	s.cfg, s.acts = labWorker(s.T())
	s.env = s.NewTestWorkflowEnvironment()
	s.in = lab.Input(lab.DestHelpdesk, "terms-"+s.T().Name(), lab.Ticket("terms", "Move the workshop booking"))
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(opkey.Key(s.in.Operation))})
	worker.Register(s.env, s.cfg, s.acts)
}

func (s *TermsSuite) TearDownTest() { s.env.AssertExpectations(s.T()) }

func (s *TermsSuite) status() workflows.DeliveryStatus {
	st, err := wftest.QueryStatus(s.env)
	s.Require().NoError(err)
	return st
}

// terms are what a first attempt at helpdesk reports, as the real activity does.
func (s *TermsSuite) terms() *activities.Terms {
	c := s.cfg.Destinations[lab.DestHelpdesk].Contract
	return &activities.Terms{Contract: &c}
}

func (s *TermsSuite) run() workflows.DeliveryResult { return wftest.Execute(s.T(), s.env, s.in) }

// answer scripts the next attempt's answer.
func (s *TermsSuite) answer(out activities.Outcome, err error) {
	s.env.OnActivity(workflows.ActivityAttempt, mock.Anything, mock.Anything).Return(out, err).Once()
}

// answerRecording scripts the next attempt's answer, out, and keeps its
// request in req.
func (s *TermsSuite) answerRecording(req *activities.Request, out activities.Outcome) {
	s.env.OnActivity(workflows.ActivityAttempt, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.Request) (activities.Outcome, error) {
			*req = r
			return out, nil
		}).Once()
}

// unconfigured is the attempt's error on a worker without the destination.
func unconfigured() error {
	return temporal.NewNonRetryableApplicationError(`destination "helpdesk" is not configured on the workers`,
		activities.ErrUnknownDestination, nil)
}

// decideWhenParked, an hour in, checks that the delivery awaits review
// with evidence naming want, and sends the decision d.
func (s *TermsSuite) decideWhenParked(want string, d workflows.ReviewDecision) {
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.Equal(workflows.StateAwaitingReview, st.State)
		s.Contains(st.Review.Evidence, want)
		s.env.SignalWorkflow(workflows.SignalReview, d)
	}, time.Hour)
}

// TestDestinationRemovedAfterAnAttempt: the second attempt finds no such
// destination on the worker. Something may have been applied, so the
// delivery parks, naming what is missing, instead of ending rejected.
func (s *TermsSuite) TestDestinationRemovedAfterAnAttempt() {
	s.answer(activities.Outcome{
		Class: contract.ClassUnknown, Error: "connection closed after the request was written", Terms: s.terms(),
	}, nil)
	// A key destination retries the unknown outcome; that worker lacks it.
	s.answer(activities.Outcome{}, unconfigured())
	s.decideWhenParked("not configured", workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops", Note: "gone"})
	res := s.run()
	s.Equal(workflows.StatusAbandoned, res.Status)
	s.Len(res.Attempts, 2)
	s.Equal(contract.ClassUnconfigured, res.Attempts[1].Class)
}

// TestUnconfiguredFirstAttemptIsRejected: nothing was ever sent, so the
// request is refused as a bad one and may be corrected.
func (s *TermsSuite) TestUnconfiguredFirstAttemptIsRejected() {
	s.answer(activities.Outcome{}, unconfigured())
	res := s.run()
	s.Equal(workflows.StatusRejected, res.Status)
	s.True(res.LeftNoEffect())
}

// TestLostFirstAttemptRecordsTermsLocally: the first attempt is lost with
// its worker before it reports its terms; the workflow records the
// worker's current terms by a local activity and decides from them.
func (s *TermsSuite) TestLostFirstAttemptRecordsTermsLocally() {
	s.answer(activities.Outcome{}, errors.New("activity heartbeat timeout"))
	var second activities.Request
	s.answerRecording(&second, activities.Outcome{Class: contract.ClassReplayed, StatusCode: 200,
		Receipt: &activities.Receipt{ResourceID: "ticket-1", Replayed: true}})
	res := s.run()
	s.Equal(workflows.StatusDuplicate, res.Status, "dedup key: the lost attempt is retried with the same key")
	s.Require().NotNil(second.Contract, "the retry carries the recorded contract")
	s.Equal(contract.DedupKey, second.Contract.Dedup)
}

// TestCreatedNamesItsTerms: a created attempt may name its terms by
// digest; the delivery ends created without resolving terms of its own
// (no local activity, no marker), and the attempt shows the digest. The
// request asks for that, and carries no key or fingerprint: the worker
// derives them.
func (s *TermsSuite) TestCreatedNamesItsTerms() {
	var req activities.Request
	s.answerRecording(&req, activities.Outcome{Class: contract.ClassCreated, StatusCode: 201,
		Receipt: &activities.Receipt{ResourceID: "ticket-1"}, TermsDigest: s.terms().Digest()})
	s.env.OnGetVersion("recorded-contract", workflow.DefaultVersion, 1).Never()
	res := s.run()
	s.Equal(workflows.StatusCreated, res.Status)
	s.Equal(s.terms().Digest(), res.Attempts[0].Terms)
	s.True(req.TermsByDigest)
	s.Empty(req.Key + req.Fingerprint)
}

// TestDigestEndsNothingUncertain: a digest beside a class that is not
// created or replayed decides nothing: the delivery resolves its terms
// and decides from them (a key destination retries).
func (s *TermsSuite) TestDigestEndsNothingUncertain() {
	s.answer(activities.Outcome{Class: contract.ClassUnknown, Error: "connection reset after the request was written",
		TermsDigest: s.terms().Digest()}, nil)
	s.answer(activities.Outcome{Class: contract.ClassReplayed, StatusCode: 200,
		Receipt: &activities.Receipt{ResourceID: "ticket-1", Replayed: true}}, nil)
	res := s.run()
	s.Equal(workflows.StatusDuplicate, res.Status)
	s.Len(res.Attempts, 2)
	s.Equal(s.terms().Digest(), res.Attempts[1].Terms, "the terms it resolved")
}

// TestEarlierRunParksAndReviewerRetryAcknowledgesIt: an attempt stopped by
// an earlier run parks; the reviewer's retry lets the next attempt send
// past exactly the runs the evidence named.
func (s *TermsSuite) TestEarlierRunParksAndReviewerRetryAcknowledgesIt() {
	earlier := activities.EarlierRun{RunID: "run-before", Status: "created", Closed: time.Now()}
	s.answer(activities.Outcome{
		Class: contract.ClassEarlierRun, Error: "not sent: " + earlier.String() + " may have applied it",
		EarlierRuns: []activities.EarlierRun{earlier}, Terms: s.terms(),
	}, nil)
	var second activities.Request
	s.answerRecording(&second, activities.Outcome{Class: contract.ClassCreated, StatusCode: 201,
		Receipt: &activities.Receipt{ResourceID: "ticket-2"}})
	s.decideWhenParked("run-before", workflows.ReviewDecision{Decision: "retry", Reviewer: "ops", Note: "the earlier one failed"})
	res := s.run()
	s.Equal(workflows.StatusCreated, res.Status)
	s.Equal([]string{"run-before"}, second.AcknowledgedRuns)
}

// TestOverLongDecisionIsRefusedAndCut: the update refuses a field over its
// limit, naming it; the signal records it cut to the limit.
func (s *TermsSuite) TestOverLongDecisionIsRefusedAndCut() {
	s.answer(activities.Outcome{
		Class: contract.ClassUnknown, Error: "lost", Terms: &activities.Terms{Contract: &contract.Contract{
			Dedup: contract.DedupNone, Retry: contract.Retry{MaxAttempts: 1, AttemptTimeout: contract.Duration(time.Second), Deadline: contract.Duration(time.Minute)}}},
	}, nil)
	long := workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops", Note: string(make([]byte, workflows.MaxNoteLen+1))}
	s.env.RegisterDelayedCallback(func() {
		// The web UI's current details say why it waits, with commands
		// that work when pasted.
		v, err := s.env.QueryWorkflow("__temporal_workflow_metadata")
		s.Require().NoError(err)
		var meta sdkpb.WorkflowMetadata
		s.Require().NoError(v.Get(&meta))
		details := meta.GetCurrentDetails()
		key := opkey.Key(s.in.Operation)
		s.Contains(details, "cannot deduplicate a retry")
		s.Contains(details, "courier review "+key+" \\\n  --decision delivered \\\n  --resource-id <ID-YOU-FOUND> \\\n  --reviewer <YOUR-NAME> \\\n  --note \"found it\"")
		s.Contains(details, "courier review "+key+" \\\n  --decision retry \\\n  --reviewer <YOUR-NAME> \\\n  --note")
		s.Contains(details, "\"resource_id\": \"<ID-YOU-FOUND>\",\n  \"reviewer\": \"<YOUR-NAME>\",")
		s.env.UpdateWorkflow(workflows.UpdateReview, "long", &sdktest.TestUpdateCallback{
			OnReject:   func(err error) { s.ErrorContains(err, "note: 1025 bytes is over the limit of 1024") },
			OnAccept:   func() { s.Fail("an over-long note was accepted") },
			OnComplete: func(any, error) {},
		}, long)
		s.env.SignalWorkflow(workflows.SignalReview, long)
	}, time.Hour)
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.Require().Len(st.Review.Decisions, 1)
		s.LessOrEqual(len(st.Review.Decisions[0].Note), workflows.MaxNoteLen+len("…"))
		s.Equal(1, st.Review.Ignored)
		s.env.SignalWorkflow(workflows.SignalReview, workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops"})
	}, 2*time.Hour)
	res := s.run()
	s.Equal(workflows.StatusAbandoned, res.Status)
}

// TestPastedPlaceholdersAreRefused: the review command pasted unchanged
// decides nothing. The update refuses a resource id or a reviewer that is
// still a placeholder (the marked ones and the bare ones shown before),
// naming the field; the signal records it ignored, with the reason; the
// filled-in decision delivers.
func (s *TermsSuite) TestPastedPlaceholdersAreRefused() {
	s.answer(activities.Outcome{
		Class: contract.ClassUnknown, Error: "lost", Terms: &activities.Terms{Contract: &contract.Contract{
			Dedup: contract.DedupNone, Retry: contract.Retry{MaxAttempts: 1, AttemptTimeout: contract.Duration(time.Second), Deadline: contract.Duration(time.Minute)}}},
	}, nil)
	pasted := []workflows.ReviewDecision{
		{Decision: "delivered", ResourceID: "<ID-YOU-FOUND>", Reviewer: "<YOUR-NAME>", Note: "found it"},
		{Decision: "delivered", ResourceID: "ID", Reviewer: "ops", Note: "found it"},
		{Decision: "retry", Reviewer: "NAME", Note: "it is not there"},
	}
	s.env.RegisterDelayedCallback(func() {
		for i, d := range pasted {
			s.env.UpdateWorkflow(workflows.UpdateReview, fmt.Sprint("pasted-", i), &sdktest.TestUpdateCallback{
				OnReject:   func(err error) { s.ErrorContains(err, "is the review command's placeholder") },
				OnAccept:   func() { s.Fail("a placeholder was accepted", "%+v", d) },
				OnComplete: func(any, error) {},
			}, d)
		}
		s.env.SignalWorkflow(workflows.SignalReview, pasted[0])
	}, time.Hour)
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.Equal(workflows.StateAwaitingReview, st.State, "nothing was decided")
		s.Require().Len(st.Review.Decisions, 1, "the signal is recorded, ignored")
		s.False(st.Review.Decisions[0].Accepted)
		s.Contains(st.Review.Decisions[0].Reason, `resource_id: "<ID-YOU-FOUND>" is the review command's placeholder`)
		s.Contains(st.Review.Decisions[0].Reason, `reviewer: "<YOUR-NAME>" is the review command's placeholder`)
		s.env.SignalWorkflow(workflows.SignalReview, workflows.ReviewDecision{Decision: "delivered", ResourceID: "ticket-7", Reviewer: "ops", Note: "found it"})
	}, 2*time.Hour)
	res := s.run()
	s.Equal(workflows.StatusDeliveredByReview, res.Status)
	s.Equal("ticket-7", res.Receipt.ResourceID)
	// No notifier is configured here: the record says so, not "told".
	i := slices.IndexFunc(res.Events, func(e workflows.Event) bool { return e.Event == "review_reminder" })
	s.Require().GreaterOrEqual(i, 0, "%+v", res.Events)
	s.Equal("parked: "+activities.NoticeLogged, res.Events[i].Detail)
}

// TestUnreadableLookupParks: after an unknown outcome at a lookup
// destination, a lookup answer the declared reading cannot read is neither
// found nor not found: the delivery parks at once with the answer as
// evidence, and asks no more.
func (s *TermsSuite) TestUnreadableLookupParks() {
	s.in = lab.Input(lab.DestCRM, "terms-unreadable", lab.Ticket("terms-unreadable", "Call back the customer"))
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(opkey.Key(s.in.Operation))})
	c := s.cfg.Destinations[lab.DestCRM].Contract
	s.answer(activities.Outcome{
		Class: contract.ClassUnknown, Error: "connection closed after the request was written", Terms: &activities.Terms{Contract: &c},
	}, nil)
	lookups := 0
	s.env.OnActivity(workflows.ActivityLookup, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.Request) (activities.Found, error) {
			lookups++
			return activities.Found{}, temporal.NewNonRetryableApplicationError(
				"lookup at crm: HTTP 200 is not JSON; the answer: <html>maintenance</html>", activities.ErrLookupUnreadable, nil)
		})
	s.decideWhenParked("<html>maintenance</html>", workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops", Note: "checked"})
	res := s.run()
	s.Equal(workflows.StatusAbandoned, res.Status)
	s.Equal(1, lookups, "an unreadable answer is not asked for again")
	s.Len(res.Attempts, 1, "nothing sent again")
}

// TestLookupWaitsToSettle: after an unknown outcome at a lookup
// destination, the lookup waits the destination's settle time after the
// attempt ended, as the delivery recorded it; the resend after "not found"
// says an earlier attempt may have applied, so the attempt looks first.
// The first attempt says nothing of the kind.
func (s *TermsSuite) TestLookupWaitsToSettle() {
	s.in = lab.Input(lab.DestCRM, "terms-settle", lab.Ticket("terms-settle", "Call back the customer"))
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(opkey.Key(s.in.Operation))})
	c := s.cfg.Destinations[lab.DestCRM].Contract
	s.Require().Positive(c.SettleTime())
	var first, second activities.Request
	s.answerRecording(&first, activities.Outcome{
		Class: contract.ClassUnknown, Error: "no response within the attempt timeout", Terms: &activities.Terms{Contract: &c},
	})
	s.answerRecording(&second, activities.Outcome{Class: contract.ClassCreated, StatusCode: 201, Receipt: &activities.Receipt{ResourceID: "ticket-2"}})
	var looked time.Time
	s.env.OnActivity(workflows.ActivityLookup, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.Request) (activities.Found, error) {
			looked = s.env.Now()
			return activities.Found{}, nil
		}).Once()
	res := s.run()
	s.Equal(workflows.StatusCreated, res.Status)
	s.Require().Len(res.Attempts, 2)
	s.GreaterOrEqual(looked.Sub(res.Attempts[0].Ended), c.SettleTime(), "looked up only once the settle time had passed")
	s.True(slices.ContainsFunc(res.Events, func(e workflows.Event) bool { return e.Event == "settle_wait" }), "%+v", res.Events)
	s.False(first.MayHaveApplied)
	s.True(second.MayHaveApplied, "the resend looks first")
}

// TestHappyPathAsksNoSettle: a delivery whose first attempt is answered
// writes no settle marker, at a lookup destination too.
func (s *TermsSuite) TestHappyPathAsksNoSettle() {
	s.in = lab.Input(lab.DestCRM, "terms-happy", lab.Ticket("terms-happy", "Call back the customer"))
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(opkey.Key(s.in.Operation))})
	c := s.cfg.Destinations[lab.DestCRM].Contract
	s.env.OnGetVersion("settle", workflow.DefaultVersion, 1).Never()
	s.answer(activities.Outcome{Class: contract.ClassCreated, StatusCode: 201, Receipt: &activities.Receipt{ResourceID: "ticket-1"},
		Terms: &activities.Terms{Contract: &c}}, nil)
	s.Equal(workflows.StatusCreated, s.run().Status)
}

// createdInAMinute scripts an attempt created a minute in, and returns
// how to send deliver updates meanwhile: each one's refusal (nil once
// accepted) and its answer as JSON are kept by its ID.
func (s *TermsSuite) createdInAMinute() (send func(id string, r workflows.DeliverRequest), refused map[string]error, answers map[string]string) {
	s.env.OnActivity(workflows.ActivityAttempt, mock.Anything, mock.Anything).After(time.Minute).Return(activities.Outcome{
		Class: contract.ClassCreated, StatusCode: 201, Receipt: &activities.Receipt{ResourceID: "ticket-1"}, Terms: s.terms(),
	}, nil).Once()
	refused, answers = map[string]error{}, map[string]string{}
	send = func(id string, r workflows.DeliverRequest) {
		s.env.UpdateWorkflow(workflows.UpdateDeliver, id, &sdktest.TestUpdateCallback{
			OnAccept: func() { refused[id] = nil },
			OnReject: func(err error) { refused[id] = err },
			OnComplete: func(v any, _ error) {
				b, _ := json.Marshal(v)
				answers[id] = string(b)
			},
		}, r)
	}
	return send, refused, answers
}

// TestDeliverJoinCheck: the deliver update's validator compares payloads
// by the workflow's own fingerprint. A request carrying its payload is
// fingerprinted as the input is, so the caller's own start, re-encoded by
// its SDK alike, is never a conflict; another payload is; a request that
// cannot be read is invalid, not a conflict.
func (s *TermsSuite) TestDeliverJoinCheck() {
	s.in.Payload = json.RawMessage(`{"subject": "Move the workshop booking", "seats": 1e2, "ratio": 1.0}`)
	fp, err := opkey.Fingerprint(s.in.Payload)
	s.Require().NoError(err)
	other, err := opkey.Fingerprint(json.RawMessage(`{"subject": "Another"}`))
	s.Require().NoError(err)
	send, refused, _ := s.createdInAMinute()
	s.env.RegisterDelayedCallback(func() {
		send("own-bytes", workflows.DeliverRequest{Payload: json.RawMessage(`{"ratio":1.0,"seats":1e2,"subject":"Move the workshop booking"}`)})
		send("own-fingerprint", workflows.DeliverRequest{Fingerprint: fp})
		send("reencoded-elsewhere", workflows.DeliverRequest{Payload: json.RawMessage(`{"subject": "Move the workshop booking", "seats": 100, "ratio": 1}`)})
		send("other", workflows.DeliverRequest{Payload: json.RawMessage(`{"subject": "Another"}`)})
		send("not-an-object", workflows.DeliverRequest{Payload: json.RawMessage(`[1, 2]`)})
		send("empty", workflows.DeliverRequest{})
		send(workflows.BriefDeliverUpdateID(fp, 0), workflows.DeliverRequest{Brief: true})
		send(workflows.BriefDeliverUpdateID(other, 0), workflows.DeliverRequest{Brief: true})
		send("deliver-brief-but-no-digits", workflows.DeliverRequest{Brief: true})
	}, time.Second)
	res := s.run()
	s.Equal(workflows.StatusCreated, res.Status)
	s.NoError(refused["own-bytes"])
	s.NoError(refused["own-fingerprint"])
	s.NoError(refused[workflows.BriefDeliverUpdateID(fp, 0)], "a brief request's ID names its payload")
	for id, typ := range map[string]string{
		"reencoded-elsewhere":                    workflows.ErrConflict, // numbers as written are the payload's
		"other":                                  workflows.ErrConflict,
		"not-an-object":                          workflows.ErrInvalidRequest,
		"empty":                                  workflows.ErrInvalidRequest,
		workflows.BriefDeliverUpdateID(other, 0): workflows.ErrConflict,
		"deliver-brief-but-no-digits":            workflows.ErrInvalidRequest,
	} {
		var app *temporal.ApplicationError
		s.Require().ErrorAs(refused[id], &app, id)
		s.Equal(typ, app.Type(), id)
		s.Contains(app.Error(), "nothing was sent", id)
	}
}

// TestBriefAnswer: a deliver request that asks for the brief answer is
// answered, once the delivery is final, with its state, status and
// starter alone (the run's result holds the rest); one that does not ask
// gets the whole status.
func (s *TermsSuite) TestBriefAnswer() {
	fp, err := opkey.Fingerprint(s.in.Payload)
	s.Require().NoError(err)
	send, _, answers := s.createdInAMinute()
	s.env.RegisterDelayedCallback(func() {
		send(workflows.BriefDeliverUpdateID(fp, 0), workflows.DeliverRequest{Fingerprint: fp, Caller: "me", Brief: true})
		send(workflows.DeliverUpdateID(fp, 0), workflows.DeliverRequest{Fingerprint: fp, Caller: "other"})
	}, time.Second)
	s.Equal(workflows.StatusCreated, s.run().Status)
	s.JSONEq(`{"state":"created","status":"created","starter":"me","brief":true}`, answers[workflows.BriefDeliverUpdateID(fp, 0)])
	var whole workflows.Settled
	s.Require().NoError(json.Unmarshal([]byte(answers[workflows.DeliverUpdateID(fp, 0)]), &whole))
	s.False(whole.Brief)
	s.Equal("me", whole.Starter)
	s.Equal("ticket-1", whole.Receipt.ResourceID)
	s.Len(whole.Attempts, 1)
}

// TestUnrecordedDecisionParksAgain: a decision the outcome ledger cannot
// store is not reported as the delivery's outcome: the delivery parks
// again, saying why, and the same decision sent once the ledger is back
// ends it, recorded.
func (s *TermsSuite) TestUnrecordedDecisionParksAgain() {
	s.answer(activities.Outcome{Class: contract.ClassEarlierRun, Error: "not sent: run-before may have applied it", Terms: s.terms()}, nil)
	s.env.OnActivity(workflows.ActivityRecordOutcome, mock.Anything, mock.Anything).
		Return(errors.New("ledger: database is locked")).Times(10) // its retry policy's attempts
	var recorded activities.Decided
	s.env.OnActivity(workflows.ActivityRecordOutcome, mock.Anything, mock.Anything).Return(
		func(_ context.Context, d activities.Decided) error { recorded = d; return nil }).Once()
	delivered := workflows.ReviewDecision{Decision: "delivered", Reviewer: "ops", ResourceID: "ticket-7", Note: "found it"}
	s.decideWhenParked("run-before", delivered)
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.Equal(workflows.StateAwaitingReview, st.State)
		s.Contains(st.Review.Evidence, "could not be recorded in the outcome ledger")
		s.Contains(st.Review.Evidence, "run-before", "the first evidence is kept")
		s.env.SignalWorkflow(workflows.SignalReview, delivered)
	}, 3*time.Hour)
	res := s.run()
	s.Equal(workflows.StatusDeliveredByReview, res.Status)
	s.Equal("ticket-7", recorded.Receipt.ResourceID)
	s.Equal(string(workflows.StatusDeliveredByReview), recorded.Status)
}
