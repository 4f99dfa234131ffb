package workflows_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/lab/wftest"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// TestReplayBeforePlainIdentifiers replays deliveries recorded on a real
// dev server before the rule: one started by the starter with a
// right-to-left override in its business id, one started by hand with a
// line break in its business id and a NUL in its tenant. Both delivered,
// and replay on today's workflow must take the same path; a workflow that
// refused them without the version check would not replay.
func TestReplayBeforePlainIdentifiers(t *testing.T) {
	dir := filepath.Join("testdata", "before-plain-identifiers")
	hs := recordedIn(t, dir)
	require.Len(t, hs, 2)
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflow(replayer, replayDestinations)
	refusing := replayerWith(refuseUnversioned(worker.Deliveries(replayDestinations).Delivery))
	// The expected panic would log a stack trace per history.
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, h := range hs {
		t.Run(filepath.Base(h.File), func(t *testing.T) {
			require.NoError(t, replay(t, replayer, h, replayLogger))
			require.ErrorContains(t, replay(t, refusing, h, quiet), "[TMPRL1100]",
				"the history must hold a delivery the rule would refuse")
		})
	}
}

// refuseUnversioned is the rule without its version check: it ends the
// delivery before its first command.
func refuseUnversioned(delivery deliveryFunc) deliveryFunc {
	return func(ctx workflow.Context, in workflows.DeliveryInput) (workflows.DeliveryResult, error) {
		var ce *opkey.CharacterError
		if err := in.Validate(); errors.As(err, &ce) {
			return workflows.DeliveryResult{Status: workflows.StatusRejected, Error: err.Error()}, nil
		}
		return delivery(ctx, in)
	}
}

// recordedIn reads the history index of dir.
func recordedIn(t *testing.T, dir string) []wftest.RecordedHistory {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, wftest.HistoryIndexFile))
	require.NoError(t, err)
	var index []wftest.RecordedCase
	require.NoError(t, json.Unmarshal(b, &index))
	var hs []wftest.RecordedHistory
	for _, rc := range index {
		for _, h := range rc.Histories {
			h.File = filepath.Join(dir, h.File)
			hs = append(hs, h)
		}
	}
	return hs
}
