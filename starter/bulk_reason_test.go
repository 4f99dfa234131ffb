package starter

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBatchReasonWithoutNote: the batch job's reason, readable by anyone
// who may describe batch jobs, says what the job does but not the note.
func TestBatchReasonWithoutNote(t *testing.T) {
	p := BulkPreview{Filter: BulkFilter{Destination: "legacy"}, Matched: 3}
	r := batchReason(p, BulkDecision{Decision: "abandon", Reviewer: "ops", Note: "customer 4711 withdrew"})
	require.Equal(t, "courier review --all: abandon 3 deliveries parked at legacy, by ops", r)
	require.NotContains(t, r, "4711")
}
