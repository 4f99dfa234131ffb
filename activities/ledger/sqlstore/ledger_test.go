package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/abde64c9/courier/activities/ledger"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// harness is one database the shared cases run against.
type harness struct {
	open   func(t *testing.T) ledger.Store // a ledger.Store on the ledger under test, closed after t
	key    func(t *testing.T) string       // a key no other run uses; its row is removed after t
	shared bool                            // the table may hold rows of others (PostgreSQL): counts are lower bounds
}

// normalized is e as a Get returns it: times truncated to the microsecond, in UTC.
func normalized(e ledger.Entry) ledger.Entry {
	if !e.FirstAttempt.IsZero() {
		e.FirstAttempt = e.FirstAttempt.UTC().Truncate(time.Microsecond)
	}
	e.Recorded = e.Recorded.UTC().Truncate(time.Microsecond)
	return e
}

// requireEntry compares times with Equal and their zone, the rest exactly
// (a nil receipt is not an empty one).
func requireEntry(t *testing.T, want, got ledger.Entry) {
	t.Helper()
	for _, p := range []struct {
		name      string
		want, got time.Time
	}{{"first_attempt", want.FirstAttempt, got.FirstAttempt}, {"recorded", want.Recorded, got.Recorded}} {
		require.Truef(t, p.want.Equal(p.got), "%s: want %s, got %s", p.name, p.want.Format(time.RFC3339Nano), p.got.Format(time.RFC3339Nano))
		require.Equalf(t, p.want.IsZero(), p.got.IsZero(), "%s: zero", p.name)
		if !p.got.IsZero() {
			require.Equalf(t, time.UTC, p.got.Location(), "%s: zone", p.name)
		}
	}
	require.Equal(t, want.Receipt == nil, got.Receipt == nil, "receipt: nil vs empty")
	want.FirstAttempt, got.FirstAttempt, want.Recorded, got.Recorded = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	require.Equal(t, want, got)
}

func mustGet(t *testing.T, s ledger.Store, key string) ledger.Entry {
	t.Helper()
	e, ok, err := s.Get(context.Background(), key)
	require.NoError(t, err)
	require.True(t, ok, "no row for %s", key)
	return e
}

func requireMissing(t *testing.T, s ledger.Store, key string) {
	t.Helper()
	e, ok, err := s.Get(context.Background(), key)
	require.NoError(t, err)
	require.False(t, ok, "row for %s: %+v", key, e)
	require.Equal(t, ledger.Entry{}, e)
}

// testStore is every behaviour both databases must share.
func testStore(t *testing.T, h harness) {
	ctx := context.Background()
	// Nanoseconds and a zone other than UTC, so truncation and conversion show.
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	first := time.Date(2031, 7, 9, 10, 11, 12, 123456789, zone)
	recorded := first.Add(90*time.Second + 987)

	full := func(key string) ledger.Entry {
		return ledger.Entry{Key: key, Fingerprint: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			Status: "created", Destination: "helpdesk", Receipt: []byte(`{"resource_id":"T-1","status":"created"}`),
			WorkflowID: "courier/" + key, RunID: "run-1", Principal: "alice@example.com",
			FirstAttempt: first, Recorded: recorded}
	}

	t.Run("get of a missing key", func(t *testing.T) {
		requireMissing(t, h.open(t), h.key(t))
	})

	t.Run("put then get returns every field", func(t *testing.T) {
		s := h.open(t)
		for name, change := range map[string]func(*ledger.Entry){
			"full":                 func(*ledger.Entry) {},
			"nil receipt":          func(e *ledger.Entry) { e.Receipt = nil },
			"empty receipt":        func(e *ledger.Entry) { e.Receipt = []byte{} },
			"binary receipt":       func(e *ledger.Entry) { e.Receipt = []byte{0, 1, 2, 0xfe, 0xff, 0} },
			"zero first attempt":   func(e *ledger.Entry) { e.FirstAttempt = time.Time{} },
			"no principal":         func(e *ledger.Entry) { e.Principal = "" },
			"pending":              func(e *ledger.Entry) { e.Status = ledger.StatusPending },
			"whole microseconds":   func(e *ledger.Entry) { e.Recorded = time.Date(2031, 7, 9, 0, 0, 0, 5000, time.UTC) },
			"before the unix time": func(e *ledger.Entry) { e.FirstAttempt = time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC) },
		} {
			t.Run(name, func(t *testing.T) {
				in := full(h.key(t))
				change(&in)
				require.NoError(t, s.Put(ctx, in))
				requireEntry(t, normalized(in), mustGet(t, s, in.Key))
			})
		}
	})

	t.Run("put sets recorded from the store's clock when zero", func(t *testing.T) {
		s := h.open(t)
		now := time.Date(2032, 1, 2, 3, 4, 5, 678901234, zone)
		s.(*sqlStore).now = func() time.Time { return now }
		in := full(h.key(t))
		in.Recorded = time.Time{}
		require.NoError(t, s.Put(ctx, in))
		in.Recorded = now
		requireEntry(t, normalized(in), mustGet(t, s, in.Key))
	})

	t.Run("put without a key fails", func(t *testing.T) {
		err := h.open(t).Put(ctx, ledger.Entry{Status: "created"})
		require.ErrorContains(t, err, "no key")
	})

	t.Run("put replaces the row", func(t *testing.T) {
		s := h.open(t)
		key := h.key(t)
		pending := full(key)
		pending.Status, pending.Receipt, pending.Principal = ledger.StatusPending, nil, ""
		require.NoError(t, s.Put(ctx, pending))

		// Replaced, not merged: fields the second write leaves empty are empty.
		final := ledger.Entry{Key: key, Fingerprint: "other", Status: "delivered_by_review", Destination: "ledger",
			Receipt: []byte("ciphertext"), WorkflowID: "wf-2", RunID: "run-2", Principal: "bob",
			Recorded: recorded.Add(time.Hour)}
		require.NoError(t, s.Put(ctx, final))
		requireEntry(t, normalized(final), mustGet(t, s, key))

		again := full(key)
		again.Receipt = nil
		require.NoError(t, s.Put(ctx, again))
		requireEntry(t, normalized(again), mustGet(t, s, key))
	})

	t.Run("delete pending removes only a pending row of the same run", func(t *testing.T) {
		s := h.open(t)
		pending := full(h.key(t))
		pending.Status, pending.RunID = ledger.StatusPending, "run-a"
		require.NoError(t, s.Put(ctx, pending))

		removed, err := s.DeletePending(ctx, pending.Key, "run-b")
		require.NoError(t, err)
		require.False(t, removed, "another run's pending row")
		requireEntry(t, normalized(pending), mustGet(t, s, pending.Key))

		removed, err = s.DeletePending(ctx, pending.Key, "run-a")
		require.NoError(t, err)
		require.True(t, removed)
		requireMissing(t, s, pending.Key)

		removed, err = s.DeletePending(ctx, pending.Key, "run-a")
		require.NoError(t, err)
		require.False(t, removed, "already removed")

		final := full(h.key(t))
		final.RunID = "run-a"
		require.NoError(t, s.Put(ctx, final))
		removed, err = s.DeletePending(ctx, final.Key, "run-a")
		require.NoError(t, err)
		require.False(t, removed, "a final row")
		requireEntry(t, normalized(final), mustGet(t, s, final.Key))
	})

	t.Run("purge removes only rows recorded before t", func(t *testing.T) {
		s := h.open(t)
		// Long past, so a shared table holds no one else's rows this old.
		cut := time.Date(1971, 2, 1, 0, 0, 0, 0, time.UTC)
		rows := map[string]time.Time{
			"old":    cut.Add(-30 * 24 * time.Hour),
			"just":   cut.Add(-time.Microsecond),
			"at":     cut,
			"after":  cut.Add(time.Microsecond),
			"recent": time.Now(),
		}
		keys := map[string]string{}
		for name, rec := range rows {
			e := full(h.key(t))
			e.Recorded = rec
			require.NoError(t, s.Put(ctx, e))
			keys[name] = e.Key
		}
		n, err := s.Purge(ctx, cut.In(zone))
		require.NoError(t, err)
		if h.shared {
			require.GreaterOrEqual(t, n, int64(2))
		} else {
			require.Equal(t, int64(2), n)
		}
		requireMissing(t, s, keys["old"])
		requireMissing(t, s, keys["just"])
		for _, name := range []string{"at", "after", "recent"} {
			mustGet(t, s, keys[name])
		}
	})

	t.Run("concurrent puts of different keys all land", func(t *testing.T) {
		s := h.open(t)
		const n = 20
		keys := make([]string, n)
		for i := range keys {
			keys[i] = h.key(t)
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				e := full(keys[i])
				e.RunID = fmt.Sprintf("run-%d", i)
				errs[i] = s.Put(ctx, e)
			})
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		for i, k := range keys {
			require.Equal(t, fmt.Sprintf("run-%d", i), mustGet(t, s, k).RunID)
		}
	})
}

func sqliteHarness(t *testing.T) harness {
	return harness{
		open: func(t *testing.T) ledger.Store {
			s, err := Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close()) })
			return s
		},
		key: func(*testing.T) string { return uuid.NewString() },
	}
}

func TestSQLite(t *testing.T) {
	testStore(t, sqliteHarness(t))
}

func TestSQLiteOpenCreatesFileAndTable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := Open(ctx, "sqlite:"+path)
	require.NoError(t, err)
	require.Equal(t, "sqlite "+path, s.Where())
	require.NoError(t, s.Put(ctx, ledger.Entry{Key: "k", Status: "created"}))
	require.NoError(t, s.Close())
	require.FileExists(t, path)

	// Init on an existing ledger changes nothing; Open again reads the row.
	require.NoError(t, Init(ctx, "sqlite:"+path))
	s, err = Open(ctx, "sqlite:"+path)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "created", mustGet(t, s, "k").Status)
}

func TestSQLiteMissingFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	_, err := Open(context.Background(), "sqlite:"+filepath.Join(dir, "ledger.db"))
	require.ErrorContains(t, err, "folder "+dir+" does not exist")
	require.NoDirExists(t, dir, "Open must not create the folder")
	require.ErrorContains(t, Init(context.Background(), "sqlite:"+filepath.Join(dir, "ledger.db")), "does not exist")
}

func TestSQLiteWrongTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := Open(context.Background(), "sqlite:"+path)
	require.NoError(t, err)
	_, err = s.(*sqlStore).db.Exec("DROP TABLE outcomes; CREATE TABLE outcomes (key TEXT PRIMARY KEY, status TEXT)")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = Open(context.Background(), "sqlite:"+path)
	require.ErrorContains(t, err, "does not have the ledger's columns")
}

// Two Stores on one file stand for two worker processes on one host: each
// has its own connections, and sees the other's writes at once.
func TestSQLiteTwoStoresShareTheFile(t *testing.T) {
	ctx := context.Background()
	url := "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")
	a, err := Open(ctx, url)
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(ctx, url)
	require.NoError(t, err)
	defer b.Close()

	e := ledger.Entry{Key: uuid.NewString(), Status: ledger.StatusPending, RunID: "run-1", Recorded: time.Now()}
	require.NoError(t, a.Put(ctx, e))
	requireEntry(t, normalized(e), mustGet(t, b, e.Key))

	e.Status, e.Receipt = "created", []byte(`{}`)
	require.NoError(t, b.Put(ctx, e))
	requireEntry(t, normalized(e), mustGet(t, a, e.Key))

	p := ledger.Entry{Key: uuid.NewString(), Status: ledger.StatusPending, RunID: "run-2"}
	require.NoError(t, a.Put(ctx, p))
	removed, err := b.DeletePending(ctx, p.Key, "run-2")
	require.NoError(t, err)
	require.True(t, removed)
	requireMissing(t, a, p.Key)

	// Both write at once: the lock is waited for, not failed.
	errs := make([]error, 40)
	keys := make([]string, len(errs))
	var wg sync.WaitGroup
	for i := range errs {
		keys[i] = uuid.NewString()
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() { errs[i] = s.Put(ctx, ledger.Entry{Key: keys[i], Status: "created"}) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for _, k := range keys {
		mustGet(t, a, k)
		mustGet(t, b, k)
	}
}

func TestOpenRejectsOtherURLs(t *testing.T) {
	for _, url := range []string{
		"",
		"ledger.db",
		"/var/lib/courier/ledger.db",
		"file:ledger.db",
		"mysql://courier:hunter2secret@db/courier",
		"courier:hunter2secret@db/courier",
		"postgres:courier",
		"sqlite:",
		"sqlite:?_pragma=busy_timeout(1)",
	} {
		t.Run(url, func(t *testing.T) {
			_, err := Open(context.Background(), url)
			require.Error(t, err)
			require.ErrorContains(t, err, "sqlite:PATH")
			require.ErrorContains(t, err, "postgres://")
			require.NotContains(t, err.Error(), "hunter2secret")
			require.Error(t, Init(context.Background(), url))
		})
	}
}

func TestWherePostgres(t *testing.T) {
	for url, want := range map[string]string{
		"postgres://courier:s3cr3t-pw@127.0.0.1:5432/courier?sslmode=disable":          "postgres 127.0.0.1:5432/courier (schema courier_ledger)",
		"postgresql://courier:s3cr3t-pw@db.internal/courier":                           "postgres db.internal/courier (schema courier_ledger)",
		"postgres://db.internal:6432/courier?user=courier&password=s3cr3t-pw":          "postgres db.internal:6432/courier (schema courier_ledger)",
		"postgres:///courier?host=/run/postgresql&password=s3cr3t-pw":                  "postgres /run/postgresql/courier (schema courier_ledger)",
		"postgres://courier:s3cr3t-pw@h1:5432,h2:5432/courier?target_session_attrs=rw": "postgres h1:5432,h2:5432/courier (schema courier_ledger)",
		"postgres://courier@127.0.0.1/?dbname=ledger":                                  "postgres 127.0.0.1/ledger (schema courier_ledger)",
		"postgres://": "postgres (default host) (schema courier_ledger)",
	} {
		tg, err := parse(url)
		require.NoError(t, err, url)
		require.Equal(t, want, tg.where, url)
	}
}

func TestPostgresURLErrorsHidePassword(t *testing.T) {
	ctx := context.Background()
	// Does not parse: url.Error would quote the URL.
	_, err := Open(ctx, "postgres://courier:s3cr3t-pw@127.0.0.1:port/courier")
	require.ErrorContains(t, err, "does not parse")
	require.NotContains(t, err.Error(), "s3cr3t-pw")

	// Parses but nothing listens (port 1 on loopback is refused at once):
	// the error says where, without the password.
	for _, url := range []string{
		"postgres://courier:s3cr3t-pw@127.0.0.1:1/courier?sslmode=disable&connect_timeout=5",
		"postgres://courier@127.0.0.1:1/courier?sslmode=disable&connect_timeout=5&password=s3cr3t-pw",
		"postgres://courier:s3cr3t-pw@127.0.0.1:1/courier?sslmode=bogus",
	} {
		_, err = Open(ctx, url)
		require.Error(t, err, url)
		require.ErrorContains(t, err, "postgres 127.0.0.1:1/courier (schema courier_ledger)")
		require.NotContains(t, err.Error(), "s3cr3t-pw")
		err = Init(ctx, url)
		require.Error(t, err, url)
		require.NotContains(t, err.Error(), "s3cr3t-pw")
	}
}

func TestScrubber(t *testing.T) {
	tg, err := parse("postgres://courier:p%40ss%20w0rd!@127.0.0.1/courier")
	require.NoError(t, err)
	inner := errors.New("driver said: password p@ss w0rd!, escaped p%40ss+w0rd%21 / p%40ss%20w0rd!")
	got := tg.scrub.wrap(inner)
	require.Equal(t, "driver said: password xxxxx, escaped xxxxx / xxxxx", got.Error())
	require.ErrorIs(t, got, inner)
	require.Nil(t, tg.scrub.wrap(nil))

	// No password: errors pass as they are.
	tg, err = parse("postgres://courier@127.0.0.1/courier")
	require.NoError(t, err)
	require.Same(t, inner, tg.scrub.wrap(inner))
}

func TestMissingTableError(t *testing.T) {
	err := missingTableError("postgres 127.0.0.1:5432/courier (schema courier_ledger)")
	require.EqualError(t, err, "ledger: table courier_ledger.outcomes is missing in postgres 127.0.0.1:5432/courier (schema courier_ledger): "+
		"create it with `courier ledger init --ledger URL` (or deploy/postgres/init.sql)")
}

func TestPutRefusesTimesOutsideYears1To9999(t *testing.T) {
	s := sqliteHarness(t).open(t)
	err := s.Put(context.Background(), ledger.Entry{Key: "k", Recorded: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	require.ErrorContains(t, err, "outside years 1-9999")
}
