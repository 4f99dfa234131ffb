package lab

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// TestStack: a stack delivers through a real `courier worker` process, the
// effect is counted from the sandbox's store, and a killed worker comes
// back under a new PID.
func TestStack(t *testing.T) {
	ctx, courier := RealTest(t, 3*time.Minute)
	s, err := Start(ctx, Options{Courier: courier, Workers: 1, WorkerArgs: []string{"--log-level", "warn"}})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()

	deliver := func(id string) workflows.DeliveryStatus {
		st, err := s.Starter.Deliver(ctx, workflows.DeliveryInput{
			Operation: opkey.Operation{Tenant: "lab", Destination: DestHelpdesk, Operation: "create-ticket", BusinessID: id},
			Payload:   Ticket(id, "lab test"),
		})
		require.NoError(t, err)
		return st
	}
	require.Equal(t, workflows.StatusCreated, deliver("one").Status)
	n, err := s.Effects.Count(ctx, DestHelpdesk, "one")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	old := s.Workers[0]
	old.Kill()
	w, err := old.Restart(ctx)
	require.NoError(t, err)
	defer w.Kill()
	require.NotEqual(t, old.PID(), w.PID())
	require.Equal(t, workflows.StatusCreated, deliver("two").Status)
}
