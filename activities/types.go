package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/reviewproof"
)

// Error types the workflow can tell apart.
const (
	// ErrUnknownDestination: the worker has no adapter for the destination.
	ErrUnknownDestination = "UnknownDestination"
	// ErrLookupUnreadable: a lookup's answer could not be read as the
	// destination declares, so it says neither found nor not found.
	ErrLookupUnreadable = "LookupUnreadable"
	// ErrNotIdentified: the request carried a key or fingerprint that its
	// operation and payload do not derive.
	ErrNotIdentified = "NotIdentified"
)

// ErrUnreadable is destination.ErrUnreadable.
var ErrUnreadable = destination.ErrUnreadable

// Where a receipt came from (destination's Source*).
const (
	SourceCreated  = destination.SourceCreated
	SourceReplayed = destination.SourceReplayed
	SourceLookup   = destination.SourceLookup
	SourceReview   = destination.SourceReview
)

// Request is one attempt's input. It carries the payload, never a
// credential.
type Request struct {
	// Key and Fingerprint are what the operation and payload derive: the
	// worker derives them (Identify), so the workflow leaves them out of
	// history, where its input holds what they derive from. A request that
	// carries them (an older run's) must carry the derived ones.
	Key         string          `json:"key,omitempty"`
	Fingerprint string          `json:"fingerprint,omitempty"`
	Tenant      string          `json:"tenant,omitempty"`
	Destination string          `json:"destination"`
	Operation   string          `json:"operation"`
	BusinessID  string          `json:"business_id"`
	Payload     json.RawMessage `json:"payload"`
	Attempt     int             `json:"attempt"`
	// Contract is the one the delivery recorded with its first attempt.
	// The first attempt leaves it out and runs under the worker's current
	// contract, which its Outcome then carries into history.
	Contract *contract.Contract `json:"contract,omitempty"`
	// EarlierRunsChecked: an earlier attempt of this run (not a reset)
	// found no earlier run that stops it, so this one need not look again.
	// The workflow derives it from its recorded outcomes, never from what
	// a caller set.
	EarlierRunsChecked bool `json:"earlier_runs_checked,omitempty"`
	// AcknowledgedRuns are earlier runs a reviewer has seen and, deciding
	// retry, allowed this run to send past.
	AcknowledgedRuns []string `json:"acknowledged_runs,omitempty"`
	// Released: the destination's gate has just released the delivery, so
	// the attempt reads the gate afresh rather than from a worker's copy.
	Released bool `json:"released,omitempty"`
	// TermsByDigest: a created or replayed attempt names its terms by
	// digest instead of carrying them (Outcome.TermsDigest): no decision
	// reads them there. Workflow code from before it reads terms in full.
	TermsByDigest bool `json:"terms_by_digest,omitempty"`
	// MayHaveApplied: an earlier attempt of this run may have applied the
	// effect (the workflow derives it from its recorded attempts). At a
	// lookup destination the attempt then looks the effect up before it
	// sends again.
	MayHaveApplied bool `json:"may_have_applied,omitempty"`
}

// Identify fills in the key and fingerprint the request's operation and
// payload derive, and refuses a request that carries others.
func (r *Request) Identify() error {
	key := opkey.Key(opkey.Operation{Tenant: r.Tenant, Destination: r.Destination, Operation: r.Operation, BusinessID: r.BusinessID})
	fp, err := opkey.Fingerprint(r.Payload)
	switch {
	case err != nil:
		return fmt.Errorf("payload: %w", err)
	case r.Key != "" && r.Key != key:
		return fmt.Errorf("key %s is not its operation's (%s)", r.Key, key)
	case r.Fingerprint != "" && r.Fingerprint != fp:
		return fmt.Errorf("fingerprint %s is not its payload's (%s)", r.Fingerprint, fp)
	}
	r.Key, r.Fingerprint = key, fp
	return nil
}

// Attempted is what the adapter is given: the attempt under its recorded
// contract, which prepare has set.
func (r Request) Attempted() destination.Request {
	d := destination.Request{Key: r.Key, Fingerprint: r.Fingerprint, Tenant: r.Tenant, Destination: r.Destination,
		Operation: r.Operation, BusinessID: r.BusinessID, Payload: r.Payload, Attempt: r.Attempt}
	if r.Contract != nil {
		d.Contract = *r.Contract
	}
	return d
}

// Receipt is destination.Receipt: what the destination returned for the effect.
type Receipt = destination.Receipt

// Read is destination.Read, for the probe.
type Read = destination.Read

// Outcome is one attempt's classified result. An adapter always returns one:
// transport failures are facts to classify, not activity errors.
type Outcome struct {
	Class      contract.Class `json:"class"`
	StatusCode int            `json:"status_code,omitempty"`
	Receipt    *Receipt       `json:"receipt,omitempty"`
	Error      string         `json:"error,omitempty"`
	// RetryAfter is the destination's own pacing (Retry-After), if any.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Terms are what the attempt ran under, when the request carried no
	// contract: the delivery records them with its first attempt and
	// decides from them.
	Terms *Terms `json:"terms,omitempty"`
	// TermsDigest names those terms instead (Terms.Digest), where the
	// request allowed it and the class decides alike under any contract
	// (created, replayed).
	TermsDigest string `json:"terms_digest,omitempty"`
	// EarlierRuns, with class earlier_run, are the runs that stopped it.
	EarlierRuns []EarlierRun `json:"earlier_runs,omitempty"`
	// EarlierRunsChecked: the attempt looked at the workflow ID's earlier
	// runs and none stopped it.
	EarlierRunsChecked bool `json:"earlier_runs_checked,omitempty"`
	// Hold, with class held, is why nothing was sent.
	Hold *Hold `json:"hold,omitempty"`
	// Reads show how the answer was read, for the probe.
	Reads []Read `json:"-"`
}

// Hold is why an attempt was not sent: its destination is paused or its
// breaker open.
type Hold struct {
	State  string    `json:"state"` // paused or circuit_open, the delivery's state while held
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	// Until is when to look again; zero: when released.
	Until time.Time `json:"until,omitzero"`
}

// Gate holds attempts back while a destination is paused or its breaker is
// open, across every worker; the worker implements it over Temporal.
type Gate interface {
	// Admit returns nil when an attempt with this key may be sent now;
	// probe, when it goes as the breaker's one probe attempt. fresh reads
	// the gate itself, not a copy.
	Admit(ctx context.Context, destination, key string, fresh bool) (hold *Hold, probe bool, err error)
	// Report tells the destination's breaker what an attempt found.
	Report(ctx context.Context, destination, key string, out Outcome)
	// Release tells the deliveries held at the destination to look again.
	Release(ctx context.Context, destination string) error
}

// GateNotice tells the notifier that a destination's gate changed.
type GateNotice struct {
	Destination string    `json:"destination"`
	State       string    `json:"state"`
	Since       time.Time `json:"since"`
	Why         string    `json:"why"`
}

// Terms are what a delivery takes from the worker's destinations file once,
// records in its history and decides from ever after: its destination's
// contract and who may review it.
type Terms struct {
	// Contract is nil when the worker has no such destination.
	Contract  *contract.Contract `json:"contract,omitempty"`
	Reviewers []string           `json:"reviewers,omitempty"`
	// Policy, when set, holds the reviewers' public keys and what each may
	// decide: every decision must then carry a proof that verifies against
	// it, and the names above are only display names.
	Policy *reviewproof.Policy `json:"policy,omitempty"`
}

// Digest names the terms: the first 16 hex digits of the SHA-256 of
// their JSON, as a worker resolves them from its destinations file, so
// every worker with the same file names them alike until they change.
func (t Terms) Digest() string {
	// Encoding plain data is deterministic (struct fields in order, map
	// keys sorted), though the check cannot tell: encoding/json works by
	// reflection.
	//workflowcheck:ignore
	b, _ := json.Marshal(t)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Reviewing is who may review at one destination.
type Reviewing struct {
	Names  []string
	Policy *reviewproof.Policy
}

// Signer is the key that signed a verified review decision, as the
// delivery's recorded policy holds it, for the workers' current file to
// confirm: a key removed from the file decides nothing more, not even for
// deliveries that recorded it.
type Signer struct {
	Key         string `json:"key"` // the delivery's
	Destination string `json:"destination"`
	Reviewer    string `json:"reviewer"` // the key id
	PublicKey   string `json:"public_key"`
	Decision    string `json:"decision"`
}

// EarlierRun is a finished run of the same workflow ID as the current one.
type EarlierRun struct {
	RunID  string    `json:"run_id"`
	Status string    `json:"status"` // the delivery's final status, or how the run closed
	Closed time.Time `json:"closed"`
	// FirstAttempt is when the run first wrote to the destination (zero if it
	// never did): a key destination remembers the key from then on.
	FirstAttempt time.Time `json:"first_attempt,omitzero"`
	// NothingApplied: the run provably left no effect (contract.RunLeftNoEffect).
	NothingApplied bool `json:"nothing_applied"`
}

func (r EarlierRun) String() string {
	return fmt.Sprintf("run %s (%s, closed %s)", r.RunID, r.Status, r.Closed.UTC().Format(time.RFC3339))
}

// Runs reads the earlier runs of a workflow ID; the worker implements it
// with its Temporal client.
type Runs interface {
	Earlier(ctx context.Context, workflowID, runID string) ([]EarlierRun, error)
}

// Found is destination.Found: a lookup's answer.
type Found = destination.Found

// Reminder asks reviewers again about a parked delivery.
type Reminder struct {
	Key         string `json:"key"`
	Destination string `json:"destination"`
	// Number is 0 when the delivery has just parked, then 1, 2, ... for
	// each reminder.
	Number     int    `json:"number,omitempty"`
	Tenant     string `json:"tenant,omitempty"`
	Operation  string `json:"operation,omitempty"`
	BusinessID string `json:"business_id,omitempty"`
	WorkflowID string `json:"workflow_id,omitempty"`
	// Namespace is filled in by the activity.
	Namespace string    `json:"namespace,omitempty"`
	Since     time.Time `json:"since"`
	// Reason is why it waits, in one line; Evidence, in full.
	Reason   string `json:"reason,omitempty"`
	Evidence string `json:"evidence"`
}
