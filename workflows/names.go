package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
)

// Names shared by every package and by non-Go callers (see docs/protocol.md).
const (
	// TaskQueue is where Delivery workflows and their activities run.
	TaskQueue = "courier"
	// JoinTaskQueue is where a caller workflow's ActivityJoinDelivery runs:
	// a join waits for a delivery's end, and must not hold the slots the
	// attempts on TaskQueue need.
	JoinTaskQueue = "courier-join"
	// WorkflowType is the registered name of the Delivery workflow.
	WorkflowType = "Delivery"
	// WorkflowIDPrefix + key is a delivery's workflow ID.
	WorkflowIDPrefix = "delivery-"
	// GateIDPrefix + destination is the workflow ID of the destination's
	// gate. It is package gate's (gate.IDPrefix), kept here because a held
	// delivery's details link to its gate, and gate imports this package.
	GateIDPrefix = "destination-"

	// QueryStatus returns a Status.
	QueryStatus = "status"
	// SignalReview and UpdateReview carry a ReviewDecision.
	SignalReview = "review"
	UpdateReview = "review"
	// UpdateDeliver carries a DeliverRequest and returns a Settled once the
	// delivery is final or parked for review: with Update-with-Start, one
	// call starts or joins a delivery and waits for it.
	UpdateDeliver = "deliver"
	// UpdateDeliverIDPrefix + fingerprint is the deliver update's ID, so that
	// every caller of one operation and payload waits on one update.
	UpdateDeliverIDPrefix = "deliver-"

	// ErrInvalidReview is the error type of a review update the workflow refused.
	ErrInvalidReview = "InvalidReview"
	// ErrNotDelivered is the error type of a delivery that ended without an
	// effect, where nothing it sent can have applied: every attempt was
	// refused or provably not sent (rejected; attempt_limit or canceled
	// with no attempt that may have applied: DeliveryResult.LeftNoEffect).
	// The run fails, so the web UI shows it apart from the delivered ones,
	// and the failure's details are its DeliveryResult.
	ErrNotDelivered = "NotDelivered"
	// ErrUnconfirmed is the error type of a delivery that ended without a
	// confirmed effect, where one may exist: an attempt may have applied
	// (attempt_limit, canceled or rejected after an unknown outcome), a
	// reviewer abandoned it, or its key holds another payload's effect
	// (conflict). Check the destination before acting as if nothing
	// happened. Details as ErrNotDelivered's. Runs that ended before this
	// type existed failed NotDelivered whatever their attempts: their
	// result's LeftNoEffect says which they were.
	ErrUnconfirmed = "Unconfirmed"
	// ErrConflict is the error type of a deliver update refused because the
	// delivery carries another payload; its details are the delivery's
	// fingerprint, then the request's.
	ErrConflict = "Conflict"
	// ErrUnknownDelivery is the error type of a Nexus status request for an
	// operation no delivery has.
	ErrUnknownDelivery = "UnknownDelivery"
	// ErrInvalidRequest is the error type of a deliver update refused
	// because the request itself cannot be read: nothing was sent.
	ErrInvalidRequest = "InvalidRequest"

	// Courier's metrics, counted by the workflow where it records the fact
	// (never on replay); exported with a _total suffix.
	// MetricDeliveries: finished deliveries by destination and final status.
	MetricDeliveries = "courier_deliveries"
	// MetricAttempts: attempts by destination and class; an attempt lost
	// with its worker counts as unknown_outcome, as the workflow records it.
	MetricAttempts = "courier_attempts"
	// MetricUnknownOutcomes: attempts whose effect is uncertain (no answer
	// after the request was, or may have been, written; or a 5xx).
	MetricUnknownOutcomes = "courier_unknown_outcomes"

	// What the web UI's dialogs and `temporal workflow metadata` say of the
	// handlers.
	describeStatus       = "The delivery as JSON: state, key, fingerprint, every attempt, the review's evidence and decisions, the receipt."
	describeReviewUpdate = "Decide a delivery awaiting review; a bad decision is refused with the reason and changes nothing. " +
		`Input: {"decision": "retry|delivered|abandon", "reviewer": "NAME", "note": "what you checked", "resource_id": "ID (with delivered)"}`
	describeReviewSignal = "Decide a delivery awaiting review, unchecked: a bad decision is recorded and ignored, and the sender is not told. " +
		"Prefer the review update. Same input."
	describeRelease = "From the destination's gate: a delivery held at a paused or broken destination looks again. No input."
	describeDeliver = `Start or join the delivery and wait until it is final or parked for review. Input: {"payload": the start's payload, as sent} or {"fingerprint": "the payload's"}`

	// SignalRelease tells a delivery held at its destination to look again
	// (sent by the destination's gate, package gate, whose names are there).
	SignalRelease = "release"

	// Activity names.
	ActivityAttempt      = "Attempt"
	ActivityLookup       = "Lookup"
	ActivityRemindReview = "RemindReview"
	// ActivityRecordOutcome writes an outcome a review decided into the
	// workers' outcome ledger.
	ActivityRecordOutcome = "RecordOutcome"
	// ActivityJoinDelivery runs on JoinTaskQueue for a workflow whose
	// delivery call (package courierwf) found delivery-<key> taken: a child
	// cannot join a running workflow, so the activity joins it (or reads a
	// closed one) and waits for its end. Callers built before JoinTaskQueue
	// schedule it on TaskQueue, where each attempt waits only briefly.
	ActivityJoinDelivery = "JoinDelivery"

	// NexusService and NexusOperationDeliver name the Nexus service Courier's
	// workers serve to workflows of other namespaces (see docs/protocol.md).
	NexusService          = "courier"
	NexusOperationDeliver = "deliver"
	// NexusOperationStatus answers at once with the status of the
	// endpoint's tenant's delivery of an operation: how a caller whose
	// deliver operation is pending learns that it parked.
	NexusOperationStatus = "status"
	// NexusTaskQueuePrefix + tenant is the task queue a tenant's Nexus
	// endpoint targets: the tenant of a Nexus delivery is the one its
	// endpoint routes to, never a field the caller fills in.
	NexusTaskQueuePrefix = "courier-nexus-"
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

// DeliverUpdateID is the ID of the deliver update for a payload with this
// fingerprint; epoch > 0 names a later wait on the same delivery, after a
// reviewer sent a parked delivery back to delivering.
func DeliverUpdateID(fingerprint string, epoch int) string {
	if epoch > 0 {
		return fmt.Sprintf("%s%s-%d", UpdateDeliverIDPrefix, fingerprint, epoch)
	}
	return UpdateDeliverIDPrefix + fingerprint
}

// BriefDeliverUpdateID is the deliver update's ID for callers that ask for
// the brief answer (DeliverRequest.Brief): DeliverUpdateID with the
// fingerprint's first BriefFingerprintDigits digits, and "-brief". The ID
// is in history three times over, and the request need not carry the
// fingerprint: the validator compares the ID's digits with its own.
func BriefDeliverUpdateID(fingerprint string, epoch int) string {
	return DeliverUpdateID(fingerprint[:min(len(fingerprint), BriefFingerprintDigits)], epoch) + briefSuffix
}

// BriefFingerprintDigits of the fingerprint name the payload in a brief
// update's ID: 64 bits, which no other payload matches by chance, and
// none can be made to match without a second preimage of SHA-256's prefix.
const BriefFingerprintDigits = 16

const briefSuffix = "-brief"

// briefFingerprint is the fingerprint digits a brief update's ID names.
func briefFingerprint(updateID string) (string, bool) {
	rest, ok := strings.CutPrefix(updateID, UpdateDeliverIDPrefix)
	if !ok || len(rest) < BriefFingerprintDigits || !strings.Contains(rest[BriefFingerprintDigits:], briefSuffix) {
		return "", false
	}
	return rest[:BriefFingerprintDigits], true
}

// WaitingQuery is the visibility query for the running deliveries at a
// destination in any of states: a run stopped while waiting keeps the
// state it last published, so only a running one still waits.
func WaitingQuery(dest string, states ...State) string {
	quoted := make([]string, len(states))
	for i, s := range states {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf(`WorkflowType = %q AND ExecutionStatus = "Running" AND %s = %q AND %s IN (%s)`,
		WorkflowType, SADestination.GetName(), dest, SAState.GetName(), strings.Join(quoted, ", "))
}

// HeldQuery is the visibility query for the deliveries held at a
// destination (paused, or its breaker open).
func HeldQuery(dest string) string { return WaitingQuery(dest, StatePaused, StateCircuitOpen) }

// ParkedQuery is the visibility query for the deliveries at a destination
// awaiting review.
func ParkedQuery(dest string) string { return WaitingQuery(dest, StateAwaitingReview) }

// RetryingQuery is the visibility query for the deliveries at a
// destination waiting for their next attempt.
func RetryingQuery(dest string) string { return WaitingQuery(dest, StateRetryWait) }

// NexusTaskQueue is the task queue the tenant's endpoint targets; the
// workers serving the tenant poll it.
func NexusTaskQueue(tenant string) string { return NexusTaskQueuePrefix + tenant }

// WorkflowID is the ID of the delivery with this key.
func WorkflowID(key string) string { return WorkflowIDPrefix + key }
