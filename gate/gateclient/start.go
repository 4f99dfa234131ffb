package gateclient

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/internal/text"
	"github.com/abde64c9/courier/workflows"
)

// StartOptions start a destination's gate, whoever starts it: an operator's
// pause or resume (Update-with-Start) or a worker's report
// (signal-with-start). Either joins a running gate.
func StartOptions(dest string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID: gate.WorkflowID(dest), TaskQueue: workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// A stopped run must not keep its destination from a gate.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:         "gate of destination " + dest,
		StaticDetails: "Holds every attempt to " + text.Markdown(dest) + " back, for every worker, while an operator " +
			"pauses it or its circuit breaker is open. Its current details say which, and how to change it.",
	}
}
