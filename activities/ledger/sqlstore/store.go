package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/abde64c9/courier/activities/ledger"
)

const (
	pgSchema    = "courier_ledger"
	pgTable     = pgSchema + ".outcomes"
	sqliteTable = "outcomes" // the file is the ledger: no schema needed
)

// PostgresSchema creates the ledger's schema, table and index in
// PostgreSQL, idempotently. Init runs it; deploy/postgres/init.sql holds the
// same for deployments that set their database up by hand.
const PostgresSchema = `CREATE SCHEMA IF NOT EXISTS courier_ledger;

CREATE TABLE IF NOT EXISTS courier_ledger.outcomes (
	key           TEXT PRIMARY KEY,
	fingerprint   TEXT NOT NULL,
	status        TEXT NOT NULL,
	destination   TEXT NOT NULL,
	receipt       BYTEA,
	workflow_id   TEXT NOT NULL,
	run_id        TEXT NOT NULL,
	principal     TEXT NOT NULL DEFAULT '',
	first_attempt TIMESTAMPTZ,
	recorded      TIMESTAMPTZ NOT NULL
);

CREATE INDEX IF NOT EXISTS outcomes_recorded ON courier_ledger.outcomes (recorded);
`

// sqliteSchema is the same table in SQLite. Times are INTEGER Unix
// microseconds (UTC): exact, the precision PostgreSQL keeps, and ordered
// for Purge.
const sqliteSchema = `CREATE TABLE IF NOT EXISTS outcomes (
	key           TEXT PRIMARY KEY,
	fingerprint   TEXT NOT NULL,
	status        TEXT NOT NULL,
	destination   TEXT NOT NULL,
	receipt       BLOB,
	workflow_id   TEXT NOT NULL,
	run_id        TEXT NOT NULL,
	principal     TEXT NOT NULL DEFAULT '',
	first_attempt INTEGER,
	recorded      INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS outcomes_recorded ON outcomes (recorded);
`

// columns is the column list, in the order put binds and scan reads them.
var columns = []string{"key", "fingerprint", "status", "destination", "receipt",
	"workflow_id", "run_id", "principal", "first_attempt", "recorded"}

type sqlStore struct {
	db     *sql.DB
	driver string
	table  string
	where  string
	scrub  scrubber
	now    func() time.Time // the store's clock, for Recorded; tests replace it

	get, put, deletePending, purge, probe string
}

func newSQLStore(db *sql.DB, t target) *sqlStore {
	s := &sqlStore{db: db, driver: t.driver, where: t.where, scrub: t.scrub, now: time.Now}
	ph := func(int) string { return "?" }
	s.table = sqliteTable
	if t.driver == driverPostgres {
		ph = func(n int) string { return "$" + strconv.Itoa(n) }
		s.table = pgTable
	}
	cols := strings.Join(columns, ", ")
	var vals, sets []string
	for i, c := range columns {
		vals = append(vals, ph(i+1))
		if c != "key" {
			sets = append(sets, c+" = excluded."+c)
		}
	}
	s.get = "SELECT " + cols + " FROM " + s.table + " WHERE key = " + ph(1)
	s.put = "INSERT INTO " + s.table + " (" + cols + ") VALUES (" + strings.Join(vals, ", ") +
		") ON CONFLICT (key) DO UPDATE SET " + strings.Join(sets, ", ")
	s.deletePending = "DELETE FROM " + s.table + " WHERE key = " + ph(1) +
		" AND status = '" + ledger.StatusPending + "' AND run_id = " + ph(2)
	s.purge = "DELETE FROM " + s.table + " WHERE recorded < " + ph(1)
	s.probe = "SELECT " + cols + " FROM " + s.table + " WHERE 1 = 0"
	return s
}

func (s *sqlStore) Where() string { return s.where }

func (s *sqlStore) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("ledger: close %s: %w", s.where, s.scrub.wrap(err))
	}
	return nil
}

// create makes the table (and, in PostgreSQL, its schema), then checks it.
func (s *sqlStore) create(ctx context.Context) error {
	ddl := sqliteSchema
	if s.driver == driverPostgres {
		ddl = PostgresSchema
	}
	if _, err := s.db.ExecContext(ctx, ddl); err != nil {
		// Two processes creating at once can race in PostgreSQL's IF NOT
		// EXISTS (a unique violation in its catalog); the loser's second
		// try finds what the winner made.
		if _, err2 := s.db.ExecContext(ctx, ddl); err2 != nil {
			// A table of another shape fails the index; say that rather
			// than the index's complaint (unless the database is unreachable).
			if perr := s.probeColumns(ctx); perr != nil && s.db.PingContext(ctx) == nil {
				return perr
			}
			return fmt.Errorf("ledger: create table %s in %s: %w", s.table, s.where, s.scrub.wrap(errors.Join(err, err2)))
		}
	}
	return s.probeColumns(ctx)
}

// check makes sure PostgreSQL has the table, saying how to create it if not.
func (s *sqlStore) check(ctx context.Context) error {
	var reg sql.NullString
	if err := s.db.QueryRowContext(ctx, "SELECT to_regclass('"+pgTable+"')::text").Scan(&reg); err != nil {
		return fmt.Errorf("ledger: connect to %s: %w", s.where, s.scrub.wrap(err))
	}
	if !reg.Valid {
		return missingTableError(s.where)
	}
	return s.probeColumns(ctx)
}

// probeColumns reads no row but names every column: a table of an older or
// foreign shape, or one the role may not read, fails here rather than at the
// first delivery.
func (s *sqlStore) probeColumns(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, s.probe)
	if err != nil {
		return fmt.Errorf("ledger: table %s in %s does not have the ledger's columns (%s) or cannot be read: %w",
			s.table, s.where, strings.Join(columns, ", "), s.scrub.wrap(err))
	}
	return rows.Close()
}

func (s *sqlStore) Get(ctx context.Context, key string) (ledger.Entry, bool, error) {
	var (
		e                        ledger.Entry
		receipt, first, recorded any
	)
	err := s.db.QueryRowContext(ctx, s.get, key).Scan(&e.Key, &e.Fingerprint, &e.Status, &e.Destination, &receipt,
		&e.WorkflowID, &e.RunID, &e.Principal, &first, &recorded)
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Entry{}, false, nil
	}
	if err == nil {
		e.Receipt, err = bytesOf(receipt)
	}
	if err == nil {
		e.FirstAttempt, err = timeOf(first)
	}
	if err == nil {
		e.Recorded, err = timeOf(recorded)
	}
	if err != nil {
		return ledger.Entry{}, false, fmt.Errorf("ledger: get %q from %s: %w", key, s.where, s.scrub.wrap(err))
	}
	return e, true, nil
}

func (s *sqlStore) Put(ctx context.Context, e ledger.Entry) error {
	if e.Key == "" {
		return fmt.Errorf("ledger: put into %s: the entry has no key", s.where)
	}
	if e.Recorded.IsZero() {
		e.Recorded = s.now()
	}
	// An untyped nil is NULL; a non-nil empty receipt is stored as an empty
	// BLOB/BYTEA, so Get keeps the two apart.
	var receipt any
	if e.Receipt != nil {
		receipt = e.Receipt
	}
	first, err := s.timeArg(e.FirstAttempt, true)
	if err != nil {
		return fmt.Errorf("ledger: put %q into %s: first_attempt: %w", e.Key, s.where, err)
	}
	recorded, err := s.timeArg(e.Recorded, false)
	if err != nil {
		return fmt.Errorf("ledger: put %q into %s: recorded: %w", e.Key, s.where, err)
	}
	if _, err := s.db.ExecContext(ctx, s.put, e.Key, e.Fingerprint, e.Status, e.Destination, receipt,
		e.WorkflowID, e.RunID, e.Principal, first, recorded); err != nil {
		return fmt.Errorf("ledger: put %q into %s: %w", e.Key, s.where, s.scrub.wrap(err))
	}
	return nil
}

func (s *sqlStore) DeletePending(ctx context.Context, key, runID string) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.deletePending, key, runID)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return false, fmt.Errorf("ledger: delete pending %q of run %q from %s: %w", key, runID, s.where, s.scrub.wrap(err))
	}
	return n > 0, nil
}

func (s *sqlStore) Purge(ctx context.Context, before time.Time) (int64, error) {
	t, err := s.timeArg(before, false)
	if err != nil {
		return 0, fmt.Errorf("ledger: purge %s: %w", s.where, err)
	}
	res, err := s.db.ExecContext(ctx, s.purge, t)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: purge rows recorded before %s from %s: %w", before.UTC().Format(time.RFC3339Nano), s.where, s.scrub.wrap(err))
	}
	return n, nil
}

// timeArg is t as the driver stores it: truncated to the microsecond, in
// UTC; nil (NULL) for a zero t when nullable. Years outside 1-9999 are
// refused: PostgreSQL and SQLite would disagree on them, and none is a
// delivery's time.
func (s *sqlStore) timeArg(t time.Time, nullable bool) (any, error) {
	if t.IsZero() && nullable {
		return nil, nil
	}
	t = t.UTC().Truncate(time.Microsecond)
	if y := t.Year(); y < 1 || y > 9999 {
		return nil, fmt.Errorf("time %s: outside years 1-9999", t.Format(time.RFC3339Nano))
	}
	if s.driver == driverSQLite {
		return t.UnixMicro(), nil
	}
	return t, nil
}

// timeOf reads a time column: Unix microseconds from SQLite, a time from
// PostgreSQL, NULL as the zero time.
func timeOf(v any) (time.Time, error) {
	switch v := v.(type) {
	case nil:
		return time.Time{}, nil
	case int64:
		return time.UnixMicro(v).UTC(), nil
	case time.Time:
		return v.UTC(), nil
	default:
		return time.Time{}, fmt.Errorf("a time column holds %T", v)
	}
}

// bytesOf reads the receipt, keeping NULL (nil) apart from empty.
func bytesOf(v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		return append([]byte{}, v...), nil
	case string:
		return []byte(v), nil
	default:
		return nil, fmt.Errorf("the receipt column holds %T", v)
	}
}
