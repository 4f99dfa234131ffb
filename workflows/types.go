package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
)

// DeliveryInput is the Delivery workflow's input: one business operation and
// its payload. Plain JSON, so any SDK or the temporal CLI can start it.
type DeliveryInput struct {
	Operation
	Payload json.RawMessage `json:"payload"`
}

// Status is a delivery's final status.
type Status string

const (
	StatusCreated           Status = "created"
	StatusDuplicate         Status = "duplicate"
	StatusConflict          Status = "conflict"
	StatusRejected          Status = "rejected"
	StatusAttemptLimit      Status = "attempt_limit"
	StatusDeliveredByReview Status = "delivered_by_review"
	StatusAbandoned         Status = "abandoned"
)

// State is where a running delivery is; a finished one's state is its Status.
type State string

const (
	StateDelivering     State = "delivering"
	StateRetryWait      State = "retry_wait"
	StateReconciling    State = "reconciling"
	StateAwaitingReview State = "awaiting_review"
)

// Attempt is one attempt at the destination.
type Attempt struct {
	Number     int            `json:"number"`
	Started    time.Time      `json:"started"`
	Ended      time.Time      `json:"ended"`
	Class      contract.Class `json:"class"`
	StatusCode int            `json:"status_code,omitempty"`
	Error      string         `json:"error,omitempty"`
}

// Event is one step of the delivery's story, for people reading it.
type Event struct {
	Time    time.Time `json:"time"`
	Attempt int       `json:"attempt,omitempty"`
	Event   string    `json:"event"`
	Detail  string    `json:"detail,omitempty"`
}

// Review decisions.
const (
	DecisionRetry     = "retry"
	DecisionDelivered = "delivered"
	DecisionAbandon   = "abandon"
)

// ReviewDecision is what an operator sends as signal or update "review".
type ReviewDecision struct {
	Decision   string `json:"decision"`
	Reviewer   string `json:"reviewer"`
	Note       string `json:"note,omitempty"`
	ResourceID string `json:"resource_id,omitempty"`
}

// Validate rejects a decision that cannot be acted on, saying how to fix it.
func (d ReviewDecision) Validate() error {
	var errs []error
	switch d.Decision {
	case DecisionRetry, DecisionAbandon:
	case DecisionDelivered:
		if strings.TrimSpace(d.ResourceID) == "" {
			errs = append(errs, errors.New("resource_id: required with decision delivered (the id of the effect you found)"))
		}
	case "":
		errs = append(errs, errors.New("decision: missing; use retry, delivered or abandon"))
	default:
		errs = append(errs, fmt.Errorf("decision: %q unknown; use retry, delivered or abandon", d.Decision))
	}
	if strings.TrimSpace(d.Reviewer) == "" {
		errs = append(errs, errors.New("reviewer: required, who is deciding"))
	}
	return errors.Join(errs...)
}

// Review is the audit trail of a delivery's reviews.
type Review struct {
	// Evidence is why the delivery stopped: the attempt that left the
	// outcome unknown and what the contract allows.
	Evidence  string         `json:"evidence"`
	Requested time.Time      `json:"requested"`
	Reminders int            `json:"reminders,omitempty"`
	Decisions []ReviewRecord `json:"decisions,omitempty"`
}

// ReviewRecord is one decision received, accepted or ignored.
type ReviewRecord struct {
	ReviewDecision
	Received time.Time `json:"received"`
	Via      string    `json:"via"` // signal or update
	Accepted bool      `json:"accepted"`
	Reason   string    `json:"reason,omitempty"` // why it was ignored
}

// DeliveryResult is the workflow's result.
type DeliveryResult struct {
	Key         string              `json:"key"`
	Fingerprint string              `json:"fingerprint"`
	Status      Status              `json:"status,omitempty"` // empty while running
	Receipt     *activities.Receipt `json:"receipt,omitempty"`
	Attempts    []Attempt           `json:"attempts"`
	Events      []Event             `json:"events"`
	Review      *Review             `json:"review,omitempty"`
	// Error says why a delivery ended without an effect (rejected, conflict,
	// attempt_limit: the last cause).
	Error string `json:"error,omitempty"`
}

// DeliveryStatus is the answer to query "status".
type DeliveryStatus struct {
	State     State     `json:"state"`
	Operation Operation `json:"operation"`
	DeliveryResult
}
