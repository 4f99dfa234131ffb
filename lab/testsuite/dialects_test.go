package testsuite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// TestRealDialects delivers through every example destinations file, on
// the real dev server with real `courier worker` processes, to its sandbox
// personality, counting effects in the sandbox's own store: a delivery and
// its repeat are created then duplicate; a response lost after the commit
// is retried under the same key and recognised (one effect); the same key
// with another payload, sent from a second namespace (as a second Courier
// installation would), is a conflict, never rejected.
func TestRealDialects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv := sharedServer(t)
	courier := courierPath(t)
	dir := t.TempDir()
	sb, examples := dialectSandbox(t, dir)

	// All examples in one workers' file: each is loaded as its own file
	// above, and their destination names differ.
	all := destinations.Config{Destinations: map[string]destinations.Destination{}}
	for _, ex := range examples {
		for name, d := range ex.Config.Destinations {
			require.NotContains(t, all.Destinations, name, ex.File)
			all.Destinations[name] = d
		}
	}
	cfgPath := filepath.Join(dir, lab.DestinationsFile)
	require.NoError(t, lab.WriteDestinations(cfgPath, all))
	effects, err := lab.OpenEffects(sb.Server, all)
	require.NoError(t, err)
	defer effects.Close()

	runID := newLab(t).RunID
	namespaces := [2]*lab.Temporal{}
	for i := range namespaces {
		namespaces[i], err = lab.StartTemporal(ctx, lab.TemporalOptions{
			Address: srv.HostPort, Namespace: "dialects-" + runID + "-" + string(rune('a'+i)), Logger: testLogger})
		require.NoError(t, err)
		defer namespaces[i].Close()
		w, err := lab.StartWorker(ctx, lab.WorkerOptions{
			Courier: courier, Destinations: cfgPath, Temporal: namespaces[i],
			Env: []string{"COURIER_WEBHOOK_SECRET=" + sandbox.WebhookSecret},
		})
		require.NoError(t, err)
		defer func() { _, _ = w.Stop(30 * time.Second) }()
	}
	st, other := starter.New(namespaces[0].Client()), starter.New(namespaces[1].Client())

	// After a lost response, the retry's answer: a replay where the
	// dialect marks one, else the first receipt again, read as new.
	afterLoss := map[string]workflows.Status{"square": workflows.StatusCreated}

	for _, name := range all.Names() {
		t.Run(name, func(t *testing.T) {
			svc := lab.SandboxService(all.Destinations[name])
			count := func(id string) (int, []lab.Effect) {
				t.Helper()
				n, err := effects.Count(ctx, name, id)
				require.NoError(t, err)
				byID, err := effects.All(ctx)
				require.NoError(t, err)
				return n, byID[id]
			}

			id := name + "-" + runID
			in := lab.TicketInput(name, id)
			first, err := st.Deliver(ctx, in)
			require.NoError(t, err)
			require.Equal(t, workflows.StatusCreated, first.Status, "%+v", first.Attempts)
			again, err := st.Deliver(ctx, in)
			require.NoError(t, err)
			require.Equal(t, workflows.StatusDuplicate, again.Status)
			n, stored := count(id)
			require.Equal(t, 1, n)
			require.Equal(t, stored[0].ID, first.Receipt.ResourceID, "the receipt names the stored effect")
			require.Equal(t, first.Receipt.ResourceID, again.Receipt.ResourceID)

			lost := name + "-lost-" + runID
			require.NoError(t, sb.Inject(svc, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
			res, err := st.Deliver(ctx, lab.TicketInput(name, lost))
			require.NoError(t, err)
			want := workflows.StatusDuplicate
			if s, ok := afterLoss[name]; ok {
				want = s
			}
			require.Equal(t, want, res.Status, "%+v", res.Attempts)
			require.Equal(t, contract.ClassUnknown, res.Attempts[0].Class)
			n, stored = count(lost)
			require.Equal(t, 1, n, "the retry under the same key made no second effect")
			require.Equal(t, stored[0].ID, res.Receipt.ResourceID, "the original effect, named")
			if all.Destinations[name].Contract.Dedup == contract.DedupLookup {
				// Found by the lookup, nothing sent again; and the same key
				// from elsewhere is a new request to a destination that
				// does not deduplicate, so there is no conflict to see.
				require.Len(t, res.Attempts, 1)
				require.Equal(t, activities.SourceLookup, res.Receipt.Source)
				return
			}
			require.Len(t, res.Attempts, 2)
			if want == workflows.StatusDuplicate {
				require.Equal(t, activities.SourceReplayed, res.Receipt.Source)
			}

			// The same operation, so the same key, with another payload.
			reused := lab.TicketInput(name, id)
			reused.Payload = lab.Ticket(id, "another subject for the same key")
			res, err = other.Deliver(ctx, reused)
			require.NoError(t, err)
			require.Equal(t, workflows.StatusConflict, res.Status, "%+v", res.Attempts)
			require.Equal(t, contract.ClassConflict, res.Attempts[len(res.Attempts)-1].Class)
			n, _ = count(id)
			require.Equal(t, 1, n, "nothing applied for the other payload")
		})
	}
}

// TestRealListLookup delivers to a partner that is looked up through a
// list endpoint answering 200 with an empty list when it holds nothing (the
// sandbox's search personality), on the real dev server with a real
// `courier worker`, counting the tickets the partner stored: a request lost
// before the commit is found missing and sent again (created, one ticket,
// never duplicate with none); a response lost after the commit is found
// by its key (duplicate naming that ticket); a lookup answer that cannot be
// read parks the delivery with the answer as evidence.
func TestRealListLookup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv := sharedServer(t)
	dir := t.TempDir()
	sb, examples := dialectSandbox(t, dir)
	var cfg destinations.Config
	for _, ex := range examples {
		if ex.File == "search.json" {
			cfg = ex.Config
		}
	}
	require.Contains(t, cfg.Destinations, "search")
	d := cfg.Destinations["search"]
	d.Contract.Retry.InitialInterval = contract.Duration(100 * time.Millisecond)
	cfg.Destinations["search"] = d
	cfgPath := filepath.Join(dir, lab.DestinationsFile)
	require.NoError(t, lab.WriteDestinations(cfgPath, cfg))
	effects, err := lab.OpenEffects(sb.Server, cfg)
	require.NoError(t, err)
	defer effects.Close()

	runID := newLab(t).RunID
	tc, err := lab.StartTemporal(ctx, lab.TemporalOptions{Address: srv.HostPort, Namespace: "lookup-" + runID, Logger: testLogger})
	require.NoError(t, err)
	defer tc.Close()
	w, err := lab.StartWorker(ctx, lab.WorkerOptions{Courier: courierPath(t), Destinations: cfgPath, Temporal: tc})
	require.NoError(t, err)
	defer func() { _, _ = w.Stop(30 * time.Second) }()
	st := starter.New(tc.Client())
	stored := func(id string) []lab.Effect {
		t.Helper()
		all, err := effects.All(ctx)
		require.NoError(t, err)
		return all[id]
	}

	t.Run("lost before the commit", func(t *testing.T) {
		id := "before-" + runID
		require.NoError(t, sb.Inject("search", sandbox.Fault{Kind: sandbox.FaultDelayBeforeCommit, Delay: 50 * time.Millisecond}))
		res, err := st.Deliver(ctx, lab.TicketInput("search", id))
		require.NoError(t, err)
		require.Equal(t, workflows.StatusCreated, res.Status, "%+v", res.Attempts)
		require.Len(t, res.Attempts, 2)
		require.Equal(t, contract.ClassUnknown, res.Attempts[0].Class)
		require.True(t, hasEvent(res.Events, "lookup_not_found"), "%+v", res.Events)
		effs := stored(id)
		require.Len(t, effs, 1, "sent again after the lookup found nothing: one ticket")
		require.Equal(t, effs[0].ID, res.Receipt.ResourceID)
	})

	t.Run("lost after the commit", func(t *testing.T) {
		id := "after-" + runID
		require.NoError(t, sb.Inject("search", sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
		res, err := st.Deliver(ctx, lab.TicketInput("search", id))
		require.NoError(t, err)
		require.Equal(t, workflows.StatusDuplicate, res.Status, "%+v", res.Attempts)
		effs := stored(id)
		require.Len(t, effs, 1)
		require.Equal(t, effs[0].ID, res.Receipt.ResourceID, "the lookup named the ticket")
		require.Equal(t, activities.SourceLookup, res.Receipt.Source)
		require.Contains(t, string(res.Receipt.Body), effs[0].ID, "the record the lookup found")
	})

	t.Run("an answer that cannot be read", func(t *testing.T) {
		id := "garbled-" + runID
		require.NoError(t, sb.Inject("search", sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
		require.NoError(t, sb.Inject("search", sandbox.Fault{Kind: sandbox.FaultGarbledLookup}))
		res, err := st.Deliver(ctx, lab.TicketInput("search", id))
		require.NoError(t, err)
		require.Equal(t, workflows.StateAwaitingReview, res.State, "%+v", res.Attempts)
		require.Empty(t, res.Status)
		require.Contains(t, res.Review.Evidence, "is not JSON")
		require.Contains(t, res.Review.Evidence, "Scheduled maintenance", "the answer is in the evidence")
		require.Len(t, stored(id), 1, "the one ticket, not sent again")
	})
}

// dialectSandbox serves every vendor personality on loopback, stopped at
// the test's end, and loads the example destinations files pointed at it.
func dialectSandbox(t *testing.T, dir string) (*lab.Sandbox, []lab.Example) {
	t.Helper()
	sb, err := lab.StartSandbox(filepath.Join(dir, lab.SandboxDB), "", sandbox.DialectModes())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	examples, err := lab.Examples(filepath.Join("..", "..", "examples", "destinations"), sb.URL)
	require.NoError(t, err)
	return sb, examples
}

func hasEvent(events []workflows.Event, kind string) bool {
	for _, e := range events {
		if e.Event == kind {
			return true
		}
	}
	return false
}
