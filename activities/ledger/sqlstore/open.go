package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/abde64c9/courier/activities/ledger"
)

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
func Open(ctx context.Context, url string) (ledger.Store, error) {
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
