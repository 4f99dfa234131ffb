package gate

import (
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
)

// RunningQuery is the visibility query workers list the gates by each
// second: running runs only, so its cost is the gates that run, not every
// run anyone stopped. A gate that does not run is read by its workflow ID.
var RunningQuery = fmt.Sprintf(`WorkflowType = %q AND ExecutionStatus = "Running"`, WorkflowType)

// RunsQuery is the visibility query for the runs that may decide the
// destinations' gates: running ones, and those that stopped without
// continuing, whose last memo may still hold their destination (see OfRun).
// The desk lists the gates by it.
var RunsQuery = fmt.Sprintf(`WorkflowType = %q AND ExecutionStatus IN ("Running", "Terminated", "Canceled", "Failed", "TimedOut")`,
	WorkflowType)

// Stopped names how a gate's run stopped without continuing; "" when
// it is running or continued (as new, or completed: a gate never does).
func Stopped(status enumspb.WorkflowExecutionStatus) string {
	switch status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	}
	return ""
}

// OfRun is what a gate's latest run means for its destination, from
// the run's status and the state its memo last published (nil: none):
// nil when it holds nothing back (closed). A stopped run keeps the state it
// stopped in, marked Stopped: a pause or an open breaker must not lift
// because its gate was terminated, so it holds until an operator resumes.
func OfRun(status enumspb.WorkflowExecutionStatus, memo *DestinationState) *DestinationState {
	if memo == nil {
		return nil
	}
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return memo
	}
	stopped := Stopped(status)
	if stopped == "" {
		return nil
	}
	st := *memo
	st.Stopped = stopped
	return &st
}

// StoppedHow tells an operator how to move on from a stopped gate.
func StoppedHow(name string) string {
	return "courier destination resume " + name + " --by <YOUR-NAME> (clears it) or courier destination pause " + name + " --reason \"why\" --by <YOUR-NAME> (restores it)"
}

// stoppedNote is what a hold at a stopped gate adds to its reason.
func (s DestinationState) stoppedNote(what string) string {
	if s.Stopped == "" {
		return ""
	}
	return fmt.Sprintf("; its gate was %s while %s: %s", s.Stopped, what, StoppedHow(s.Name))
}
