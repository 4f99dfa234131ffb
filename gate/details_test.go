package gate

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/internal/text/texttest"
	"github.com/abde64c9/courier/workflows"
)

// The web UI's details of a gate, closed, paused and open: what they say,
// that an operator's text shows as typed, and that every line of their code
// blocks shows whole in the details panel.

var (
	detailsAt      = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	detailsBreaker = &contract.Breaker{Failures: 3, Window: contract.Duration(time.Minute), CoolDown: contract.Duration(30 * time.Second)}
)

// gateDetails are s's details in namespace ns, checked to fit the panel.
func gateDetails(t *testing.T, s DestinationState) string {
	t.Helper()
	md := details(s, "ns")
	require.Empty(t, texttest.WideFenced(md), "lines over %d characters in a code block of:\n%s", texttest.FenceWidth, md)
	require.Contains(t, md, "[deliveries held at crm](/namespaces/ns/workflows?query="+url.QueryEscape(workflows.HeldQuery("crm"))+")")
	require.Contains(t, md, "[deliveries parked at crm](/namespaces/ns/workflows?query="+url.QueryEscape(workflows.ParkedQuery("crm"))+")")
	return md
}

func TestClosedDetails(t *testing.T) {
	md := gateDetails(t, DestinationState{Name: "crm", State: Closed, Since: detailsAt, Breaker: Breaker{State: Closed}})
	require.True(t, strings.HasPrefix(md, "**closed**: attempts go to crm · since 2026-03-01 09:00:00 UTC\n\n**Breaker**: closed\n\n"), md)
	require.Contains(t, md, "```\ncourier destination pause crm \\\n  --reason \"why\" \\\n  --by <YOUR-NAME>\n```")
	require.NotContains(t, md, "resume")
	require.NotContains(t, md, "Transitions")

	// Closed again by an operator, with failures counted since.
	s := DestinationState{Name: "crm", State: Closed, Since: detailsAt.Add(time.Hour),
		Breaker: Breaker{State: Closed, Failures: 1, WindowStart: detailsAt.Add(2 * time.Hour), LastFailure: "not_sent: HTTP 503", Config: detailsBreaker},
		Recent:  []Report{{Class: contract.ClassCreated}, {Class: contract.ClassNotSent}},
		Transitions: []Transition{
			{At: detailsAt, From: Closed, To: Paused, By: "alice", Why: "INC-7"},
			{At: detailsAt.Add(time.Hour), From: Paused, To: Closed, By: "bob", Why: "resumed: done"},
		}}
	md = gateDetails(t, s)
	require.True(t, strings.HasPrefix(md, "**closed**: attempts go to crm · by `bob` since 2026-03-01 10:00:00 UTC: resumed: done\n\n"+
		"**Breaker**: closed · failures: 1 since 2026-03-01 11:00:00 UTC · last failure: `not_sent: HTTP 503` · "+
		"opens at 3 failures within 1m0s; cool-down 30s\n\n"), md)
	require.Contains(t, md, "Latest reports, newest last: created, not\\_sent")
	require.Contains(t, md, "\n- 2026-03-01 09:00:00 UTC: closed → paused by `alice`: INC-7\n- 2026-03-01 10:00:00 UTC: paused → closed by `bob`: resumed: done")
}

func TestPausedDetails(t *testing.T) {
	reason := "[click](http://x)"
	s := DestinationState{Name: "crm", State: Paused, Since: detailsAt, Breaker: Breaker{State: Closed},
		Paused:      &Pause{Reason: reason, By: "alice", Since: detailsAt, Until: detailsAt.Add(2 * time.Hour)},
		Transitions: []Transition{{At: detailsAt, From: Closed, To: Paused, By: "alice", Why: reason}}}
	md := gateDetails(t, s)
	require.True(t, strings.HasPrefix(md, "**paused**: \\[click\\](http://x) · by `alice` since 2026-03-01 09:00:00 UTC, "+
		"until 2026-03-01 11:00:00 UTC; no attempt is sent to crm\n\n"), "the reason shows as typed: %s", md)
	require.NotContains(t, md, "[click]", "no link made of the reason")
	require.Contains(t, md, "To resume it, which also closes its breaker if open and releases every delivery held here:\n\n"+
		"```\ncourier destination resume crm \\\n  --by <YOUR-NAME> \\\n  --note \"why\"\n```")
	require.NotContains(t, md, "destination pause")
}

func TestOpenDetails(t *testing.T) {
	why := "3 consecutive failures within 1m0s (last: not_sent: HTTP 503)"
	s := DestinationState{Name: "crm", State: Open, Since: detailsAt,
		Breaker:     Breaker{State: Open, Failures: 3, OpenedAt: detailsAt, LastFailure: "not_sent: HTTP 503", Config: detailsBreaker},
		Transitions: []Transition{{At: detailsAt, From: Closed, To: Open, By: "breaker", Why: why}}}
	md := gateDetails(t, s)
	require.True(t, strings.HasPrefix(md, "**open**: no attempt is sent to crm until the breaker's probe · by `breaker` since "+
		"2026-03-01 09:00:00 UTC: 3 consecutive failures within 1m0s (last: not\\_sent: HTTP 503)\n\n"+
		"**Breaker**: open since 2026-03-01 09:00:00 UTC (failures: 3) · lets one probe attempt through from 2026-03-01 09:00:30 UTC"), md)
	require.Contains(t, md, "To close the breaker now, without waiting for the probe, when you know crm is back")
	require.Contains(t, md, "courier destination resume crm \\\n  --by <YOUR-NAME> \\\n")

	s.State, s.Breaker.State, s.Breaker.ProbeKey, s.Breaker.ProbeAt = HalfOpen, HalfOpen, "6f1c0e7e-0000-5000-8000-000000000000", detailsAt.Add(time.Minute)
	md = gateDetails(t, s)
	require.True(t, strings.HasPrefix(md, "**half open**: one probe attempt is out; the rest wait for its answer · since 2026-03-01 09:00:00 UTC"), md)
	require.Contains(t, md, "**Breaker**: half open · probe attempt `6f1c0e7e-0000-5000-8000-000000000000` let through at 2026-03-01 09:01:00 UTC; "+
		"its answer closes or reopens it, and if none comes another probe goes at 2026-03-01 09:03:00 UTC")
	require.Contains(t, md, "courier destination resume crm")
}

// TestDetailsQuoteTheName: a gate's name goes into the commands its page
// shows shell-quoted, so a name cannot add a command to the one an
// operator pastes.
func TestDetailsQuoteTheName(t *testing.T) {
	name := "legacy; curl -s x | sh #"
	md := details(DestinationState{Name: name, State: Closed, Since: detailsAt, Breaker: Breaker{State: Closed}}, "ns")
	require.Contains(t, md, "courier destination pause 'legacy; curl -s x | sh #' \\\n  --reason")
	md = details(DestinationState{Name: name, State: Paused, Since: detailsAt, Breaker: Breaker{State: Closed},
		Paused: &Pause{Reason: "r", By: "alice", Since: detailsAt}}, "ns")
	require.Contains(t, md, "courier destination resume 'legacy; curl -s x | sh #' \\\n  --by <YOUR-NAME>")
}
