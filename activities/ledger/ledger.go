// Package ledger is Courier's outcome ledger: one durable row per business
// operation's key, so a repeat is recognised after Temporal has dropped the
// workflow run that delivered it. The worker and the courier commands open
// it; nothing in workflow code may import it (it does I/O).
package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// acceptedForms ends every error about a URL that names no ledger.
const acceptedForms = "use sqlite:PATH (a SQLite file, for workers on one host) or postgres://... / postgresql://... (PostgreSQL, table courier_ledger.outcomes)"

// Open opens the ledger a URL names:
//
//	sqlite:PATH                            a SQLite file (created with its table when missing), for workers on one host
//	postgres://... or postgresql://...     PostgreSQL; the table lives in schema courier_ledger
//
// Anything else is an error that says which forms are accepted. SQLite's
// folder must exist (a missing one is more likely a typo than a wish).
// PostgreSQL's table must exist: Open does not create it, since a worker's
// database role may lack the rights to; Init (courier ledger init) does.
func Open(ctx context.Context, url string) (Store, error) {
	t, err := parse(url)
	if err != nil {
		return nil, err
	}
	s, err := t.connect()
	if err != nil {
		return nil, err
	}
	if t.driver == driverSQLite {
		err = s.create(ctx)
	} else {
		err = s.check(ctx)
	}
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// Init creates what the ledger needs in the database the URL names (schema
// and table), idempotently: the setup step of a deployment runs it (courier
// ledger init), as Temporal's own schema tool sets up its databases.
func Init(ctx context.Context, url string) error {
	t, err := parse(url)
	if err != nil {
		return err
	}
	s, err := t.connect()
	if err != nil {
		return err
	}
	return errors.Join(s.create(ctx), s.Close())
}

// missingTableError is what Open says when PostgreSQL lacks the table: how
// to fix it, since the usual cause is a deployment that skipped its setup.
func missingTableError(where string) error {
	return fmt.Errorf("ledger: table %s is missing in %s: create it with `courier ledger init --ledger URL` (or deploy/postgres/init.sql)", pgTable, where)
}

// scrubber hides a URL's secrets in a driver's error text. The driver is
// given a URL that already parsed, which its own redaction handles, so this
// is the second line: should a password still show, it is replaced, even
// where the same letters are something else (a user named like its
// password reads "user=xxxxx").
type scrubber struct{ r *strings.Replacer }

func (s scrubber) wrap(err error) error {
	if err == nil || s.r == nil {
		return err
	}
	return &scrubbedError{err: err, text: s.r.Replace(err.Error())}
}

// scrubbedError keeps the driver's error for errors.Is and errors.As while
// its text is the scrubbed one.
type scrubbedError struct {
	err  error
	text string
}

func (e *scrubbedError) Error() string { return e.text }
func (e *scrubbedError) Unwrap() error { return e.err }
