package testsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// slowQueue is a partner without dedup that commits from a queue: a create
// is taken in and its record committed lag after it arrived, whether or
// not the client still waits; it is answered only then, so a client with a
// shorter timeout never hears. A lookup by key sees committed records only.
type slowQueue struct {
	lag time.Duration
	srv *httptest.Server

	mu        sync.Mutex
	received  int
	committed map[string][]string // key → record ids, in commit order
}

func newSlowQueue(t *testing.T, lag time.Duration) *slowQueue {
	q := &slowQueue{lag: lag, committed: map[string][]string{}}
	q.srv = httptest.NewServer(http.HandlerFunc(q.serve))
	t.Cleanup(q.srv.Close)
	return q
}

func (q *slowQueue) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		q.mu.Lock()
		q.received++
		id := fmt.Sprintf("rec-%d", q.received)
		q.mu.Unlock()
		committed := make(chan struct{})
		time.AfterFunc(q.lag, func() {
			q.mu.Lock()
			q.committed[key] = append(q.committed[key], id)
			q.mu.Unlock()
			close(committed)
		})
		select {
		case <-committed:
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]string{"id": id, "status": "open"})
		case <-r.Context().Done():
		}
	case http.MethodGet:
		q.mu.Lock()
		ids := q.committed[r.URL.Query().Get("key")]
		q.mu.Unlock()
		if len(ids) == 0 {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"id": ids[0], "status": "open"})
	}
}

// records waits until every create the partner took in is committed and
// returns how many it holds for key, and how many creates it received.
func (q *slowQueue) records(t *testing.T, key string) (records, received int) {
	t.Helper()
	require.Eventually(t, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		n := 0
		for _, ids := range q.committed {
			n += len(ids)
		}
		return n == q.received
	}, 30*time.Second, 50*time.Millisecond, "the partner's queue drains")
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.committed[key]), q.received
}

// destination is a lookup destination at the partner, whose attempts time
// out before it answers.
func (q *slowQueue) destination(settle, interval time.Duration) destinations.Destination {
	s := contract.Duration(settle)
	return destinations.Destination{
		Adapter: destinations.AdapterHTTP, URL: q.srv.URL + "/records", LookupURL: q.srv.URL + "/records?key={key}",
		Contract: contract.Contract{Dedup: contract.DedupLookup, KeyHeader: "Idempotency-Key", Settle: &s,
			Retry: contract.Retry{MaxAttempts: 4, InitialInterval: contract.Duration(interval), MaxInterval: contract.Duration(interval),
				Backoff: 1, AttemptTimeout: contract.Duration(time.Second), Deadline: contract.Duration(time.Minute)}},
	}
}

// TestLookupWaitsForTheDestination, on a real dev server with a real
// `courier worker`, at lookup partners that commit a create from a queue
// some time after it arrived, and answer only then: the first attempt
// times out (an unknown outcome) and the partner's stored records are
// counted once its queue has drained.
//
//   - settled: the partner commits 1.5 s after the request; the destination
//     declares a settle of 1 s. The lookup waits for it, finds the record,
//     and the delivery ends duplicate: one record, where looking at once
//     finds nothing and sends again (two).
//   - looked again: the partner commits 2.5 s after the request, longer than
//     the declared settle (0.5 s), so the lookup finds nothing; the resend
//     2 s later looks first, finds the record and sends nothing: one
//     record, where sending straight away makes two.
func TestLookupWaitsForTheDestination(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := sharedServer(t)
	run := newLab(t).RunID
	dir := t.TempDir()
	settled, lookedAgain := newSlowQueue(t, 1500*time.Millisecond), newSlowQueue(t, 2500*time.Millisecond)
	cfg := destinations.Config{Destinations: map[string]destinations.Destination{
		"settled":      settled.destination(time.Second, 100*time.Millisecond),
		"looked-again": lookedAgain.destination(500*time.Millisecond, 2*time.Second),
	}}
	cfgPath := filepath.Join(dir, lab.DestinationsFile)
	require.NoError(t, lab.WriteDestinations(cfgPath, cfg))
	loggedWorker(ctx, t, srv, cfgPath, dir)
	st := starter.New(srv.Client())

	for _, c := range []struct {
		dest    string
		partner *slowQueue
		event   string // how the delivery learned of the record
	}{
		{"settled", settled, "settle_wait"},
		{"looked-again", lookedAgain, "lookup_found"},
	} {
		t.Run(c.dest, func(t *testing.T) {
			in := lab.TicketInput(c.dest, c.dest+"-"+run)
			res, err := st.Deliver(ctx, in)
			require.NoError(t, err)
			records, received := c.partner.records(t, res.Key)
			require.Equal(t, 1, records, "one record at the partner: attempts %+v, events %+v", res.Attempts, res.Events)
			require.Equal(t, 1, received, "the partner was sent the operation once")
			require.Equal(t, workflows.StatusDuplicate, res.Status, "%+v", res.Attempts)
			require.Equal(t, "rec-1", res.Receipt.ResourceID)
			require.Equal(t, activities.SourceLookup, res.Receipt.Source)
			require.Equal(t, contract.ClassUnknown, res.Attempts[0].Class)
			require.True(t, hasEvent(res.Events, c.event), "%+v", res.Events)
		})
	}
}

// loggedWorker runs a `courier worker` over the destinations file cfgPath
// until the test ends, with its log in dir, shown when the test fails.
func loggedWorker(ctx context.Context, t *testing.T, srv *lab.Temporal, cfgPath, dir string) {
	t.Helper()
	log, err := os.Create(filepath.Join(dir, "worker.log"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })
	w, err := lab.StartWorker(ctx, lab.WorkerOptions{Courier: courierPath(t), Destinations: cfgPath, Temporal: srv, Log: log})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = w.Stop(30 * time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("the worker's log, the end:\n%s", b[max(0, len(b)-8<<10):])
		}
	})
}
