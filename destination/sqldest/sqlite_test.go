package sqldest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab/faults"
)

func sqliteDest(t *testing.T) destinations.Destination {
	return withContract(destinations.Destination{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "effects.db")})
}

func TestSQLite(t *testing.T) {
	testCore(t, sqliteDest)
}

func TestSQLiteFileURI(t *testing.T) {
	d := sqliteDest(t)
	d.DSN = "file:" + d.DSN + "?mode=rwc"
	d.Table = "ledger_entries"
	a := open(t, d)
	requireCreated(t, a.Deliver(context.Background(), request("uri", `{}`)), "uri")
	requireReplayed(t, a.Deliver(context.Background(), request("uri", `{}`)), "uri")
	require.Equal(t, 1, count(t, a))
}

func TestOpenRejects(t *testing.T) {
	for name, edit := range map[string]func(*destinations.Destination){
		"table with a quote":    func(d *destinations.Destination) { d.Table = `effects"; DROP TABLE x; --` },
		"table with a space":    func(d *destinations.Destination) { d.Table = "my effects" },
		"table with a schema":   func(d *destinations.Destination) { d.Table = "public.effects" },
		"table starting with 1": func(d *destinations.Destination) { d.Table = "1effects" },
		"unknown driver":        func(d *destinations.Destination) { d.Driver = "mysql" },
		"no dsn":                func(d *destinations.Destination) { d.DSN = "" },
		"http adapter":          func(d *destinations.Destination) { d.Adapter = destinations.AdapterHTTP },
	} {
		t.Run(name, func(t *testing.T) {
			d := sqliteDest(t)
			edit(&d)
			_, err := Open("ledger", d, nil)
			require.Error(t, err)
			require.NoFileExists(t, d.DSN, "rejected before touching the database")
		})
	}
}

func TestOpenRejectsTableWithoutColumns(t *testing.T) {
	d := sqliteDest(t)
	d.Table = "other"
	db, err := openDB(d)
	require.NoError(t, err)
	_, err = db.Exec("CREATE TABLE other (key TEXT PRIMARY KEY)")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	_, err = Open("ledger", d, nil)
	require.ErrorContains(t, err, "does not take courier rows")
}

// crashDSN, when set, makes TestCommitThenProcessCrash the worker process
// that dies right after its commit.
const crashDSN = "SQLDEST_TEST_CRASH_DSN"

// The seed case "commit then process crash then new process retry": a worker
// process commits, exits 23 before it can report, and a new process retries.
func TestCommitThenProcessCrash(t *testing.T) {
	req := request("lost-response", `{"amount":10}`)
	if dsn := os.Getenv(crashDSN); dsn != "" {
		a, err := Open("ledger", withContract(destinations.Destination{Driver: "sqlite", DSN: dsn}), nil)
		if err != nil {
			t.Fatal(err)
		}
		crashing := faults.Wrap(a)
		crashing.AfterEffect = func() { os.Exit(23) }
		out := crashing.Deliver(context.Background(), req)
		t.Fatalf("the process should have exited after the commit; got %+v", out)
	}

	d := sqliteDest(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommitThenProcessCrash$")
	cmd.Env = append(os.Environ(), crashDSN+"="+d.DSN)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "worker: %v\n%s", err, out)
	require.Equal(t, 23, exit.ExitCode(), "worker output:\n%s", out)

	a := open(t, d)
	require.Equal(t, 1, count(t, a), "the commit survived the crash")
	requireReplayed(t, a.Deliver(context.Background(), req), "lost-response")
	require.Equal(t, 1, count(t, a))
}
