package sqldest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab/faults"
)

// The cases every driver must pass, run against real databases: SQLite files
// in sqlite_test.go, PostgreSQL in postgres_test.go. newDest returns a
// destination with a fresh, empty table each time it is called.

func request(key, payload string) destination.Request {
	sum := sha256.Sum256([]byte(payload))
	return destination.Request{
		Key: key, Fingerprint: hex.EncodeToString(sum[:]),
		Tenant: "acme", Destination: "ledger", Operation: "insert-entry", BusinessID: "biz-" + key,
		Payload: []byte(payload), Attempt: 1,
	}
}

func withContract(d destinations.Destination) destinations.Destination {
	d.Adapter = destinations.AdapterSQL
	d.Contract = contract.Contract{
		Dedup: contract.DedupUniqueCommit,
		Retry: contract.Retry{MaxAttempts: 5, AttemptTimeout: contract.Duration(10 * time.Second),
			Deadline: contract.Duration(time.Minute)},
	}.WithDefaults()
	return d
}

func open(t *testing.T, d destinations.Destination) *Adapter {
	t.Helper()
	a, err := Open("ledger", d, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func count(t *testing.T, a *Adapter) int {
	t.Helper()
	n, err := a.Count(context.Background())
	require.NoError(t, err)
	return n
}

func requireCreated(t *testing.T, out destination.Outcome, key string) {
	t.Helper()
	require.Equal(t, contract.ClassCreated, out.Class, out.Error)
	require.Empty(t, out.Error)
	require.Equal(t, &destination.Receipt{ResourceID: "result-" + key, Status: StatusCreated}, out.Receipt)
}

func requireReplayed(t *testing.T, out destination.Outcome, key string) {
	t.Helper()
	require.Equal(t, contract.ClassReplayed, out.Class, out.Error)
	require.Empty(t, out.Error)
	require.Equal(t, &destination.Receipt{ResourceID: "result-" + key, Status: StatusCreated, Replayed: true}, out.Receipt)
}

func testCore(t *testing.T, newDest func(t *testing.T) destinations.Destination) {
	ctx := context.Background()

	t.Run("normal", func(t *testing.T) {
		a := open(t, newDest(t))
		req := request("normal", `{"amount":10}`)
		requireCreated(t, a.Deliver(ctx, req), "normal")

		rows, err := a.Rows(ctx)
		require.NoError(t, err)
		require.Len(t, rows, 1)
		r := rows[0]
		require.Equal(t, [...]string{"normal", req.Fingerprint, "acme", "ledger", "insert-entry", "biz-normal", "result-normal"},
			[...]string{r.Key, r.Fingerprint, r.Tenant, r.Destination, r.Operation, r.BusinessID, r.ResourceID})
		require.JSONEq(t, `{"amount":10}`, string(r.Payload))
		require.WithinDuration(t, time.Now(), r.CreatedAt, time.Minute)

		f, err := a.Lookup(ctx, req)
		require.NoError(t, err)
		require.Equal(t, destination.Found{Found: true, Receipt: &destination.Receipt{ResourceID: "result-normal", Status: StatusCreated, Replayed: true}}, f)
		f, err = a.Lookup(ctx, request("absent", `{}`))
		require.NoError(t, err)
		require.False(t, f.Found)
	})

	t.Run("same request twice", func(t *testing.T) {
		a := open(t, newDest(t))
		req := request("double", `{"amount":10}`)
		requireCreated(t, a.Deliver(ctx, req), "double")
		requireReplayed(t, a.Deliver(ctx, req), "double")
		require.Equal(t, 1, count(t, a))
	})

	t.Run("same key different content", func(t *testing.T) {
		a := open(t, newDest(t))
		requireCreated(t, a.Deliver(ctx, request("conflict", `{"amount":10}`)), "conflict")
		out := a.Deliver(ctx, request("conflict", `{"amount":99}`))
		require.Equal(t, contract.ClassConflict, out.Class)
		require.Contains(t, out.Error, "already used with another payload")
		require.Nil(t, out.Receipt)
		require.Equal(t, 1, count(t, a))
		rows, err := a.Rows(ctx)
		require.NoError(t, err)
		require.JSONEq(t, `{"amount":10}`, string(rows[0].Payload), "the first payload stays")
	})

	t.Run("20 concurrent requests", func(t *testing.T) {
		a := open(t, newDest(t))
		req := request("concurrent", `{"amount":10}`)
		start := make(chan struct{})
		outs := make([]destination.Outcome, 20)
		var wg sync.WaitGroup
		for i := range outs {
			wg.Go(func() {
				<-start
				outs[i] = a.Deliver(ctx, req)
			})
		}
		close(start)
		wg.Wait()
		classes := map[contract.Class]int{}
		for _, out := range outs {
			require.Empty(t, out.Error)
			require.Equal(t, "result-concurrent", out.Receipt.ResourceID)
			classes[out.Class]++
		}
		require.Equal(t, map[contract.Class]int{contract.ClassCreated: 1, contract.ClassReplayed: 19}, classes)
		require.Equal(t, 1, count(t, a))
	})

	t.Run("lost acknowledgement then retry", func(t *testing.T) {
		a := open(t, newDest(t))
		req := request("lost-ack", `{"amount":10}`)
		lossy := faults.Wrap(a)
		lossy.LoseAcks(1)
		out := lossy.Deliver(ctx, req)
		require.Equal(t, contract.ClassUnknown, out.Class)
		require.Contains(t, out.Error, "acknowledgement lost after commit")
		require.Equal(t, 1, count(t, a), "the commit happened")
		requireReplayed(t, a.Deliver(ctx, req), "lost-ack")
		require.Equal(t, 1, count(t, a))
	})

	t.Run("new process existing request", func(t *testing.T) {
		d := newDest(t)
		a, err := Open("ledger", d, nil)
		require.NoError(t, err)
		req := request("restart", `{"amount":10}`)
		requireCreated(t, a.Deliver(ctx, req), "restart")
		require.NoError(t, a.Close())

		b := open(t, d)
		requireReplayed(t, b.Deliver(ctx, req), "restart")
		require.Equal(t, 1, count(t, b))
	})

	t.Run("after commit the row is durable", func(t *testing.T) {
		d := newDest(t)
		a := open(t, d)
		req := request("hook", `{"amount":10}`)
		var seen int
		var found destination.Found
		hooked := faults.Wrap(a)
		hooked.AfterEffect = func() {
			// A second connection, as a new process would open.
			b, err := Open("ledger", d, nil)
			require.NoError(t, err)
			defer b.Close()
			seen = count(t, b)
			found, err = b.Lookup(ctx, req)
			require.NoError(t, err)
		}
		requireCreated(t, hooked.Deliver(ctx, req), "hook")
		require.Equal(t, 1, seen)
		require.True(t, found.Found)
	})

	t.Run("blocked past the attempt timeout is not sent", func(t *testing.T) {
		d := newDest(t)
		d.Contract.Retry.AttemptTimeout = contract.Duration(300 * time.Millisecond)
		a := open(t, d)
		req := request("blocked", `{"amount":10}`)

		// Another writer holds the same key uncommitted: SQLite makes our
		// BEGIN wait for its lock, PostgreSQL our INSERT for its outcome.
		db, err := openDB(d)
		require.NoError(t, err)
		defer db.Close()
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, a.q.insert, insertArgs(request("blocked", `{"other":true}`))...)
		require.NoError(t, err)

		began := time.Now()
		out := a.Deliver(ctx, req)
		require.Equal(t, contract.ClassNotSent, out.Class, out.Error)
		t.Logf("not sent: %s", out.Error)
		require.Less(t, time.Since(began), 5*time.Second, "the attempt timeout bounds the wait")
		require.NoError(t, tx.Rollback())

		requireCreated(t, a.Deliver(ctx, req), "blocked")
		require.Equal(t, 1, count(t, a))
	})

	t.Run("a table without a unique key is refused", func(t *testing.T) {
		d := newDest(t)
		d.Table = tableOf(t, d) + "_without_key"
		db, err := openDB(d)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, createTable(d.Table, "NOT NULL"))
		require.NoError(t, db.Close())
		require.NoError(t, err)
		_, err = Open("ledger", d, nil)
		require.ErrorContains(t, err, "no UNIQUE constraint on column key")
	})
}

func tableOf(t *testing.T, d destinations.Destination) string {
	t.Helper()
	name, err := tableName(d)
	require.NoError(t, err)
	return name
}
