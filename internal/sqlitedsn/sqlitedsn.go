// Package sqlitedsn holds the settings every SQLite file Courier writes
// from several processes on one host needs: the SQL destination's tables and
// the outcome ledger both open their files through it. It imports nothing
// of Courier's.
package sqlitedsn

import "strings"

// Shared adds what concurrent writers need unless the DSN sets it:
//   - busy_timeout: a writer waits for the lock instead of failing SQLITE_BUSY;
//   - WAL: readers (replay lookups) do not block the writer;
//   - _txlock=immediate: BEGIN takes the write lock, so the wait happens
//     under busy_timeout at BEGIN, never as an unretryable lock upgrade;
//   - foreign keys on, for tables that reference the effects.
//
// synchronous is left at SQLite's FULL: in WAL mode NORMAL may lose the last
// commits on power loss, and a commit reported as created must stay stored.
func Shared(dsn string) string {
	_, query, _ := strings.Cut(dsn, "?")
	var add []string
	for _, p := range []struct{ param, mentioned, alias string }{
		{"_pragma=busy_timeout(10000)", "busy_timeout", "_timeout"},
		{"_pragma=journal_mode(WAL)", "journal_mode", "_journal"},
		{"_txlock=immediate", "_txlock", "_txlock"},
		{"_pragma=foreign_keys(1)", "foreign_keys", "_fk"},
	} {
		if !strings.Contains(query, p.mentioned) && !strings.Contains(query, p.alias) {
			add = append(add, p.param)
		}
	}
	if len(add) == 0 {
		return dsn
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + strings.Join(add, "&")
}
