package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/abde64c9/courier/activities/ledger"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// postgresDSN names the database the PostgreSQL tests use; .ci/postgres.sh
// starts a throw-away server and prints the export line for it.
const postgresDSN = "COURIER_TEST_POSTGRES_DSN"

func postgresURL(t *testing.T) string {
	dsn := os.Getenv(postgresDSN)
	if dsn == "" {
		t.Skipf("set %s to run against PostgreSQL; .ci/postgres.sh starts one and prints the export line", postgresDSN)
	}
	return dsn
}

// TestPostgres runs the shared cases in the one schema the ledger has: each
// key is unique to this run, and each case removes the rows it wrote.
func TestPostgres(t *testing.T) {
	dsn := postgresURL(t)
	ctx := context.Background()
	require.NoError(t, Init(ctx, dsn))
	raw, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer raw.Close()
	run := "ledger-test-" + strings.ToLower(rand.Text()[:10]) + "-"

	testStore(t, harness{
		open: func(t *testing.T) ledger.Store {
			s, err := Open(ctx, dsn)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close()) })
			return s
		},
		key: func(t *testing.T) string {
			k := run + uuid.NewString()
			t.Cleanup(func() {
				_, err := raw.Exec("DELETE FROM courier_ledger.outcomes WHERE key = $1", k)
				require.NoError(t, err)
			})
			return k
		},
		shared: true,
	})

	var left int
	require.NoError(t, raw.QueryRow("SELECT COUNT(*) FROM courier_ledger.outcomes WHERE key LIKE $1", run+"%").Scan(&left))
	require.Zero(t, left, "rows of this run left behind")
}

func TestPostgresInitIsIdempotent(t *testing.T) {
	dsn := postgresURL(t)
	ctx := context.Background()
	// At once, as several deployments' setup steps might: the losers of
	// PostgreSQL's IF NOT EXISTS race retry.
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = Init(ctx, dsn) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.NoError(t, Init(ctx, dsn))

	s, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	// Host, port and database only (TestWherePostgres checks the password
	// stays out: here it may equal the user or database name).
	require.Equal(t, "postgres "+u.Host+u.Path+" (schema courier_ledger)", s.Where())
}

// TestPostgresMissingTable opens a database of its own, which has no
// ledger table until Init. It needs the right to create databases; without
// it the hint is checked by TestMissingTableError alone.
func TestPostgresMissingTable(t *testing.T) {
	dsn := postgresURL(t)
	ctx := context.Background()
	admin, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() }) // after the drop below: cleanups run last first
	name := "courier_ledger_test_" + strings.ToLower(rand.Text()[:10])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
			t.Skipf("the test role may not create databases (%v); the hint is tested by TestMissingTableError", err)
		}
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		_, err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		require.NoError(t, err)
	})
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.Path = "/" + name
	other := u.String()

	_, err = Open(ctx, other)
	require.EqualError(t, err, missingTableError("postgres "+u.Host+"/"+name+" (schema courier_ledger)").Error())

	require.NoError(t, Init(ctx, other))
	s, err := Open(ctx, other)
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, ledger.Entry{Key: uuid.NewString(), Status: "created"}))
	require.NoError(t, s.Close())
}

func TestPostgresSchemaRunsAsOneStatement(t *testing.T) {
	// Init sends PostgresSchema in one Exec; it must stay plain DDL with no
	// placeholders, which that needs.
	require.NotContains(t, PostgresSchema, "$1")
	require.Contains(t, PostgresSchema, "CREATE SCHEMA IF NOT EXISTS courier_ledger;")
	require.Contains(t, PostgresSchema, "CREATE TABLE IF NOT EXISTS courier_ledger.outcomes (")
	for _, c := range columns {
		require.Contains(t, PostgresSchema, "\t"+c+" ")
		require.Contains(t, sqliteSchema, "\t"+c+" ")
	}
}
