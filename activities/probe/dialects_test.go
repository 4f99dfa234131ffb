package probe_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/activities/probe"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destination/httpdest"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
)

// TestDialectExamples probes every example destinations file against its
// sandbox personality: each passes and says how its replays look; the
// Stripe-like file pointed at a personality that ignores the key is a
// contract violation.
func TestDialectExamples(t *testing.T) {
	t.Setenv("COURIER_WEBHOOK_SECRET", sandbox.WebhookSecret)
	sb, err := lab.StartSandbox(filepath.Join(t.TempDir(), lab.SandboxDB), "", sandbox.DialectModes())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	examples, err := lab.Examples(filepath.Join("..", "..", "examples", "destinations"), sb.URL)
	require.NoError(t, err)
	require.Len(t, examples, 8)

	// How each dialect's replay is recognised, in the probe's words.
	replay := map[string]string{
		"stripe":   "replay_marker header Idempotent-Replayed: true",
		"adyen":    "replay_marker header Idempotency-Key present",
		"paypal":   "replay_marker status 200",
		"square":   "replays without a marker",
		"webhooks": "rules[0] (status 200)",
		"things":   "replay_marker status 200",
		"entries":  "rules[0] (status 409)",
		"search":   "lookup works",
	}
	for _, ex := range examples {
		for _, name := range ex.Config.Names() {
			t.Run(ex.File+"/"+name, func(t *testing.T) {
				d := ex.Config.Destinations[name]
				ad, err := httpdest.New(name, d, nil)
				require.NoError(t, err)
				r, err := probe.Run(context.Background(), name, d, ad, probe.Options{})
				require.NoError(t, err)
				require.Equal(t, probe.Passed, r.Verdict, "%s", r.Finding)
				require.Contains(t, r.Finding, replay[name])
				require.Len(t, r.Effects, 1, "one probe effect: %v", r.Effects)
				recs, err := sb.Records(lab.SandboxService(d))
				require.NoError(t, err)
				require.Len(t, recs, 1, "the destination stored one effect")
				require.Equal(t, r.Effects[0], recs[0].TicketID)
			})
		}
	}

	t.Run("stripe ignoring the key", func(t *testing.T) {
		i := slices.IndexFunc(examples, func(ex lab.Example) bool { return ex.File == "stripe.json" })
		d := examples[i].Config.Destinations["stripe"]
		d.URL = strings.Replace(d.URL, "/stripe/", "/stripe-ignoring/", 1)
		ad, err := httpdest.New("stripe", d, nil)
		require.NoError(t, err)
		r, err := probe.Run(context.Background(), "stripe", d, ad, probe.Options{})
		require.NoError(t, err)
		require.Equal(t, probe.Violation, r.Verdict)
		require.Contains(t, r.Finding, "CONTRACT VIOLATION")
		require.Contains(t, r.Finding, "Idempotency-Key")
		recs, err := sb.Records("stripe-ignoring")
		require.NoError(t, err)
		require.Len(t, recs, 2, "the key-ignoring destination made two effects")
	})

	example := func(file, name string) destinations.Destination {
		i := slices.IndexFunc(examples, func(ex lab.Example) bool { return ex.File == file })
		return examples[i].Config.Destinations[name]
	}
	run := func(t *testing.T, name string, d destinations.Destination) probe.Report {
		ad, err := httpdest.New(name, d, nil)
		require.NoError(t, err)
		r, err := probe.Run(context.Background(), name, d, ad, probe.Options{})
		require.NoError(t, err)
		return r
	}

	t.Run("replay id read from the wrong place", func(t *testing.T) {
		d := example("replay-error.json", "entries")
		d.Rules = slices.Clone(d.Rules)
		d.Rules[0].Receipt = &destinations.ReceiptSpec{ID: destinations.Pointers{"/error/id"}} // a new id on every answer
		r := run(t, "entries", d)
		require.Equal(t, probe.Violation, r.Verdict, r.Finding)
		require.Contains(t, r.Finding, "names another resource")
		require.Contains(t, r.Steps[1].Read, destination.Read{Field: "rules[0].receipt.id", Pointer: "/error/id", Value: r.Steps[1].ResourceID})
	})

	t.Run("replay naming no id", func(t *testing.T) {
		d := example("replay-error.json", "entries")
		d.Rules = slices.Clone(d.Rules)
		d.Rules[0].Receipt = nil // the 409 read where a created answer keeps its id: nothing there
		r := run(t, "entries", d)
		require.Equal(t, probe.Violation, r.Verdict, r.Finding)
		require.Contains(t, r.Finding, "names no resource id")
	})

	t.Run("lookup that does not filter", func(t *testing.T) {
		d := example("search.json", "search")
		d.LookupURL = strings.Replace(d.LookupURL, "external_id=", "key=", 1) // a parameter the partner ignores
		r := run(t, "search", d)
		require.Equal(t, probe.Violation, r.Verdict, r.Finding)
		require.Contains(t, r.Finding, "does not filter by the key")
		require.Empty(t, r.Effects, "nothing sent")
	})

	t.Run("lookup that finds a never-used key", func(t *testing.T) {
		d := example("search.json", "search")
		d.LookupURL = strings.Replace(d.LookupURL, "external_id=", "key=", 1)
		lk := *d.Lookup
		lk.Match, lk.Count = nil, "" // then any listed record reads as the effect
		d.Lookup = &lk
		recs, err := sb.Records("search")
		require.NoError(t, err)
		require.Len(t, recs, 1, "one earlier ticket for the unfiltered list to show")
		r := run(t, "search", d)
		require.Equal(t, probe.Violation, r.Verdict, r.Finding)
		require.Contains(t, r.Finding, "found an effect ("+recs[0].TicketID+") for a key never used")
		require.Contains(t, r.Finding, "Declare lookup.match")
	})

	t.Run("list lookup without a reading", func(t *testing.T) {
		d := example("search.json", "search")
		d.Lookup = nil // the answer read as the record itself: an empty list names nothing
		r := run(t, "search", d)
		require.Equal(t, probe.Violation, r.Verdict, r.Finding)
		require.Contains(t, r.Finding, "cannot be read")
		require.Contains(t, r.Finding, "declare lookup.items")
		require.Empty(t, r.Effects, "nothing sent")
	})
}
