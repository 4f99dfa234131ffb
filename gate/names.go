package gate

import "github.com/abde64c9/courier/workflows"

// The gate's names, as recorded in histories and sent by non-Go callers
// (see docs/protocol.md): a change to any string breaks running gates and
// the recorded histories' replay.
const (
	// WorkflowType is the registered name of the gate workflow.
	WorkflowType = "Destination"
	// IDPrefix + destination is a gate's workflow ID (see WorkflowID); held
	// deliveries link to their gate by it.
	IDPrefix = workflows.GateIDPrefix
	// Memo is the memo field holding the DestinationState readers read.
	Memo = "gate"
	// QueryState returns a DestinationState. Courier reads the memo; the
	// query stays for the web UI's Queries tab.
	QueryState = "state"
	// UpdatePause and UpdateResume carry a PauseRequest and a ResumeRequest;
	// UpdateProbe, the key of the attempt that would be the probe.
	UpdatePause  = "pause"
	UpdateResume = "resume"
	UpdateProbe  = "probe"
	// SignalReport carries a Report to the gate.
	SignalReport = "report"
	// ErrInvalidChange is the error type of a pause or resume refused.
	ErrInvalidChange = "InvalidGateChange"
	// MetricTransitions: a destination's gate changes, by destination and
	// the state it changed to.
	MetricTransitions = "courier_destination_transitions"
)

// WorkflowID is the ID of a destination's gate.
func WorkflowID(dest string) string { return IDPrefix + dest }

// ActivityRecover is the activity a gate that did not continue from one of
// its own runs asks for its state: what the gate's earlier runs published
// (see gateclient.Recover). It takes no argument: the worker reads which
// gate asks from the server's record of the run that scheduled it.
const ActivityRecover = "RecoverGate"

// ActivityVerifyReport and ActivityVerifyProbe check a report that would
// move the breaker, and a probe the gate would grant, against the server's
// record of the Delivery they name (see gateclient.Cache): each answers ""
// when it holds, else why not.
const (
	ActivityVerifyReport = "VerifyReport"
	ActivityVerifyProbe  = "VerifyProbe"
)

// ErrWrongName is the failure of a gate whose name is not the one its
// workflow ID carries: it held nothing.
const ErrWrongName = "GateNameMismatch"
