package sqldest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/redact"
	"github.com/abde64c9/courier/internal/sqlitedsn"
)

// DefaultTable is the table used when the destination names none.
const DefaultTable = "courier_effects"

// openTimeout bounds connecting, creating the table and checking its key.
const openTimeout = 30 * time.Second

// identifier is a plain, unquoted SQL identifier; the table name is spliced
// into statements, so nothing else is accepted. 63 bytes is PostgreSQL's limit.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// columns is the shared column list, in the order scanRow reads them.
const columns = "key, fingerprint, tenant, destination, operation, business_id, payload, resource_id, created_at"

type queries struct {
	insert, byKey, count, all string
}

// $n placeholders work for both drivers: modernc binds $1 to the first argument.
func queriesFor(table string) queries {
	return queries{
		insert: "INSERT INTO " + table + " (" + columns + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
		byKey:  "SELECT " + columns + " FROM " + table + " WHERE key = $1",
		count:  "SELECT COUNT(*) FROM " + table,
		all:    "SELECT " + columns + " FROM " + table + " ORDER BY created_at, key",
	}
}

// createTable is one DDL for both drivers. created_at is RFC 3339 text written
// by Courier, so both read back the same value. keyConstraint is
// "PRIMARY KEY" for the adapter; the demonstration of a table without a key
// passes "NOT NULL".
func createTable(table, keyConstraint string) string {
	return "CREATE TABLE IF NOT EXISTS " + table + ` (
	key TEXT ` + keyConstraint + `,
	fingerprint TEXT NOT NULL,
	tenant TEXT NOT NULL,
	destination TEXT NOT NULL,
	operation TEXT NOT NULL,
	business_id TEXT NOT NULL,
	payload TEXT NOT NULL,
	resource_id TEXT NOT NULL,
	created_at TEXT NOT NULL
)`
}

// Open connects to the destination's database, creates its table if missing
// and checks that the table really rejects a repeated key: a table without
// that constraint would turn every retry into a second effect, so it is an
// error here rather than a surprise later. red (nil: none) redacts the
// worker's secrets from its errors.
func Open(name string, d destinations.Destination, red *redact.Redactor) (*Adapter, error) {
	table, err := tableName(d)
	if err != nil {
		return nil, fmt.Errorf("sqldest %q: %w", name, err)
	}
	db, err := openDB(d)
	if err != nil {
		return nil, fmt.Errorf("sqldest %q: %w", name, red.Error(err))
	}
	a := &Adapter{name: name, table: table, db: db, timeout: d.Contract.Retry.AttemptTimeout.D(), q: queriesFor(table), red: red}

	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	if err := a.setup(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqldest %q: %w", name, red.Error(err))
	}
	return a, nil
}

func (a *Adapter) setup(ctx context.Context) error {
	ddl := createTable(a.table, "PRIMARY KEY")
	if _, err := a.db.ExecContext(ctx, ddl); err != nil {
		// Two workers starting together can race in PostgreSQL's CREATE TABLE
		// IF NOT EXISTS (a unique violation in its catalog); the loser's
		// second try finds the table.
		if _, err2 := a.db.ExecContext(ctx, ddl); err2 != nil {
			return fmt.Errorf("create table %s: %w", a.table, errors.Join(err, err2))
		}
	}
	return a.verifyUniqueKey(ctx)
}

// probeKey cannot collide with a real key: those are UUIDs.
const probeKey = "courier-open-probe"

// verifyUniqueKey inserts the same probe row twice in a transaction it then
// rolls back. The second insert must fail with a unique violation. This also
// checks that an existing table has every column the adapter writes.
func (a *Adapter) verifyUniqueKey(ctx context.Context) error {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("check table %s: %w", a.table, err)
	}
	defer func() { _ = tx.Rollback() }() // the probe must never be stored
	args := []any{probeKey, "probe", "", "", "", "", "null", "probe", time.Now().UTC().Format(createdAtFormat)}
	for range 2 {
		_, err := tx.ExecContext(ctx, a.q.insert, args...)
		if isUniqueViolation(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("check table %s: it does not take courier rows: %w", a.table, err)
		}
	}
	return fmt.Errorf("table %s has no UNIQUE constraint on column key: a retried delivery would store a second effect", a.table)
}

func tableName(d destinations.Destination) (string, error) {
	t := d.Table
	if t == "" {
		t = DefaultTable
	}
	if !identifier.MatchString(t) {
		return "", fmt.Errorf("table %q: must be a plain SQL identifier (letters, digits, _; not starting with a digit; at most 63)", t)
	}
	return t, nil
}

func openDB(d destinations.Destination) (*sql.DB, error) {
	if d.Adapter != "" && d.Adapter != destinations.AdapterSQL {
		return nil, fmt.Errorf("adapter %q: sqldest serves adapter %q", d.Adapter, destinations.AdapterSQL)
	}
	if d.DSN == "" {
		return nil, errors.New("dsn: required")
	}
	var driver, dsn string
	switch d.Driver {
	case "sqlite":
		driver, dsn = "sqlite", sqlitedsn.Shared(d.DSN)
	case "pgx":
		driver, dsn = "pgx", d.DSN
	default:
		return nil, fmt.Errorf("driver %q: use sqlite or pgx", d.Driver)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s database: %w", driver, err)
	}
	return db, nil
}
