package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// historiesDir holds the order workflows' histories from a real server:
// the child-workflow call (created, joined, parked and decided, conflict)
// and the Nexus call. Recorded, from this folder, with
//
//	go test -run TestOrdersOnARealServer -record
//
// A change to courierwf or to the order workflows that alters their
// command sequence fails this replay: it needs workflow.GetVersion.
// child-joined.json scheduled its join on task queue courier, before joins
// had their own: it replays, as the SDK matches a scheduled activity by its
// ID and type, not its queue.
const historiesDir = "testdata/histories"

func TestReplayRecordedCallers(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories in %s", historiesDir)
	r := sdkworker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(OrderWorkflow, workflow.RegisterOptions{Name: "Order"})
	r.RegisterWorkflowWithOptions(OrderViaNexus, workflow.RegisterOptions{Name: "OrderViaNexus"})
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}

// TestChildIsAbandonedAndRejectsReuse: the recorded child start asks for
// what courierwf promises: delivery-<key> on Courier's task queue,
// abandoned when the caller closes, never a second run.
func TestChildIsAbandonedAndRejectsReuse(t *testing.T) {
	f, err := os.Open(filepath.Join(historiesDir, "child-created.json"))
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	var found bool
	for _, ev := range h.GetEvents() {
		if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			found = true
			require.True(t, strings.HasPrefix(a.GetWorkflowId(), "delivery-"), a.GetWorkflowId())
			require.Equal(t, "courier", a.GetTaskQueue().GetName())
			require.Equal(t, enumspb.PARENT_CLOSE_POLICY_ABANDON, a.GetParentClosePolicy())
			require.Equal(t, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE, a.GetWorkflowIdReusePolicy())
		}
	}
	require.True(t, found, "no child started")
}
