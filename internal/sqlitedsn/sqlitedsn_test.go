package sqlitedsn

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestShared(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp/a.db":               "/tmp/a.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate&_pragma=foreign_keys(1)",
		"file:/tmp/a.db?mode=rwc": "file:/tmp/a.db?mode=rwc&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate&_pragma=foreign_keys(1)",
		"/tmp/a.db?_pragma=busy_timeout(50)&_journal=DELETE&_txlock=deferred&_fk=0": "/tmp/a.db?_pragma=busy_timeout(50)&_journal=DELETE&_txlock=deferred&_fk=0",
	} {
		require.Equal(t, want, Shared(in))
	}
}
