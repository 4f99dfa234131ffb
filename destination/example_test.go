package destination_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/worker/destinationtest"
	"github.com/abde64c9/courier/workflows"
)

// Ledger is a team's own store, written on the public API alone: each
// entry under a unique key, so a repeated key names the entry it made.
type Ledger struct {
	mu      sync.Mutex
	entries map[string]entry // by key: the store's UNIQUE constraint
}

type entry struct{ id, fingerprint string }

// Deliver stores one entry per key: a new key is Created, a known key with
// the same payload Replayed (naming the first entry), another payload a
// Conflict. An in-memory store cannot fail half-way; a real one would map
// its client's errors with destination.Failed.
func (l *Ledger) Deliver(ctx context.Context, req destination.Request) destination.Outcome {
	if err := ctx.Err(); err != nil {
		return destination.Failed(err, false)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[req.Key]; ok {
		if e.fingerprint != req.Fingerprint {
			return destination.Outcome{Class: destination.Conflict, Error: "key " + req.Key + " holds another payload"}
		}
		return destination.Outcome{Class: destination.Replayed, Receipt: &destination.Receipt{ResourceID: e.id, Replayed: true}}
	}
	e := entry{id: fmt.Sprintf("entry-%d", len(l.entries)+1), fingerprint: req.Fingerprint}
	l.entries[req.Key] = e
	return destination.Outcome{Class: destination.Created, Receipt: &destination.Receipt{ResourceID: e.id}}
}

// Count is how many entries the store holds for a key: the kit's look at
// the real effects.
func (l *Ledger) Count(_ context.Context, key string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.entries[key]; ok {
		return 1, nil
	}
	return 0, nil
}

// ledgerContract is what the ledger declares: it recognises a key, and
// keeps keys at least this long, time for a retry to reach it.
var ledgerContract = contract.Contract{Dedup: contract.DedupKey, KeyRetention: contract.Duration(3 * time.Second),
	Retry: contract.Retry{MaxAttempts: 5, InitialInterval: contract.Duration(200 * time.Millisecond),
		AttemptTimeout: contract.Duration(2 * time.Second), Deadline: contract.Duration(time.Minute)}}

// TestOwnAdapterOnARealServer: a team's adapter, registered in its own
// worker process, delivers through the Delivery workflow on a real dev
// server (a repeat is a duplicate with the first receipt), and passes the
// conformance kit there.
func TestOwnAdapterOnARealServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	srv, err := lab.StartTemporal(ctx, lab.TemporalOptions{})
	require.NoError(t, err)
	t.Cleanup(srv.Close)

	ledger := &Ledger{entries: map[string]entry{}}
	var cfg destinations.Config
	require.NoError(t, cfg.Declare("ledger", destinations.Destination{Adapter: destinations.AdapterGo, Contract: ledgerContract}))
	p, err := worker.StartProcess(ctx, worker.ProcessOptions{
		Config:   cfg,
		Adapters: map[string]destination.Adapter{"ledger": ledger},
		Client:   &client.Options{HostPort: srv.HostPort, Namespace: srv.Namespace},
		Logger:   slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)

	in := workflows.DeliveryInput{
		Operation: opkey.Operation{Destination: "ledger", Operation: "book", BusinessID: "invoice-7"},
		Payload:   []byte(`{"amount": 12}`),
	}
	st := starter.New(srv.Client())
	first, err := st.Deliver(ctx, in)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCreated, first.Status, "%+v", first.DeliveryResult)
	again, err := st.Deliver(ctx, in)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusDuplicate, again.Status)
	require.Equal(t, first.Receipt.ResourceID, again.Receipt.ResourceID)
	n, err := ledger.Count(ctx, opkey.Key(in.Operation))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	// The kit starts a worker of its own, and must be the only one.
	require.NoError(t, p.Stop())

	destinationtest.Run(t, destinationtest.Subject{
		Name: "ledger", Adapter: ledger, Contract: ledgerContract, Count: ledger.Count, Client: srv.Client(),
	})

	t.Run("an adapter that ignores keys fails there too", func(t *testing.T) {
		c := &careless{}
		fs, err := destinationtest.Check(ctx, destinationtest.Subject{
			Name: "careless", Adapter: c, Contract: ledgerContract, Count: c.Count, Client: srv.Client(),
		})
		require.NoError(t, err)
		for _, f := range fs {
			t.Log(f)
		}
		require.NotEmpty(t, fs)
		require.Equal(t, "lost_response_same_key", fs[0].Case)
		require.Contains(t, fs[0].Message, "declared dedup key with key_retention 3s, but a repeat with the same key after a lost response made a second effect")
	})
}

// careless declares dedup key and ignores the key: every attempt is a new
// entry.
type careless struct {
	mu   sync.Mutex
	keys []string
}

func (c *careless) Deliver(_ context.Context, req destination.Request) destination.Outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys = append(c.keys, req.Key)
	return destination.Outcome{Class: destination.Created, Receipt: &destination.Receipt{ResourceID: fmt.Sprint("careless-", len(c.keys))}}
}

func (c *careless) Count(_ context.Context, key string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.keys {
		if k == key {
			n++
		}
	}
	return n, nil
}
