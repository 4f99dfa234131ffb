package soak_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/devserver"
	"github.com/abde64c9/courier/internal/lab"
	"github.com/abde64c9/courier/soak"
)

// TestShortSoak is the CI soak: 100 deliveries, 5 worker SIGKILLs and a dev
// server restart, against the real `courier worker` binary, in about two
// minutes. `go test -short` skips it.
func TestShortSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes minutes; run without -short")
	}
	_, err := devserver.Binary()
	require.NoError(t, err, devserver.BuildHint)
	bin, err := lab.BuildCourier(t.TempDir())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var log strings.Builder
	sum, err := soak.Run(ctx, soak.Options{
		Deliveries: 100, Rate: 4, Kills: 5, FaultRatio: soak.DefaultFaultRatio, Seed: 1, Timeout: 4 * time.Minute,
		Courier: bin,
		Log:     &log,
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	t.Log(log.String())
	require.NoError(t, err)
	var table strings.Builder
	require.NoError(t, sum.WriteTable(&table))
	t.Log("\n" + table.String())

	require.Empty(t, sum.Violations)
	require.Zero(t, sum.Duplicates)
	require.Zero(t, sum.Lost)
	require.Equal(t, 100, sum.Deliveries)
	require.Equal(t, 5, sum.WorkerKills)
	require.Equal(t, 1, sum.ServerRestarts)
	// The chaos did something: faults hit requests and every dedup kind
	// was exercised.
	require.NotZero(t, len(sum.FaultsApplied))
	require.Len(t, sum.ByDedup, 4)
	require.Equal(t, 100, sum.Statuses["created"]+sum.Statuses["duplicate"]+sum.Statuses["delivered_by_review"]+
		sum.Statuses["rejected"]+sum.Statuses["awaiting_review"], "statuses: %v", sum.Statuses)
}
