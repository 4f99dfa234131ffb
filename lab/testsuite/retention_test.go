package testsuite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// TestRetryPastKeyRetention runs the real Delivery workflow in the Temporal
// test environment against the sandbox, whose answer is lost after it
// committed the ticket (close_after_commit), at a key destination whose
// retry waits 2s and may take its attempt's 500ms to arrive.
//
//   - key_retention 1s, shorter than that: the retry would arrive after
//     it, when the destination no longer recognises the key. The sandbox's
//     service that ignores keys stands in for it, as a destination past
//     its retention does: the delivery parks with one ticket, where a
//     retry makes a second.
//   - key_retention 1h: the retry arrives within it, at the service that
//     honours keys, and replays the first ticket.
func TestRetryPastKeyRetention(t *testing.T) {
	for _, c := range []struct {
		name, dest string
		retention  time.Duration
		parks      bool
	}{
		{"a retry would arrive after the key retention: parks", lab.DestIgnoring, time.Second, true},
		{"the key retention outlasts the retry: duplicate", lab.DestHelpdesk, time.Hour, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, err := NewEnv(t.TempDir())
			require.NoError(t, err)
			defer env.Close()
			d := env.Config.Destinations[c.dest]
			d.Contract.KeyRetention = contract.Duration(c.retention)
			d.Contract.Retry.InitialInterval = contract.Duration(2 * time.Second)
			d.Contract.Retry.MaxInterval = contract.Duration(2 * time.Second)
			d.Contract.Retry.AttemptTimeout = contract.Duration(500 * time.Millisecond)
			env.Config.Destinations[c.dest] = d
			env.Activities = worker.NewActivities(nil, env.Config, env.Adapters)
			env.Activities.Runs = noEarlierRuns{}
			require.NoError(t, env.Inject(c.dest, closeAfterCommit(1)))

			id := "retention-" + c.dest
			var parked *workflows.DeliveryStatus
			out, err := TestEnv{Env: env}.Deliver(t.Context(), lab.Input(c.dest, id, lab.Ticket(id, "Move the workshop booking")),
				func(st workflows.DeliveryStatus) *workflows.ReviewDecision {
					parked = &st
					recs, err := env.Sandbox.Records(lab.SandboxService(d))
					require.NoError(t, err)
					require.Len(t, recs, 1)
					return &workflows.ReviewDecision{Decision: workflows.DecisionDelivered, ResourceID: recs[0].TicketID,
						Reviewer: "ops", Note: "found it"}
				})
			require.NoError(t, err)
			effects, err := env.Effects(c.dest, id)
			require.NoError(t, err)
			require.Equal(t, 1, effects, "one ticket: %+v", out.Result.Attempts)
			if !c.parks {
				require.Nil(t, parked)
				require.Equal(t, workflows.StatusDuplicate, out.Result.Status, "%+v", out.Result.Attempts)
				require.Len(t, out.Result.Attempts, 2)
				return
			}
			require.NotNil(t, parked, "parked for review: %s after %+v", out.Result.Status, out.Result.Attempts)
			require.Len(t, parked.Attempts, 1, "no retry")
			require.Equal(t, contract.ClassUnknown, parked.Attempts[0].Class)
			require.Contains(t, parked.Review.Evidence,
				`destination "ignoring" (dedup key) cannot deduplicate a retry that would arrive after its key retention of 1s`)
			t.Logf("evidence: %s", parked.Review.Evidence)
			require.Equal(t, workflows.StatusDeliveredByReview, out.Result.Status)
		})
	}
}
