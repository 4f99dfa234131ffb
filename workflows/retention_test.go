package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
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

// versionRetentionAtSend is the workflow's change ID for the rule.
const versionRetentionAtSend = "retention-at-send"

// TestRetryArrivalDecidesKeyRetention: after a lost answer at a key
// destination, what decides is whether the retry could reach it after its
// key retention (the retry's wait, then its attempt timeout), not whether
// the retention had passed when the answer was lost. The lab's helpdesk
// waits 100ms before its first retry and gives an attempt 700ms.
func TestRetryArrivalDecidesKeyRetention(t *testing.T) {
	lost := activities.Outcome{Class: contract.ClassUnknown, Error: "connection reset after the request was written"}
	replayed := activities.Outcome{Class: contract.ClassReplayed, StatusCode: 201, Receipt: &activities.Receipt{ResourceID: "ticket-1", Replayed: true}}
	cases := []struct {
		name      string
		retention time.Duration
		// answered is how long the first attempt takes to be lost.
		answered time.Duration
		// version is what the marker answers; nil: no marker may be asked.
		version *workflow.Version
		parks   bool
	}{
		{name: "the retry would arrive past the retention: parks", retention: 500 * time.Millisecond, version: ptr(workflow.Version(1)), parks: true},
		{name: "a delivery from before the rule retries as it did", retention: 500 * time.Millisecond, version: ptr(workflow.DefaultVersion)},
		{name: "the retry arrives within the retention: retries, no marker", retention: time.Hour},
		{name: "no retention declared: retries, no marker"},
		{name: "the retention passed before the answer was lost: parks, no marker", retention: 500 * time.Millisecond, answered: time.Second, parks: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, cfg, in := helpdeskDelivery(t, "retention")

			c := cfg.Destinations[lab.DestHelpdesk].Contract
			c.KeyRetention = contract.Duration(tc.retention)
			first := lost
			first.Terms = &activities.Terms{Contract: &c}
			env.OnActivity(workflows.ActivityAttempt, mock.Anything, mock.Anything).After(tc.answered).Return(first, nil).Once()
			if tc.version == nil {
				env.OnGetVersion(versionRetentionAtSend, workflow.DefaultVersion, 1).Never()
			} else {
				env.OnGetVersion(versionRetentionAtSend, workflow.DefaultVersion, 1).Return(*tc.version).Once()
				// From before the rules after it too: the retry, already
				// too late to start, is sent.
				env.OnGetVersion(versionRetentionAfterUncertain, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion).Maybe()
			}
			var parked workflows.DeliveryStatus
			var details string
			if tc.parks {
				env.RegisterDelayedCallback(func() {
					var err error
					parked, err = wftest.QueryStatus(env)
					require.NoError(t, err)
					details = wftest.CurrentDetails(t, env)
					env.SignalWorkflow(workflows.SignalReview, workflows.ReviewDecision{
						Decision: workflows.DecisionDelivered, ResourceID: "ticket-1", Reviewer: "ops", Note: "found it"})
				}, time.Minute)
			} else {
				env.OnActivity(workflows.ActivityAttempt, mock.Anything, mock.Anything).Return(replayed, nil).Once()
			}

			res := wftest.Execute(t, env, in)
			env.AssertExpectations(t)
			if !tc.parks {
				require.Equal(t, workflows.StatusDuplicate, res.Status, "%+v", res.Attempts)
				require.Len(t, res.Attempts, 2)
				return
			}
			require.Equal(t, workflows.StateAwaitingReview, parked.State)
			require.Equal(t, workflows.StatusDeliveredByReview, res.Status)
			require.Len(t, res.Attempts, 1, "no retry past the retention")
			require.Equal(t, `attempt 1: unknown_outcome (connection reset after the request was written); `+
				`destination "helpdesk" (dedup key) cannot deduplicate a retry that would arrive after its key retention of 500ms`,
				parked.Review.Evidence)
			require.Contains(t, details, "a retry would arrive after helpdesk's key retention of 500ms, "+
				"when it may no longer recognise the key, so it could apply it twice: check the destination")
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestHappyPathAsksNoRetentionMarker: a first attempt that is answered at
// a key destination with a short retention writes no marker.
func TestHappyPathAsksNoRetentionMarker(t *testing.T) {
	env, cfg, in := helpdeskDelivery(t, "retention-happy")
	c := cfg.Destinations[lab.DestHelpdesk].Contract
	c.KeyRetention = contract.Duration(time.Millisecond)
	env.OnGetVersion(versionRetentionAtSend, workflow.DefaultVersion, 1).Never()
	env.OnGetVersion(versionRetentionAfterUncertain, workflow.DefaultVersion, 1).Never()
	env.OnActivity(workflows.ActivityAttempt, mock.Anything, mock.Anything).Return(activities.Outcome{
		Class: contract.ClassCreated, StatusCode: 201, Receipt: &activities.Receipt{ResourceID: "ticket-1"},
		Terms: &activities.Terms{Contract: &c},
	}, nil).Once()
	require.Equal(t, workflows.StatusCreated, wftest.Execute(t, env, in).Status)
	env.AssertExpectations(t)
}

// versionRetentionAfterUncertain is the workflow's change ID for the rule
// that no send reaches a key destination past its key retention once an
// attempt may have applied.
const versionRetentionAfterUncertain = "retention-after-uncertain"

// TestNoSendPastRetentionAfterUncertain: a retry decided in time after a
// lost answer, then carried past the key retention by what comes between
// (a throttled answer's Retry-After, a hold), parks; deliveries from
// before the rule send, and only where the two rules differ is the marker
// asked. The lab's helpdesk waits 100ms before its first retry and gives
// an attempt 700ms; its key retention here is 10s.
func TestNoSendPastRetentionAfterUncertain(t *testing.T) {
	lost := activities.Outcome{Class: contract.ClassUnknown, Error: "connection reset after the request was written"}
	throttled := activities.Outcome{Class: contract.ClassThrottled, StatusCode: 503, Error: "HTTP 503", RetryAfter: 30 * time.Second}
	held := activities.Outcome{Class: contract.ClassHeld, Hold: &activities.Hold{State: string(workflows.StatePaused), Reason: "partner maintenance (paused by alice)"}}
	replayed := activities.Outcome{Class: contract.ClassReplayed, StatusCode: 201, Receipt: &activities.Receipt{ResourceID: "ticket-1", Replayed: true}}
	cases := []struct {
		name      string
		retention time.Duration
		answers   []activities.Outcome
		// version is what the marker answers; nil: no marker may be asked.
		version *workflow.Version
		// evidence is the review's; empty: delivered without one.
		evidence string
	}{
		{name: "throttled past the retention after a lost answer: parks", retention: 10 * time.Second,
			answers: []activities.Outcome{lost, throttled}, version: ptr(workflow.Version(1)),
			evidence: `attempt 2: throttled (HTTP 503); attempt 1 may have applied, and destination "helpdesk" (dedup key) ` +
				`cannot deduplicate a send that would arrive after its key retention of 10s`},
		{name: "throttled, from before the rule: sends", retention: 10 * time.Second,
			answers: []activities.Outcome{lost, throttled, replayed}, version: ptr(workflow.DefaultVersion)},
		{name: "held past the retention after a lost answer: parks", retention: 10 * time.Second,
			answers: []activities.Outcome{lost, held}, version: ptr(workflow.Version(1)),
			evidence: `the send after attempt 1 was held (paused: partner maintenance (paused by alice)) until now; attempt 1 may have applied, ` +
				`and destination "helpdesk" (dedup key) cannot deduplicate a send that would arrive after its key retention of 10s`},
		{name: "held, from before the rule: sends", retention: 10 * time.Second,
			answers: []activities.Outcome{lost, held, replayed}, version: ptr(workflow.DefaultVersion)},
		{name: "throttled within the retention: sends, no marker", retention: time.Hour,
			answers: []activities.Outcome{lost, throttled, replayed}},
		{name: "held within the retention: sends, no marker", retention: time.Hour,
			answers: []activities.Outcome{lost, held, replayed}},
		{name: "nothing may have applied: throttled and held past the retention send, no marker", retention: 10 * time.Second,
			answers: []activities.Outcome{throttled, held, replayed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, cfg, in := helpdeskDelivery(t, "after-uncertain")

			c := cfg.Destinations[lab.DestHelpdesk].Contract
			c.KeyRetention = contract.Duration(tc.retention)
			for i, out := range tc.answers {
				if i == 0 {
					out.Terms = &activities.Terms{Contract: &c}
				}
				env.OnActivity(workflows.ActivityAttempt, mock.Anything, mock.Anything).Return(out, nil).Once()
			}
			env.OnGetVersion(versionRetentionAtSend, workflow.DefaultVersion, 1).Never()
			if tc.version == nil {
				env.OnGetVersion(versionRetentionAfterUncertain, workflow.DefaultVersion, 1).Never()
			} else {
				env.OnGetVersion(versionRetentionAfterUncertain, workflow.DefaultVersion, 1).Return(*tc.version) // sticky: asked again, answered alike
			}
			var parked workflows.DeliveryStatus
			if tc.evidence != "" {
				env.RegisterDelayedCallback(func() {
					var err error
					parked, err = wftest.QueryStatus(env)
					require.NoError(t, err)
					env.SignalWorkflow(workflows.SignalReview, workflows.ReviewDecision{
						Decision: workflows.DecisionDelivered, ResourceID: "ticket-1", Reviewer: "ops", Note: "found it"})
				}, time.Hour)
			}

			res := wftest.Execute(t, env, in)
			env.AssertExpectations(t)
			var sent int
			for _, out := range tc.answers {
				if out.Class != contract.ClassHeld {
					sent++
				}
			}
			require.Len(t, res.Attempts, sent, "%+v", res.Attempts)
			if tc.evidence == "" {
				require.Equal(t, workflows.StatusDuplicate, res.Status, "%+v", res.Attempts)
				return
			}
			require.Equal(t, workflows.StateAwaitingReview, parked.State)
			require.Equal(t, tc.evidence, parked.Review.Evidence)
			require.Equal(t, workflows.StatusDeliveredByReview, res.Status)
		})
	}
}

// TestUnstartedRetryIsNotSent: a retry after a lost answer that no worker
// starts in time (its schedule-to-start timeout, set once an attempt may
// have applied at a key destination with a retention) sent nothing, and
// could now arrive past the retention: it parks, naming the attempt that
// may have applied.
func TestUnstartedRetryIsNotSent(t *testing.T) {
	env, cfg, in := helpdeskDelivery(t, "unstarted")
	c := cfg.Destinations[lab.DestHelpdesk].Contract
	c.KeyRetention = contract.Duration(10 * time.Second)
	env.OnActivity(workflows.ActivityAttempt, mock.Anything, mock.Anything).Return(activities.Outcome{
		Class: contract.ClassUnknown, Error: "connection reset after the request was written", Terms: &activities.Terms{Contract: &c},
	}, nil).Once()
	env.OnActivity(workflows.ActivityAttempt, mock.Anything, mock.Anything).Return(
		activities.Outcome{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)).After(10 * time.Second).Once()
	env.OnGetVersion(versionRetentionAfterUncertain, workflow.DefaultVersion, 1).Return(workflow.Version(1)).Once()
	var parked workflows.DeliveryStatus
	env.RegisterDelayedCallback(func() {
		var err error
		parked, err = wftest.QueryStatus(env)
		require.NoError(t, err)
		env.SignalWorkflow(workflows.SignalReview, workflows.ReviewDecision{
			Decision: workflows.DecisionAbandon, Reviewer: "ops", Note: "checked"})
	}, time.Hour)
	res := wftest.Execute(t, env, in)
	env.AssertExpectations(t)
	require.Equal(t, workflows.StatusAbandoned, res.Status)
	require.Len(t, res.Attempts, 2)
	require.Equal(t, contract.ClassNotSent, res.Attempts[1].Class)
	require.Regexp(t, `^attempt 2: not_sent \(not sent: no worker started it by \S+, past which it could reach the destination after its key retention\); `+
		`attempt 1 may have applied, and destination "helpdesk" \(dedup key\) cannot deduplicate a send that would arrive after its key retention of 10s$`,
		parked.Review.Evidence)
}

// helpdeskDelivery is a test environment with the lab's destinations and
// a delivery of a ticket to helpdesk under businessID, started under its
// own workflow ID.
func helpdeskDelivery(t *testing.T, businessID string) (*sdktest.TestWorkflowEnvironment, destinations.Config, workflows.DeliveryInput) {
	t.Helper()
	cfg, acts := labWorker(t)
	var ts sdktest.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	worker.Register(env, cfg, acts)
	in := lab.Input(lab.DestHelpdesk, businessID, lab.Ticket(businessID, "Move the workshop booking"))
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(opkey.Key(in.Operation))})
	return env, cfg, in
}
