package sqldest

import (
	"crypto/rand"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/destinations"
)

// postgresDSN names the database the PostgreSQL tests use; .ci/postgres.sh
// starts a throw-away server and prints the export line for it.
const postgresDSN = "COURIER_TEST_POSTGRES_DSN"

func TestPostgres(t *testing.T) {
	dsn := os.Getenv(postgresDSN)
	if dsn == "" {
		t.Skipf("set %s to run against PostgreSQL; .ci/postgres.sh starts one and prints the export line", postgresDSN)
	}
	testCore(t, func(t *testing.T) destinations.Destination {
		// A table of its own per case, so runs never see each other's rows.
		d := withContract(destinations.Destination{Driver: "pgx", DSN: dsn,
			Table: "courier_test_" + strings.ToLower(rand.Text()[:12])})
		t.Cleanup(func() {
			db, err := openDB(d)
			require.NoError(t, err)
			defer db.Close()
			_, err = db.Exec("DROP TABLE IF EXISTS " + d.Table + ", " + d.Table + "_without_key")
			require.NoError(t, err)
		})
		return d
	})
}
