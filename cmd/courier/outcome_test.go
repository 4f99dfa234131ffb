package main

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/workflows"
)

// TestOutcomeStopped: a canceled or terminated delivery exits with its own
// status, says whether its attempts may have applied, and how to go on.
func TestOutcomeStopped(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	terminated := workflows.DeliveryStatus{State: workflows.State(workflows.StatusTerminated),
		Ended: &workflows.RunEnded{RunID: "run-1", How: workflows.StatusTerminated, At: at, Reason: "stuck"},
		DeliveryResult: workflows.DeliveryResult{Key: "k", Status: workflows.StatusTerminated,
			Attempts: []workflows.Attempt{{Number: 1, Class: contract.ClassUnknown}}}}
	var e *cli.ExitError
	require.True(t, errors.As(outcome(terminated), &e))
	require.Equal(t, cli.CodeStopped, e.Code)
	for _, want := range []string{"terminated (run run-1, at 2026-12-01T10:00:00Z: stuck)", "may have applied", "deliver the operation again"} {
		require.Contains(t, e.Error(), want)
	}

	canceled := workflows.DeliveryStatus{State: workflows.State(workflows.StatusCanceled),
		DeliveryResult: workflows.DeliveryResult{Key: "k", Status: workflows.StatusCanceled, Error: "canceled on request",
			Attempts: []workflows.Attempt{{Number: 1, Class: contract.ClassNotSent}}}}
	require.True(t, errors.As(outcome(canceled), &e))
	require.Equal(t, cli.CodeStopped, e.Code)
	require.Contains(t, e.Error(), "none of its attempts applied")
}
