package workflows

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/internal/text/texttest"
	"github.com/abde64c9/courier/opkey"
)

// The web UI's details of a delivery in each state it waits or ends in:
// what they say, and that every line of their code blocks shows whole in
// the details panel (the UI cuts a code block's long lines).

// detailed is a delivery at crm with one attempt, in namespace ns.
func detailed() *delivery {
	op := opkey.Operation{Tenant: "acme", Destination: "crm", Operation: "create-ticket", BusinessID: "order-7"}
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	c := contract.Contract{Dedup: contract.DedupNone, Retry: contract.Retry{MaxAttempts: 3, Deadline: contract.Duration(time.Hour)}}
	return &delivery{
		in:        DeliveryInput{Operation: op},
		namespace: "ns",
		terms:     &activities.Terms{Contract: &c},
		res: DeliveryResult{Key: opkey.Key(op), Attempts: []Attempt{
			{Number: 1, Started: at, Ended: at.Add(time.Second), Class: contract.ClassUnknown, Error: "lost"},
		}},
	}
}

// fits fails the test for a code block line the panel would cut.
func fits(t *testing.T, md string) {
	t.Helper()
	require.Empty(t, texttest.WideFenced(md), "lines over %d characters in a code block of:\n%s", texttest.FenceWidth, md)
}

func TestParkedDetails(t *testing.T) {
	d := detailed()
	d.state, d.reason = StateAwaitingReview, "attempt 1 lost its response; crm (dedup none) cannot tell whether it applied"
	d.res.Review = &Review{Evidence: "attempt 1: unknown_outcome (connection closed after the request was written: EOF); https://partner.example/api/v2/tickets?customer=acme&order=order-7 answered nothing"}
	md := d.details()
	fits(t, md)
	key := d.res.Key
	require.True(t, strings.HasPrefix(md, "**awaiting review**: attempt 1 lost its response"), md)
	for _, want := range []string{
		"courier review " + key + " \\\n  --decision delivered \\\n  --resource-id <ID-YOU-FOUND> \\\n  --reviewer <YOUR-NAME> \\\n  --note \"found it\"\n",
		"courier review " + key + " \\\n  --decision retry \\\n  --reviewer <YOUR-NAME> \\\n  --note \"it is not there\"\n",
		"courier review " + key + " \\\n  --decision abandon \\\n  --reviewer <YOUR-NAME> \\\n  --note \"why\"\n",
		"{\n  \"decision\": \"delivered\",\n  \"resource_id\": \"<ID-YOU-FOUND>\",\n  \"reviewer\": \"<YOUR-NAME>\",\n  \"note\": \"found it\"\n}",
		"courier review --all \\\n  --destination crm \\\n  --decision retry \\\n  --reviewer <YOUR-NAME> \\\n  --note \"why\" \\\n  --dry-run\n",
	} {
		require.Contains(t, md, want)
	}
	require.NotContains(t, md, "Held at")
}

func TestHeldPausedDetails(t *testing.T) {
	d := detailed()
	d.state = StatePaused
	d.held = &activities.Hold{State: string(StatePaused), Reason: "[click](http://x) (paused by alice)"}
	md := d.details()
	fits(t, md)
	require.True(t, strings.HasPrefix(md, "**paused**: \\[click\\](http://x) (paused by alice); nothing is sent"), "the reason shows as typed: %s", md)
	require.Contains(t, md, "**Held at [crm's gate](/namespaces/ns/workflows/destination-crm)**")
	require.Contains(t, md, "[every delivery held at crm](/namespaces/ns/workflows?query="+url.QueryEscape(HeldQuery("crm"))+")")
	require.Contains(t, md, "crm is paused until an operator resumes it, which releases every delivery held there:")
	require.Contains(t, md, "```\ncourier destination resume crm \\\n  --by <YOUR-NAME> \\\n  --note \"why\"\n```")
	require.NotContains(t, md, "courier review")

	d.held.Until = time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	require.Contains(t, d.details(), "crm is paused until 2026-03-01 11:00:00 UTC, then resumes by itself. Resume it sooner, which releases every delivery held there, with:")
}

func TestHeldCircuitOpenDetails(t *testing.T) {
	d := detailed()
	d.state = StateCircuitOpen
	d.held = &activities.Hold{State: string(StateCircuitOpen), Reason: "circuit open after 3 consecutive failures (last: not_sent)",
		Until: time.Date(2026, 3, 1, 9, 5, 30, 0, time.UTC)}
	md := d.details()
	fits(t, md)
	require.True(t, strings.HasPrefix(md, "**circuit open**: circuit open after 3 consecutive failures"), md)
	require.Contains(t, md, "Its breaker lets one probe attempt through at 2026-03-01 09:05:30 UTC; if crm answers, "+
		"the breaker closes and releases every delivery held there. If you know crm is back, resuming it closes the breaker at once:")
	require.Contains(t, md, "courier destination resume crm \\\n  --by <YOUR-NAME> \\\n  --note \"why\"")

	// Its gate stopped: no probe until an operator resumes it.
	d.held.Until = time.Time{}
	md = d.details()
	fits(t, md)
	require.Contains(t, md, "Its breaker lets no probe through until an operator resumes it")
}

func TestDecidedDetails(t *testing.T) {
	d := detailed()
	d.res.Status, d.state = StatusDeliveredByReview, State(StatusDeliveredByReview)
	d.res.Review = &Review{Evidence: "attempt 1: unknown_outcome (lost)", Decisions: []ReviewRecord{{
		ReviewDecision: ReviewDecision{Decision: DecisionDelivered, Reviewer: "alice", ResourceID: "T-1", Note: "found it"},
		Received:       time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), Via: "update", Accepted: true,
	}}}
	md := d.details()
	fits(t, md)
	require.True(t, strings.HasPrefix(md, "**delivered by review**: decided by `alice`, resource `T-1`: `found it`"), md)
	require.Contains(t, md, "Last decision: **delivered**, resource `T-1` by `alice` at 2026-03-01 10:00:00 UTC (via update)")
	require.NotContains(t, md, "courier review")
	require.NotContains(t, md, "courier destination")
}

// TestAttemptSummary: an Attempt after a hold says what it is, a look at
// the gate that may send nothing, or an attempt the gate released.
func TestAttemptSummary(t *testing.T) {
	d := detailed()
	require.Equal(t, "attempt 2 of 3 → crm (dedup none)", d.attemptSummary(2))
	d.heldLast = true
	require.Equal(t, "look at crm's gate; attempt 2 of 3 if it admits", d.attemptSummary(2))
	d.released = true
	require.Equal(t, "attempt 2 of 3 → crm (dedup none), released by its gate", d.attemptSummary(2))
	d.terms, d.heldLast, d.released = nil, true, false
	require.Equal(t, "look at crm's gate; attempt 1 if it admits", d.attemptSummary(1), "no contract known: no budget")
}
