package workflows

import "go.temporal.io/sdk/temporal"

// Names shared by every package and by non-Go callers (see docs/protocol.md).
const (
	// TaskQueue is where Delivery workflows and their activities run.
	TaskQueue = "courier"
	// WorkflowType is the registered name of the Delivery workflow.
	WorkflowType = "Delivery"
	// WorkflowIDPrefix + key is a delivery's workflow ID.
	WorkflowIDPrefix = "delivery-"

	// QueryStatus returns a Status.
	QueryStatus = "status"
	// SignalReview and UpdateReview carry a ReviewDecision.
	SignalReview = "review"
	UpdateReview = "review"

	// MemoFingerprint holds the payload fingerprint so a second start of the
	// same operation can be compared without reading history.
	MemoFingerprint = "fingerprint"

	// ErrInvalidReview is the error type of a review update the workflow refused.
	ErrInvalidReview = "InvalidReview"

	// Activity names.
	ActivityAttempt      = "Attempt"
	ActivityLookup       = "Lookup"
	ActivityRemindReview = "RemindReview"
)

// Search attributes (Keyword) for the Temporal web UI and visibility queries.
var (
	SAKey         = temporal.NewSearchAttributeKeyKeyword("CourierKey")
	SADestination = temporal.NewSearchAttributeKeyKeyword("CourierDestination")
	SAOperation   = temporal.NewSearchAttributeKeyKeyword("CourierOperation")
	SABusinessID  = temporal.NewSearchAttributeKeyKeyword("CourierBusinessID")
	SAState       = temporal.NewSearchAttributeKeyKeyword("CourierState")
)

// SearchAttributeNames lists the Keyword attributes a namespace must have.
var SearchAttributeNames = []string{
	SAKey.GetName(), SADestination.GetName(), SAOperation.GetName(),
	SABusinessID.GetName(), SAState.GetName(),
}

// WorkflowID is the ID of the delivery with this key.
func WorkflowID(key string) string { return WorkflowIDPrefix + key }
