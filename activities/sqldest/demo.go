package sqldest

import (
	"context"
	"fmt"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
)

// BlindRetryWithoutKey demonstrates the failure this adapter exists to
// prevent, the seed case "destination without key: lost acknowledgement
// followed by blind retry". Into a table whose key column is NOT unique it
// inserts req's row, treats the acknowledgement as lost, and inserts it again
// as a blind retry would. It returns how many rows hold req.Key afterwards:
// 2, two effects for one business operation.
//
// It writes to the table d.Table + "_without_key" (never the adapter's own)
// and first deletes req.Key's rows there, so every run shows the same count.
func BlindRetryWithoutKey(ctx context.Context, d contract.Destination, req activities.Request) (int, error) {
	base, err := tableName(d)
	if err != nil {
		return 0, err
	}
	table := base + "_without_key"
	if !identifier.MatchString(table) {
		return 0, fmt.Errorf("table %q: too long for the demonstration table", table)
	}
	db, err := openDB(d)
	if err != nil {
		return 0, err
	}
	defer db.Close()

	q := queriesFor(table)
	if _, err := db.ExecContext(ctx, createTable(table, "NOT NULL")); err != nil {
		return 0, fmt.Errorf("create table %s: %w", table, err)
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM "+table+" WHERE key = $1", req.Key); err != nil {
		return 0, fmt.Errorf("clear key %s in %s: %w", req.Key, table, err)
	}
	for attempt := range 2 {
		// Each attempt commits on its own; the first one's answer is "lost",
		// and with nothing unique to stop it the retry is a second effect.
		_, err := db.ExecContext(ctx, q.insert, insertArgs(req)...)
		if err != nil {
			return 0, fmt.Errorf("attempt %d: insert key %s into %s: %w", attempt+1, req.Key, table, err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE key = $1", req.Key).Scan(&n); err != nil {
		return 0, fmt.Errorf("count key %s in %s: %w", req.Key, table, err)
	}
	return n, nil
}
