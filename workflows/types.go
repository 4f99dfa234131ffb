package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/internal/text"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/reviewproof"
)

// DeliveryInput is the Delivery workflow's input: one business operation and
// its payload. Plain JSON, so any SDK or the temporal CLI can start it.
type DeliveryInput struct {
	opkey.Operation
	Payload json.RawMessage `json:"payload"`
}

// Status is a delivery's final status.
type Status string

const (
	StatusCreated           Status = "created"
	StatusDuplicate         Status = "duplicate"
	StatusConflict          Status = "conflict"
	StatusRejected          Status = contract.FinalRejected
	StatusAttemptLimit      Status = contract.FinalAttemptLimit
	StatusDeliveredByReview Status = "delivered_by_review"
	StatusAbandoned         Status = "abandoned"
	// StatusCanceled: a cancel request ended the delivery; an attempt in
	// flight then is recorded as an unknown outcome.
	StatusCanceled Status = contract.FinalCanceled
	// StatusTerminated and StatusTimedOut are never set by the workflow:
	// the server ended the run, which then cannot say so itself, and the
	// starter reports it from the run's execution status.
	StatusTerminated Status = "terminated"
	StatusTimedOut   Status = "timed_out"
)

// EndedUnfinished reports whether a final status means the run was stopped
// from outside before it settled: whatever it sent may have applied, and
// the operation may run again under the earlier-run rule.
func (s Status) EndedUnfinished() bool {
	return s == StatusCanceled || s == StatusTerminated || s == StatusTimedOut
}

// Delivered reports whether a final status means the effect is at the
// destination.
func (s Status) Delivered() bool {
	return s == StatusCreated || s == StatusDuplicate || s == StatusDeliveredByReview
}

// UndeliveredResult is the result of a delivery that ended without
// delivering, from the error its run's Get returns: the details of its
// NotDelivered or Unconfirmed failure. Whatever the type, what a reader
// decides on (may the operation run again?) is the result's LeftNoEffect,
// which also reads runs from before Unconfirmed.
func UndeliveredResult(err error) (DeliveryResult, bool) {
	var res DeliveryResult
	app, ok := Failure(err, ErrNotDelivered)
	if !ok {
		app, ok = Failure(err, ErrUnconfirmed)
	}
	if !ok || app.Details(&res) != nil {
		return DeliveryResult{}, false
	}
	return res, true
}

// FailureType is the error type a delivery that ended without delivering
// fails with: ErrNotDelivered when it provably applied nothing,
// ErrUnconfirmed when an effect may exist.
func (r DeliveryResult) FailureType() string {
	if r.LeftNoEffect() {
		return ErrNotDelivered
	}
	return ErrUnconfirmed
}

// Failure finds the failure of type typ (ErrNotDelivered, ErrUnconfirmed,
// ErrConflict, ErrInvalidRequest) in err's chain: under a child's, an activity's or a
// Nexus operation's error, and under the caller's own wrapping, which a
// workflow's failure carries as an application error of its own.
func Failure(err error, typ string) (*temporal.ApplicationError, bool) {
	for ; err != nil; err = errors.Unwrap(err) {
		if app, ok := err.(*temporal.ApplicationError); ok && app.Type() == typ {
			return app, true
		}
	}
	return nil, false
}

// State is where a running delivery is; a finished one's state is its Status.
type State string

const (
	StateDelivering     State = "delivering"
	StateRetryWait      State = "retry_wait"
	StateReconciling    State = "reconciling"
	StateAwaitingReview State = "awaiting_review"
	// StatePaused and StateCircuitOpen: held, nothing sent, because the
	// destination is paused or its breaker is open.
	StatePaused      State = "paused"
	StateCircuitOpen State = "circuit_open"
)

// Attempt is one attempt at the destination.
type Attempt struct {
	Number     int            `json:"number"`
	Started    time.Time      `json:"started"`
	Ended      time.Time      `json:"ended"`
	Class      contract.Class `json:"class"`
	StatusCode int            `json:"status_code,omitempty"`
	Error      string         `json:"error,omitempty"`
	// Terms names the terms the attempt ran under by their digest
	// (activities.Terms.Digest); empty where none were known.
	Terms string `json:"terms,omitempty"`
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
	// BatchJob names the batch job that sent the decision to many
	// deliveries at once (courier review --all): each delivery's record
	// says which job decided it, and a delivery takes one job's decision
	// once however often it arrives.
	BatchJob string `json:"batch_job,omitempty"`
	// Proof is the reviewer's signature over the decision (package
	// reviewproof), required where the delivery's recorded reviewers
	// have keys: then it, not Reviewer, says who decided.
	Proof string `json:"proof,omitempty"`
}

// Limits on a review decision's fields, in bytes. They keep what a delivery
// records of its reviews small whatever is sent to it.
const (
	MaxDecisionLen   = 16
	MaxReviewerLen   = 64
	MaxResourceIDLen = 256
	MaxNoteLen       = 1024
	MaxBatchJobLen   = 128
	MaxProofLen      = reviewproof.MaxLen
)

// Validate rejects a decision that cannot be acted on, saying how to fix it.
func (d ReviewDecision) Validate() error { return d.validate(true) }

// validate is Validate, leaving out the placeholder check for decisions
// accepted before it (see versionPlaceholders).
func (d ReviewDecision) validate(placeholders bool) error {
	var errs []error
	limit := func(name, value string, max int) {
		if len(value) > max {
			errs = append(errs, fmt.Errorf("%s: %d bytes is over the limit of %d; shorten it", name, len(value), max))
		}
	}
	limit("decision", d.Decision, MaxDecisionLen)
	limit("reviewer", d.Reviewer, MaxReviewerLen)
	limit("resource_id", d.ResourceID, MaxResourceIDLen)
	limit("note", d.Note, MaxNoteLen)
	limit("batch_job", d.BatchJob, MaxBatchJobLen)
	limit("proof", d.Proof, MaxProofLen)
	if len(errs) > 0 {
		return errors.Join(errs...) // the checks below would quote the long value
	}
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
	if placeholders {
		errs = append(errs, d.Placeholders())
	}
	return errors.Join(errs...)
}

// ReviewPlaceholders are what the review commands and the update template
// show for a reviewer to fill in: marked as <…> now, so a shell refuses
// them, and bare before that.
var ReviewPlaceholders = []string{"<ID-YOU-FOUND>", "<YOUR-NAME>", "ID", "NAME", "TEXT"}

// IsPlaceholder: v is a placeholder a command Courier shows asks to fill
// in (a name, an id), pasted unchanged.
func IsPlaceholder(v string) bool {
	v = strings.TrimSpace(v)
	return slices.Contains(ReviewPlaceholders, v) || len(v) > 2 && strings.HasPrefix(v, "<") && strings.HasSuffix(v, ">")
}

// Placeholders names each field of d that still holds a placeholder the
// reviewer was to replace; nil when none does.
func (d ReviewDecision) Placeholders() error {
	var errs []error
	if IsPlaceholder(d.ResourceID) {
		errs = append(errs, fmt.Errorf("resource_id: %q is the review command's placeholder: put the id of the effect you found at the destination", d.ResourceID))
	}
	if IsPlaceholder(d.Reviewer) {
		errs = append(errs, fmt.Errorf("reviewer: %q is the review command's placeholder: put your own name", d.Reviewer))
	}
	return errors.Join(errs...)
}

// Excerpt is d cut to the field limits, for recording a decision that broke
// them; a cut field ends in "…". The proof is left out: the history's
// signal or update holds it, and the record holds what it proved.
func (d ReviewDecision) Excerpt() ReviewDecision {
	return ReviewDecision{
		Decision:   text.Excerpt(d.Decision, MaxDecisionLen),
		Reviewer:   text.Excerpt(d.Reviewer, MaxReviewerLen),
		Note:       text.Excerpt(d.Note, MaxNoteLen),
		ResourceID: text.Excerpt(d.ResourceID, MaxResourceIDLen),
		BatchJob:   text.Excerpt(d.BatchJob, MaxBatchJobLen),
	}
}

// Review is the audit trail of a delivery's reviews.
type Review struct {
	// Evidence is why the delivery stopped: the attempt that left the
	// outcome unknown and what the contract allows.
	Evidence  string    `json:"evidence"`
	Requested time.Time `json:"requested"`
	Reminders int       `json:"reminders,omitempty"`
	// Decisions holds every accepted decision and the first ignored ones.
	Decisions []ReviewRecord `json:"decisions,omitempty"`
	// Ignored counts every decision ignored (invalid, not allowed, not
	// waiting, or not a decision at all); Dropped, those of them past the
	// first MaxIgnoredRecords, which Decisions and Events leave out.
	Ignored int `json:"ignored,omitempty"`
	Dropped int `json:"dropped,omitempty"`
}

// AcceptedDecisions counts the decisions the delivery acted on; nil has none.
func (r *Review) AcceptedDecisions() int {
	n := 0
	if r != nil {
		for _, rec := range r.Decisions {
			if rec.Accepted {
				n++
			}
		}
	}
	return n
}

// MaxIgnoredRecords is how many ignored decisions a delivery records in
// full; the rest are only counted, so a flood of bad signals costs bounded
// space.
const MaxIgnoredRecords = 10

// ReviewRecord is one decision received, accepted or ignored.
type ReviewRecord struct {
	ReviewDecision
	Received time.Time `json:"received"`
	Via      string    `json:"via"` // signal or update
	Accepted bool      `json:"accepted"`
	Reason   string    `json:"reason,omitempty"` // why it was ignored
	// Principal is who the decision's proof proves decided (the key id),
	// and Policy the rule of the recorded reviewers that allowed it; both
	// empty where the reviewers have no keys.
	Principal string `json:"principal,omitempty"`
	Policy    string `json:"policy,omitempty"`
	// SignedJob: the proof was a batch job's, verified by this delivery
	// against the job's filter (courier review --all --key).
	SignedJob bool `json:"signed_job,omitempty"`
	// Repeats counts how often an accepted batch job's decision arrived
	// again (the job retried, or was sent again): counted once, never
	// acted on twice, neither accepted nor ignored.
	Repeats int `json:"repeats,omitempty"`
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
	// Error says why a delivery ended without delivering (rejected, conflict,
	// attempt_limit: the last cause).
	Error string `json:"error,omitempty"`
}

// StateOr is the state a delivery reports: once finished, its final status
// is its state; while it runs, the state it is in.
func (r DeliveryResult) StateOr(running State) State {
	if r.Status != "" {
		return State(r.Status)
	}
	return running
}

// LeftNoEffect reports whether this finished delivery provably applied
// nothing, so the operation may run again (contract.RunLeftNoEffect).
func (r DeliveryResult) LeftNoEffect() bool {
	return r.LeftNoEffectIf(r.Status)
}

// FirstApplying is when the first attempt that may have applied the
// operation started (zero if none did): a key destination remembers the key
// from then on.
func (r DeliveryResult) FirstApplying() time.Time {
	for _, at := range r.Attempts {
		if !at.Class.NothingApplied() {
			return at.Started
		}
	}
	return time.Time{}
}

// LeftNoEffectIf is LeftNoEffect for this delivery had it ended in st.
func (r DeliveryResult) LeftNoEffectIf(st Status) bool {
	classes := make([]contract.Class, len(r.Attempts))
	for i, a := range r.Attempts {
		classes[i] = a.Class
	}
	return contract.RunLeftNoEffect(string(st), classes)
}

// DeliverRequest is the deliver update's argument.
type DeliverRequest struct {
	// Fingerprint of the caller's payload: another one than the delivery's
	// is refused as a conflict, before anything is recorded.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Payload, instead of Fingerprint, is the caller's payload as its SDK
	// sends it: the workflow fingerprints it as it does its input.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Caller is a token the caller makes up; a Settled whose Starter is the
	// caller's own token means this caller's request started the delivery.
	Caller string `json:"caller,omitempty"`
	// Brief asks for a brief answer once the delivery is final: its state,
	// status and starter. The run's result, which closes the run in the same
	// workflow task, holds the rest, so history carries it once; the caller
	// reads it there. Callers of one payload share an update, so brief
	// callers use their own update ID (BriefDeliverUpdateID), which names
	// the payload: a brief request may leave Fingerprint and Payload out.
	Brief bool `json:"brief,omitempty"`
}

// Settled is the deliver update's answer: the delivery's status once it is
// final or parked for review.
type Settled struct {
	DeliveryStatus
	// Starter is the Caller of the delivery's first deliver update: the one
	// that came with its start when it was started with Update-with-Start.
	Starter string `json:"starter,omitempty"`
	// Brief: the answer a brief request asked for, of a final delivery;
	// the run's result holds the rest of its status.
	Brief bool `json:"brief,omitempty"`
}

// MarshalJSON writes a brief answer with only what it promises.
func (s Settled) MarshalJSON() ([]byte, error) {
	if !s.Brief {
		type whole Settled // without this method
		return json.Marshal(whole(s))
	}
	return json.Marshal(struct {
		State   State  `json:"state"`
		Status  Status `json:"status"`
		Starter string `json:"starter,omitempty"`
		Brief   bool   `json:"brief"`
	}{s.State, s.Status, s.Starter, true})
}

// DeliveryStatus is the answer to query "status".
type DeliveryStatus struct {
	State     State           `json:"state"`
	Operation opkey.Operation `json:"operation"`
	// Hold is why a paused or circuit_open delivery waits.
	Hold *activities.Hold `json:"hold,omitempty"`
	// Ended, for a run the server terminated or timed out, says which run
	// and when; the rest is what the run had recorded by then.
	Ended *RunEnded `json:"ended,omitempty"`
	// KeyedReviewers names the recorded reviewers when they have keys
	// ("legacy's reviewers"): decisions must then be signed.
	KeyedReviewers string `json:"keyed_reviewers,omitempty"`
	DeliveryResult
}

// RunEnded is how the server ended a run that could not record it itself.
type RunEnded struct {
	RunID  string    `json:"run_id"`
	How    Status    `json:"how"` // terminated or timed_out
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}
