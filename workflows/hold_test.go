package workflows_test

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/lab/wftest"
	"github.com/abde64c9/courier/workflows"
)

// TermsSuite's holds: what the history and the details say of a delivery
// its destination's gate holds back.

// TestHeldLooksAreNotAttempts: a held Attempt sent nothing, so the next
// one's summary says what it is, a look at the gate after a timer or an
// attempt the gate released; the details link the gate and name the
// command that releases it.
func (s *TermsSuite) TestHeldLooksAreNotAttempts() {
	var summaries []string
	s.env.SetWorkerOptions(sdkworker.Options{Interceptors: []interceptor.WorkerInterceptor{&attemptSummaries{got: &summaries}}})
	start := s.env.Now()
	s.answer(activities.Outcome{Class: contract.ClassHeld, Hold: &activities.Hold{
		State: string(workflows.StatePaused), Reason: "partner maintenance (paused by alice)", Since: start}}, nil)
	s.answer(activities.Outcome{Class: contract.ClassHeld, Hold: &activities.Hold{
		State: string(workflows.StateCircuitOpen), Reason: "circuit open after 3 consecutive failures", Since: start,
		Until: start.Add(3 * time.Minute)}}, nil)
	s.answer(activities.Outcome{Class: contract.ClassCreated, StatusCode: 201, Terms: s.terms(),
		Receipt: &activities.Receipt{ResourceID: "ticket-1"}}, nil)
	resume := "```\ncourier destination resume helpdesk \\\n  --by <YOUR-NAME> \\\n  --note \"why\"\n```"
	s.env.RegisterDelayedCallback(func() {
		d := wftest.CurrentDetails(s.T(), s.env)
		s.Contains(d, "**paused**: partner maintenance (paused by alice)")
		s.Contains(d, "[helpdesk's gate](/namespaces/default-test-namespace/workflows/destination-helpdesk)")
		s.Contains(d, "helpdesk is paused until an operator resumes it")
		s.Contains(d, resume)
		s.env.SignalWorkflow(workflows.SignalRelease, nil)
	}, time.Minute)
	s.env.RegisterDelayedCallback(func() {
		d := wftest.CurrentDetails(s.T(), s.env)
		s.Contains(d, "**circuit open**")
		s.Contains(d, "Its breaker lets one probe attempt through at "+start.Add(3*time.Minute).UTC().Format(time.DateTime)+" UTC")
		s.Contains(d, resume)
	}, 2*time.Minute)
	res := s.run()
	s.Equal(workflows.StatusCreated, res.Status)
	s.Len(res.Attempts, 1, "a held look is not an attempt")
	budget := s.terms().Contract.Retry.MaxAttempts
	s.Equal([]string{
		fmt.Sprintf("attempt 1 of %d → helpdesk (dedup key)", budget),
		fmt.Sprintf("attempt 1 of %d → helpdesk (dedup key), released by its gate", budget),
		fmt.Sprintf("look at helpdesk's gate; attempt 1 of %d if it admits", budget),
	}, summaries)
}

// attemptSummaries keeps the summary of every Attempt activity the
// workflow schedules, as the history shows it.
type attemptSummaries struct {
	interceptor.WorkerInterceptorBase
	got *[]string
}

func (a *attemptSummaries) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &summariesInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, got: a.got}
}

type summariesInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	got *[]string
}

func (i *summariesInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&summariesOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, got: i.got})
}

type summariesOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	got *[]string
}

func (o *summariesOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if activityType == workflows.ActivityAttempt {
		*o.got = append(*o.got, workflow.GetActivityOptions(ctx).Summary)
	}
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}
