package sandbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // registers the pure Go "sqlite" driver
)

// Record is one stored ticket.
type Record struct {
	TicketID  string          `json:"ticket_id"`
	Key       string          `json:"key,omitempty"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt time.Time       `json:"created_at"`
}

const schema = `
CREATE TABLE IF NOT EXISTS tickets (
	destination     TEXT    NOT NULL,
	seq             INTEGER NOT NULL,
	ticket_id       TEXT    NOT NULL,
	idempotency_key TEXT,
	payload         TEXT    NOT NULL,
	created_at      TEXT    NOT NULL,
	PRIMARY KEY (destination, seq)
);
CREATE INDEX IF NOT EXISTS tickets_by_key ON tickets (destination, idempotency_key);
CREATE TABLE IF NOT EXISTS idempotency_keys (
	destination     TEXT NOT NULL,
	idempotency_key TEXT NOT NULL,
	payload_sha256  TEXT NOT NULL,
	ticket_id       TEXT NOT NULL,
	created_at      TEXT NOT NULL,
	PRIMARY KEY (destination, idempotency_key)
);`

// store is the SQLite file behind the service.
type store struct{ db *sql.DB }

func openStore(path string) (*store, error) {
	if path == "" {
		return nil, errors.New("sandbox: database path is empty")
	}
	// WAL and a busy timeout let concurrent writers queue instead of failing;
	// _txlock=immediate takes the write lock at BEGIN, so the read-then-insert
	// of a key inside one transaction cannot race another writer.
	// synchronous(NORMAL) skips the fsync at each commit: in WAL mode a commit
	// still survives the sandbox process crashing, which is the crash the
	// fault tests make, and only a machine crash could lose the last ones. A
	// test stand-in for a partner's service should not put a disk flush, and
	// its tail on a shared disk, in every delivery the benchmark times.
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sandbox: open %s: %w", path, err)
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("sandbox: create schema in %s: %w", path, err)
	}
	return &store{db: db}, nil
}

func (s *store) close() error { return s.db.Close() }

// keyed is what a key's earlier use left behind.
type keyed struct {
	ticketID string
	hash     string
}

// create stores a new ticket, named id (empty: ticket-<n>). When dedupKey
// is set, the key and payload hash are stored in the same transaction, and
// an earlier use of the key is returned instead of writing anything.
func (s *store) create(ctx context.Context, dest, key string, dedupKey bool, payload []byte, hash, id string) (ticketID string, prior *keyed, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()

	if dedupKey {
		var k keyed
		err := tx.QueryRowContext(ctx,
			`SELECT ticket_id, payload_sha256 FROM idempotency_keys WHERE destination = ? AND idempotency_key = ?`,
			dest, key).Scan(&k.ticketID, &k.hash)
		switch {
		case err == nil:
			return "", &k, nil
		case !errors.Is(err, sql.ErrNoRows):
			return "", nil, fmt.Errorf("read key: %w", err)
		}
	}

	var seq int64
	if err := tx.QueryRowContext(ctx,
		`SELECT COALESCE(MAX(seq), 0) + 1 FROM tickets WHERE destination = ?`, dest).Scan(&seq); err != nil {
		return "", nil, fmt.Errorf("next ticket number: %w", err)
	}
	ticketID = id
	if ticketID == "" {
		ticketID = fmt.Sprintf("ticket-%d", seq)
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	var storedKey any // NULL when the request had no key or the mode ignores it
	if key != "" {
		storedKey = key
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO tickets (destination, seq, ticket_id, idempotency_key, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		dest, seq, ticketID, storedKey, string(payload), now); err != nil {
		return "", nil, fmt.Errorf("insert ticket: %w", err)
	}
	if dedupKey {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO idempotency_keys (destination, idempotency_key, payload_sha256, ticket_id, created_at) VALUES (?, ?, ?, ?, ?)`,
			dest, key, hash, ticketID, now); err != nil {
			return "", nil, fmt.Errorf("insert key: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return "", nil, fmt.Errorf("commit: %w", err)
	}
	return ticketID, nil, nil
}

// findByKey returns the first ticket stored with the key, or "".
func (s *store) findByKey(ctx context.Context, dest, key string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx,
		`SELECT ticket_id FROM tickets WHERE destination = ? AND idempotency_key = ? ORDER BY seq LIMIT 1`,
		dest, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("find ticket by key: %w", err)
	}
	return id, nil
}

// keyedTicket is a ticket and the key stored with it ("" for none).
type keyedTicket struct{ id, key string }

// search lists the destination's tickets stored with key, or all of them
// when key is nil, oldest first, at most limit.
func (s *store) search(ctx context.Context, dest string, key *string, limit int) ([]keyedTicket, error) {
	q, args := `SELECT ticket_id, COALESCE(idempotency_key, '') FROM tickets WHERE destination = ? ORDER BY seq LIMIT ?`, []any{dest, limit}
	if key != nil {
		q, args = `SELECT ticket_id, idempotency_key FROM tickets WHERE destination = ? AND idempotency_key = ? ORDER BY seq LIMIT ?`, []any{dest, *key, limit}
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("search tickets: %w", err)
	}
	defer rows.Close()
	out := []keyedTicket{}
	for rows.Next() {
		var t keyedTicket
		if err := rows.Scan(&t.id, &t.key); err != nil {
			return nil, fmt.Errorf("search tickets: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search tickets: %w", err)
	}
	return out, nil
}

func (s *store) records(ctx context.Context, dest string) ([]Record, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT ticket_id, COALESCE(idempotency_key, ''), payload, created_at FROM tickets WHERE destination = ? ORDER BY seq`, dest)
	if err != nil {
		return nil, fmt.Errorf("list tickets: %w", err)
	}
	defer rows.Close()
	recs := []Record{}
	for rows.Next() {
		var r Record
		var payload, created string
		if err := rows.Scan(&r.TicketID, &r.Key, &payload, &created); err != nil {
			return nil, fmt.Errorf("list tickets: %w", err)
		}
		r.Payload = json.RawMessage(payload)
		if r.CreatedAt, err = time.Parse(time.RFC3339Nano, created); err != nil {
			return nil, fmt.Errorf("ticket %s created_at: %w", r.TicketID, err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tickets: %w", err)
	}
	return recs, nil
}

func (s *store) reset(ctx context.Context, dest string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	for _, q := range []string{
		`DELETE FROM tickets WHERE destination = ?`,
		`DELETE FROM idempotency_keys WHERE destination = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, dest); err != nil {
			return fmt.Errorf("reset %s: %w", dest, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("reset %s: %w", dest, err)
	}
	return nil
}
