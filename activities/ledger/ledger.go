// Package ledger is what Courier's outcome ledger holds: one durable row per
// business operation's key, so a repeat is recognised after Temporal has
// dropped the workflow run that delivered it. It names the row and the
// store and does no I/O; package sqlstore keeps them in SQLite or
// PostgreSQL. The activities read and write it; the worker and the courier
// commands open a store.
package ledger

import (
	"context"
	"time"
)

// StatusPending is the status a row holds besides a delivery's final
// statuses ("created", "duplicate", "delivered_by_review", "abandoned", ...),
// which are stored as given.
const StatusPending = "pending" // an attempt of RunID may have applied the effect; its outcome is not known yet

// Entry is one business operation's outcome as Courier's workers recorded it.
type Entry struct {
	Key          string    `json:"key"`                     // the operation's idempotency key (a UUID string); primary key
	Fingerprint  string    `json:"fingerprint"`             // SHA-256 hex of the payload
	Status       string    `json:"status"`                  // StatusPending or a delivery's final status
	Destination  string    `json:"destination"`             // the destination's name
	Receipt      []byte    `json:"receipt,omitempty"`       // opaque: the receipt as the worker encodes it (JSON, or ciphertext when the payload codec is on); the package never parses it. nil and empty are kept apart.
	WorkflowID   string    `json:"workflow_id"`             // the workflow that delivered it
	RunID        string    `json:"run_id"`                  // the run that decided it (or whose attempt is pending)
	Principal    string    `json:"principal,omitempty"`     // the verified principal of the review that decided it
	FirstAttempt time.Time `json:"first_attempt,omitempty"` // when the first attempt that may have applied it began; zero if none
	Recorded     time.Time `json:"recorded"`                // when this row was last written (set by Put from the store's clock if zero)
}

// Store is the ledger. Several worker processes share one.
//
// Times are kept to the microsecond (PostgreSQL's precision, applied to
// SQLite too so both behave alike): Put truncates them, and Get returns them
// in UTC, so a Get returns what was Put up to that.
type Store interface {
	// Get reads the key's row; ok is false when there is none.
	Get(ctx context.Context, key string) (e Entry, ok bool, err error)
	// Put writes e as the key's row, replacing any.
	Put(ctx context.Context, e Entry) error
	// DeletePending removes the key's row only when it is still StatusPending
	// and written by runID (an attempt that applied nothing undoes its own
	// mark); it reports whether a row was removed.
	DeletePending(ctx context.Context, key, runID string) (bool, error)
	// Purge removes rows recorded before t (the ledger's retention) and says how many.
	Purge(ctx context.Context, before time.Time) (int64, error)
	// Where says what the store is, for logs and errors, without credentials:
	// e.g. "sqlite .courier/ledger.db", "postgres 127.0.0.1:5432/courier (schema courier_ledger)".
	Where() string
	Close() error
}
