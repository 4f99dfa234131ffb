package workflows_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/workflows"
)

// TestFailureType: a delivery that ended without delivering fails
// NotDelivered only when nothing it sent can have applied; wherever an
// effect may exist, Unconfirmed. Both carry the result.
func TestFailureType(t *testing.T) {
	attempts := func(cls ...contract.Class) []workflows.Attempt {
		out := make([]workflows.Attempt, len(cls))
		for i, cl := range cls {
			out[i] = workflows.Attempt{Number: i + 1, Class: cl}
		}
		return out
	}
	for _, c := range []struct {
		name string
		res  workflows.DeliveryResult
		want string
	}{
		{"rejected", workflows.DeliveryResult{Status: workflows.StatusRejected, Attempts: attempts(contract.ClassRejected)}, workflows.ErrNotDelivered},
		{"rejected before any attempt", workflows.DeliveryResult{Status: workflows.StatusRejected}, workflows.ErrNotDelivered},
		{"rejected after an unknown outcome", workflows.DeliveryResult{Status: workflows.StatusRejected,
			Attempts: attempts(contract.ClassUnknown, contract.ClassRejected)}, workflows.ErrUnconfirmed},
		{"attempt_limit, nothing sent", workflows.DeliveryResult{Status: workflows.StatusAttemptLimit,
			Attempts: attempts(contract.ClassNotSent, contract.ClassThrottled, contract.ClassNotSent)}, workflows.ErrNotDelivered},
		{"attempt_limit after unknown outcomes", workflows.DeliveryResult{Status: workflows.StatusAttemptLimit,
			Attempts: attempts(contract.ClassUnknown, contract.ClassServerError)}, workflows.ErrUnconfirmed},
		{"canceled before anything was sent", workflows.DeliveryResult{Status: workflows.StatusCanceled}, workflows.ErrNotDelivered},
		{"canceled with an attempt in flight", workflows.DeliveryResult{Status: workflows.StatusCanceled,
			Attempts: attempts(contract.ClassUnknown)}, workflows.ErrUnconfirmed},
		{"abandoned", workflows.DeliveryResult{Status: workflows.StatusAbandoned, Attempts: attempts(contract.ClassUnknown)}, workflows.ErrUnconfirmed},
		{"abandoned, parked on an earlier run", workflows.DeliveryResult{Status: workflows.StatusAbandoned,
			Attempts: attempts(contract.ClassEarlierRun)}, workflows.ErrUnconfirmed},
		{"conflict", workflows.DeliveryResult{Status: workflows.StatusConflict, Attempts: attempts(contract.ClassConflict)}, workflows.ErrUnconfirmed},
	} {
		require.Equal(t, c.want, c.res.FailureType(), c.name)
		err := temporal.NewNonRetryableApplicationError(string(c.res.Status), c.res.FailureType(), nil, c.res)
		got, ok := workflows.UndeliveredResult(err)
		require.True(t, ok, c.name)
		require.Equal(t, c.res.Status, got.Status, c.name)
	}
	_, ok := workflows.UndeliveredResult(temporal.NewApplicationError("other", workflows.ErrConflict))
	require.False(t, ok, "a start refused as a conflict carries no result")
}
