package testsuite

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/client"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/abde64c9/courier/lab/wftest"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// Decider answers a delivery parked for review. Returning nil leaves it
// parked: Deliver then returns the parked status.
type Decider func(workflows.DeliveryStatus) *workflows.ReviewDecision

// Outcome is how a delivery ended, or where it stopped.
type Outcome struct {
	Result workflows.DeliveryResult
	// Parked is the status of a delivery left awaiting review.
	Parked *workflows.DeliveryStatus
}

// Deliverer runs deliveries: in the Temporal test environment, or through a
// real server.
type Deliverer interface {
	Deliver(ctx context.Context, in workflows.DeliveryInput, decide Decider) (Outcome, error)
}

// TestEnv runs each delivery in a fresh Temporal test workflow environment,
// with the real activities against Env's real destinations.
type TestEnv struct {
	Env *Env
	// Suite, when set, is the caller's test suite (it carries a *testing.T).
	Suite *sdktest.WorkflowTestSuite
}

// reviewPoll is how often (in the test environment's clock) a parked
// delivery is looked for; retries of the fault cases take seconds.
const reviewPoll = 10 * time.Minute

// Deliver implements Deliverer.
func (t TestEnv) Deliver(_ context.Context, in workflows.DeliveryInput, decide Decider) (Outcome, error) {
	suite := t.Suite
	if suite == nil {
		suite = &sdktest.WorkflowTestSuite{}
	}
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(opkey.Key(in.Operation))})
	worker.Register(env, t.Env.Config, t.Env.Activities)

	var parked *workflows.DeliveryStatus
	var check func()
	check = func() {
		st, err := wftest.QueryStatus(env)
		if err != nil || st.State != workflows.StateAwaitingReview {
			env.RegisterDelayedCallback(check, reviewPoll)
			return
		}
		var d *workflows.ReviewDecision
		if decide != nil {
			d = decide(st)
		}
		if d == nil {
			parked = &st
			env.CancelWorkflow()
			return
		}
		env.SignalWorkflow(workflows.SignalReview, d)
		env.RegisterDelayedCallback(check, reviewPoll)
	}
	env.RegisterDelayedCallback(check, reviewPoll)

	env.ExecuteWorkflow(workflows.WorkflowType, in)
	if parked != nil {
		return Outcome{Parked: parked}, nil
	}
	if !env.IsWorkflowCompleted() {
		return Outcome{}, errors.New("delivery did not complete in the test environment")
	}
	if err := env.GetWorkflowError(); err != nil {
		if res, ok := workflows.UndeliveredResult(err); ok {
			return Outcome{Result: res}, nil
		}
		return Outcome{}, err
	}
	var res workflows.DeliveryResult
	if err := env.GetWorkflowResult(&res); err != nil {
		return Outcome{}, err
	}
	return Outcome{Result: res}, nil
}
