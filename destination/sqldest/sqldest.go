// Package sqldest is the unique-commit SQL destination: the effect is a row
// whose primary key is the delivery's key, inserted and committed in one
// transaction. The database's UNIQUE constraint, not Courier's memory, is what
// turns a retry after a lost answer into a replay instead of a second effect.
// The worker opens it; the lab reads its tables to count effects.
//
// Each attempt ends in exactly one class:
//
//	COMMIT succeeded                            created: receipt {result-<key>, "created"}
//	unique violation on key, same fingerprint   replayed: the original receipt, Replayed true
//	unique violation on key, other fingerprint  conflict: the key was used with another payload
//	error before COMMIT was sent (rolled back)  not_sent
//	error from COMMIT, or a deadline during it  unknown_outcome: the row may or may not exist
//
// The resource id of an effect is "result-" + key. It is derived, not
// generated, so the row holds the same id a replay returns, and it is unique
// because the key is. (The lab seeds write it the same way.)
//
// Drivers: "sqlite" (modernc.org/sqlite, pure Go; DSN a file path or file: URI)
// and "pgx" (github.com/jackc/pgx/v5/stdlib; DSN a postgres:// URL).
package sqldest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers driver "pgx"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/internal/redact"
)

// StatusCreated is the receipt status of every effect this adapter stores.
const StatusCreated = "created"

// Adapter delivers to one SQL destination. It is safe for concurrent use.
type Adapter struct {
	name    string
	table   string
	db      *sql.DB
	timeout time.Duration
	q       queries
	// red redacts the worker's secrets from driver errors: a connection
	// error may quote the DSN, password included.
	red *redact.Redactor
}

var _ destination.Adapter = (*Adapter)(nil)

// Row is one stored effect, as read back from the table.
type Row struct {
	Key         string          `json:"key"`
	Fingerprint string          `json:"fingerprint"`
	Tenant      string          `json:"tenant"`
	Destination string          `json:"destination"`
	Operation   string          `json:"operation"`
	BusinessID  string          `json:"business_id"`
	Payload     json.RawMessage `json:"payload"`
	ResourceID  string          `json:"resource_id"`
	CreatedAt   time.Time       `json:"created_at"`
}

// Close releases the database connections.
func (a *Adapter) Close() error {
	if err := a.db.Close(); err != nil {
		return fmt.Errorf("sqldest %q: close: %w", a.name, err)
	}
	return nil
}

// Deliver makes one attempt: insert the effect row and commit, in one
// transaction, then classify what happened (see the package comment).
func (a *Adapter) Deliver(ctx context.Context, req destination.Request) destination.Outcome {
	out := a.deliver(ctx, req)
	out.Error = a.red.String(out.Error)
	return out
}

func (a *Adapter) deliver(ctx context.Context, req destination.Request) destination.Outcome {
	if req.Key == "" || req.Fingerprint == "" {
		return destination.Outcome{Class: contract.ClassRejected,
			Error: "request without key or fingerprint: nothing was sent"}
	}
	ctx, cancel := a.attemptContext(ctx, req)
	defer cancel()

	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return notSent(fmt.Errorf("begin transaction: %w", err))
	}
	_, err = tx.ExecContext(ctx, a.q.insert, insertArgs(req)...)
	if err != nil {
		_ = tx.Rollback() // the insert failed: nothing of this attempt can commit
		if isUniqueViolation(err) {
			return a.existing(ctx, req)
		}
		return notSent(fmt.Errorf("insert key %s: %w", req.Key, err))
	}
	// Past its deadline database/sql rolls the transaction back on its own
	// and Commit would return the context's error without sending COMMIT;
	// say so here rather than report that as an unknown outcome.
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback()
		return notSent(fmt.Errorf("before commit of key %s: %w", req.Key, err))
	}
	if err := tx.Commit(); err != nil {
		// COMMIT was sent: the database may have applied it even though we
		// got an error (connection reset, deadline while waiting).
		return destination.Outcome{Class: contract.ClassUnknown,
			Error: fmt.Errorf("commit of key %s, the row may or may not be stored: %w", req.Key, err).Error()}
	}
	return destination.Outcome{Class: contract.ClassCreated, Receipt: receipt(resourceID(req.Key), false)}
}

// existing classifies a unique violation on the key by the row already
// stored under it. This attempt stored nothing, so if the row cannot be read
// a retry is safe: not_sent.
func (a *Adapter) existing(ctx context.Context, req destination.Request) destination.Outcome {
	row, found, err := a.row(ctx, req.Key)
	switch {
	case err != nil:
		return notSent(fmt.Errorf("key %s is already stored, but reading its row failed: %w", req.Key, err))
	case !found:
		return notSent(fmt.Errorf("insert of key %s hit a unique constraint, yet no row has that key", req.Key))
	case row.Fingerprint != req.Fingerprint:
		return destination.Outcome{Class: contract.ClassConflict,
			Error: fmt.Sprintf("key %s was already used with another payload (stored fingerprint %s, this request %s)",
				req.Key, row.Fingerprint, req.Fingerprint)}
	}
	return destination.Outcome{Class: contract.ClassReplayed, Receipt: receipt(row.ResourceID, true)}
}

// Lookup finds the effect stored under the request's key. It does not compare
// fingerprints: it answers whether an effect exists, as the interface asks.
func (a *Adapter) Lookup(ctx context.Context, req destination.Request) (destination.Found, error) {
	ctx, cancel := a.attemptContext(ctx, req)
	defer cancel()
	row, found, err := a.row(ctx, req.Key)
	if err != nil {
		return destination.Found{}, a.red.Error(err)
	}
	if !found {
		return destination.Found{}, nil
	}
	return destination.Found{Found: true, Receipt: receipt(row.ResourceID, true)}, nil
}

// Count is how many effects the table really holds.
func (a *Adapter) Count(ctx context.Context) (int, error) {
	var n int
	if err := a.db.QueryRowContext(ctx, a.q.count).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqldest %q: count %s: %w", a.name, a.table, err)
	}
	return n, nil
}

// Rows returns every stored effect, oldest first.
func (a *Adapter) Rows(ctx context.Context) ([]Row, error) {
	rs, err := a.db.QueryContext(ctx, a.q.all)
	if err != nil {
		return nil, fmt.Errorf("sqldest %q: read %s: %w", a.name, a.table, err)
	}
	defer rs.Close()
	var out []Row
	for rs.Next() {
		r, err := scanRow(rs)
		if err != nil {
			return nil, fmt.Errorf("sqldest %q: read %s: %w", a.name, a.table, err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("sqldest %q: read %s: %w", a.name, a.table, err)
	}
	return out, nil
}

func (a *Adapter) row(ctx context.Context, key string) (Row, bool, error) {
	r, err := scanRow(a.db.QueryRowContext(ctx, a.q.byKey, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, false, nil
	}
	if err != nil {
		return Row{}, false, fmt.Errorf("sqldest %q: read key %s: %w", a.name, key, err)
	}
	return r, true, nil
}

// createdAtFormat is RFC 3339 with a fixed-width fraction, in UTC, so the
// column's text order is time order.
const createdAtFormat = "2006-01-02T15:04:05.000000000Z07:00"

func scanRow(s interface{ Scan(...any) error }) (Row, error) {
	var r Row
	var payload, created string
	if err := s.Scan(&r.Key, &r.Fingerprint, &r.Tenant, &r.Destination, &r.Operation,
		&r.BusinessID, &payload, &r.ResourceID, &created); err != nil {
		return Row{}, err
	}
	r.Payload = json.RawMessage(payload)
	t, err := time.Parse(createdAtFormat, created)
	if err != nil {
		return Row{}, fmt.Errorf("row %s: created_at: %w", r.Key, err)
	}
	r.CreatedAt = t
	return r, nil
}

// attemptContext bounds one attempt by the delivery's recorded timeout, or
// the configured one for a request whose contract sets none.
func (a *Adapter) attemptContext(ctx context.Context, req destination.Request) (context.Context, context.CancelFunc) {
	timeout := a.timeout
	if t := req.Contract.Retry.AttemptTimeout.D(); t > 0 {
		timeout = t
	}
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return context.WithCancel(ctx)
}

// resourceID is derived from the key: see the package comment.
func resourceID(key string) string { return "result-" + key }

// insertArgs are the values of columns, in order.
func insertArgs(req destination.Request) []any {
	payload := string(req.Payload)
	if payload == "" {
		payload = "null"
	}
	return []any{req.Key, req.Fingerprint, req.Tenant, req.Destination, req.Operation, req.BusinessID,
		payload, resourceID(req.Key), time.Now().UTC().Format(createdAtFormat)}
}

func receipt(resourceID string, replayed bool) *destination.Receipt {
	return &destination.Receipt{ResourceID: resourceID, Status: StatusCreated, Replayed: replayed}
}

func notSent(err error) destination.Outcome {
	return destination.Outcome{Class: contract.ClassNotSent, Error: err.Error()}
}

// pgUniqueViolation is PostgreSQL's SQLSTATE unique_violation.
const pgUniqueViolation = "23505"

// isUniqueViolation reports a duplicate key from either driver. SQLite's
// extended codes are on: modernc enables them on every connection.
func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgUniqueViolation
}
