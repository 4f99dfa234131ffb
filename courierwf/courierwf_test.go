package courierwf_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	sdktest "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/courierwf"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/worker/callers"
	"github.com/abde64c9/courier/workflows"
)

// DeliverSuite checks the child-workflow call in the SDK's test
// environment: the real Delivery workflow runs as the child, with its
// attempts scripted; the join activity is scripted where the workflow ID
// is taken.
type DeliverSuite struct {
	suite.Suite
	sdktest.WorkflowTestSuite
	env *sdktest.TestWorkflowEnvironment
	in  workflows.DeliveryInput
}

func TestDeliver(t *testing.T) { suite.Run(t, new(DeliverSuite)) }

// answers are one caller's outcome, as the caller workflow reports it.
type answer struct {
	Result workflows.DeliveryResult `json:"result"`
	Type   string                   `json:"type,omitempty"` // the failure's type, if it failed
}

// manyCallers delivers each input from one workflow, concurrently, and reports
// every caller's answer: what a workflow author writes.
func manyCallers(ctx workflow.Context, ins []workflows.DeliveryInput) ([]answer, error) {
	out := make([]answer, len(ins))
	wg := workflow.NewWaitGroup(ctx)
	for i, in := range ins {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			res, err := courierwf.Deliver(ctx, in)
			out[i].Result = res
			var app *temporal.ApplicationError
			if errors.As(err, &app) {
				out[i].Type = app.Type()
			} else if err != nil {
				out[i].Type = err.Error()
			}
		})
	}
	wg.Wait(ctx)
	return out, nil
}

func (s *DeliverSuite) SetupTest() {
	cfg := lab.Destinations("http://127.0.0.1:1", filepath.Join(s.T().TempDir(), lab.LedgerDB), lab.CaseBudget)
	ads, err := worker.OpenAdapters(cfg, nil)
	s.Require().NoError(err)
	s.T().Cleanup(func() { _ = ads.Close() })
	s.env = s.NewTestWorkflowEnvironment()
	worker.Register(s.env, cfg, worker.NewActivities(nil, cfg, ads))
	s.env.RegisterActivityWithOptions(callers.NewJoin(nil).JoinDelivery, activity.RegisterOptions{Name: workflows.ActivityJoinDelivery})
	s.env.RegisterWorkflow(manyCallers)
	s.in = lab.Input(lab.DestHelpdesk, "order-"+s.T().Name(), lab.Ticket("order", "Invoice the order"))
	s.env.SetTestTimeout(30 * time.Second)
}

func (s *DeliverSuite) TearDownTest() { s.env.AssertExpectations(s.T()) }

// attempt scripts the next attempt's answer.
func (s *DeliverSuite) attempt(out activities.Outcome) {
	s.env.OnActivity(workflows.ActivityAttempt, mock.Anything, mock.Anything).Return(out, nil).Once()
}

func (s *DeliverSuite) run(ins ...workflows.DeliveryInput) []answer {
	s.env.ExecuteWorkflow(manyCallers, ins)
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	var out []answer
	s.Require().NoError(s.env.GetWorkflowResult(&out))
	return out
}

func created() activities.Outcome {
	return activities.Outcome{Class: contract.ClassCreated, StatusCode: 201, Receipt: &activities.Receipt{ResourceID: "ticket-1"}}
}

// TestStartsTheDeliveryAsAnAbandonedChild: delivery-<key>, abandoned when
// the caller closes, rejecting a second run; the child's result is the
// answer.
func (s *DeliverSuite) TestStartsTheDeliveryAsAnAbandonedChild() {
	s.attempt(created())
	var started *workflow.Info
	s.env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) { started = info })
	out := s.run(s.in)
	s.Require().Len(out, 1)
	s.Empty(out[0].Type)
	s.Equal(workflows.StatusCreated, out[0].Result.Status)
	s.Equal(opkey.Key(s.in.Operation), out[0].Result.Key)
	s.Require().NotNil(started)
	s.Equal(workflows.WorkflowID(opkey.Key(s.in.Operation)), started.WorkflowExecution.ID)
	s.Equal(workflows.TaskQueue, started.TaskQueueName)
}

// TestSecondCallerJoins: two callers of one operation; the second finds
// the workflow ID taken and joins through the activity, which Courier's
// workers run; both get the delivery's result, and one attempt was made.
func (s *DeliverSuite) TestSecondCallerJoins() {
	s.attempt(created())
	var joined workflows.DeliveryInput
	s.env.OnActivity(workflows.ActivityJoinDelivery, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in workflows.DeliveryInput) (workflows.DeliveryResult, error) {
			joined = in
			return workflows.DeliveryResult{Key: opkey.Key(in.Operation), Status: workflows.StatusCreated}, nil
		}).Once()
	out := s.run(s.in, s.in)
	s.Require().Len(out, 2)
	for _, a := range out {
		s.Empty(a.Type)
		s.Equal(workflows.StatusCreated, a.Result.Status)
	}
	s.Equal(s.in.Operation, joined.Operation)
}

// TestConflictIsTyped: the join answers that the delivery carries another
// payload; the caller gets a Conflict failure, not retried.
func (s *DeliverSuite) TestConflictIsTyped() {
	s.attempt(created())
	other := s.in
	other.Payload = lab.Ticket("order", "Another subject")
	s.env.OnActivity(workflows.ActivityJoinDelivery, mock.Anything, mock.Anything).Return(
		workflows.DeliveryResult{}, temporal.NewNonRetryableApplicationError("conflict", workflows.ErrConflict, nil)).Once()
	out := s.run(s.in, other)
	s.Equal(workflows.StatusCreated, out[0].Result.Status)
	s.Equal(workflows.ErrConflict, out[1].Type)
}

// TestInvalidRequestStartsNothing: refused before any child, typed.
func (s *DeliverSuite) TestInvalidRequestStartsNothing() {
	bad := s.in
	bad.Payload = json.RawMessage(`[1, 2]`)
	noDest := s.in
	noDest.Destination = ""
	out := s.run(bad, noDest)
	for _, a := range out {
		s.Equal(workflows.ErrInvalidRequest, a.Type)
	}
}

// TestNotDeliveredCarriesTheResult: a rejected delivery fails the call
// with type NotDelivered, and the result says why.
func (s *DeliverSuite) TestNotDeliveredCarriesTheResult() {
	s.attempt(activities.Outcome{Class: contract.ClassRejected, StatusCode: 400, Error: "subject: required"})
	out := s.run(s.in)
	s.Equal(workflows.ErrNotDelivered, out[0].Type)
	s.Equal(workflows.StatusRejected, out[0].Result.Status)
	s.Contains(out[0].Result.Error, "subject: required")
}

// TestAbandonedIsUnconfirmed: a parked delivery a reviewer abandons fails
// the call with type Unconfirmed, not NotDelivered: its attempt may have
// applied.
func (s *DeliverSuite) TestAbandonedIsUnconfirmed() {
	in := lab.Input(lab.DestLegacy, "order-abandoned", lab.Ticket("order", "Invoice the order"))
	s.attempt(activities.Outcome{Class: contract.ClassUnknown, Error: "connection closed after the request was written"})
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflowByID(workflows.WorkflowID(opkey.Key(in.Operation)), workflows.SignalReview,
			workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "ops", Note: "customer cancelled"})
	}, 6*time.Hour)
	out := s.run(in)
	s.Equal(workflows.ErrUnconfirmed, out[0].Type)
	s.Equal(workflows.StatusAbandoned, out[0].Result.Status)
}

// TestParkedWaitsForTheReview: an unknown outcome at a destination without
// dedup parks the child; the caller waits until a reviewer decides, and
// gets delivered_by_review.
func (s *DeliverSuite) TestParkedWaitsForTheReview() {
	in := lab.Input(lab.DestLegacy, "order-parked", lab.Ticket("order", "Invoice the order"))
	s.attempt(activities.Outcome{Class: contract.ClassUnknown, Error: "connection closed after the request was written"})
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflowByID(workflows.WorkflowID(opkey.Key(in.Operation)), workflows.SignalReview,
			workflows.ReviewDecision{Decision: workflows.DecisionDelivered, Reviewer: "ops", ResourceID: "ticket-7", Note: "found it"})
	}, 6*time.Hour)
	out := s.run(in)
	s.Empty(out[0].Type)
	s.Equal(workflows.StatusDeliveredByReview, out[0].Result.Status)
	s.Equal("ticket-7", out[0].Result.Receipt.ResourceID)
}

// TestCanceledCallerLeavesTheDeliveryRunning: the caller stops waiting; the
// child is not asked to cancel.
func (s *DeliverSuite) TestCanceledCallerLeavesTheDeliveryRunning() {
	in := lab.Input(lab.DestLegacy, "order-canceled", lab.Ticket("order", "Invoice the order"))
	s.attempt(activities.Outcome{Class: contract.ClassUnknown, Error: "connection closed after the request was written"})
	s.env.RegisterDelayedCallback(s.env.CancelWorkflow, time.Hour)
	s.env.RegisterDelayedCallback(func() {
		var st workflows.DeliveryStatus
		v, err := s.env.QueryWorkflowByID(workflows.WorkflowID(opkey.Key(in.Operation)), workflows.QueryStatus)
		s.Require().NoError(err)
		s.Require().NoError(v.Get(&st))
		s.Equal(workflows.StateAwaitingReview, st.State, "the delivery still waits for its review")
		// The test environment runs until every workflow is done.
		s.env.SignalWorkflowByID(workflows.WorkflowID(opkey.Key(in.Operation)), workflows.SignalReview,
			workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "ops", Note: "test over"})
	}, 2*time.Hour)
	s.env.ExecuteWorkflow(manyCallers, []workflows.DeliveryInput{in})
	var out []answer
	s.Require().NoError(s.env.GetWorkflowResult(&out))
	s.Contains(out[0].Type, "canceled")
}
