package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/workflows"
)

// deskRow is what the desk test checks of one destination's status.
type deskRow struct {
	Name, Dedup, Configured, State, Breaker string
	Failures                                int
	Parked, Held, Retrying                  int64
}

func deskRows(desk []gateclient.Status) []deskRow {
	rows := make([]deskRow, len(desk))
	for i, g := range desk {
		configured := "unknown"
		if g.Configured != nil {
			configured = map[bool]string{true: "yes", false: "no"}[*g.Configured]
		}
		rows[i] = deskRow{Name: g.Name, Dedup: string(g.Dedup), Configured: configured, State: g.State,
			Breaker: g.Breaker.State, Failures: g.Breaker.Failures, Parked: g.Parked, Held: g.Held, Retrying: g.Retrying}
	}
	return rows
}

// awaitDesk runs `courier destination status --json` with env until it
// lists want (visibility catches up a moment after the deliveries), and
// returns what it printed last.
func (b *bulkLab) awaitDesk(env []string, want []deskRow) (result, []gateclient.Status) {
	b.t.Helper()
	var r result
	var desk []gateclient.Status
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
		r = b.runWith(env, "destination", "status", "--json")
		require.Equal(b.t, cli.CodeOK, r.code, r.stderr)
		desk = nil
		require.NoError(b.t, json.Unmarshal([]byte(r.stdout), &desk), r.stdout)
		if got := deskRows(desk); time.Now().After(deadline) || equalRows(got, want) {
			require.Equal(b.t, want, got, "courier destination status --json:\n%s", r.stdout)
			return r, desk
		}
	}
}

func equalRows(a, b []deskRow) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDestinationDesk: on a real dev server with a real worker process, a
// delivery parks at legacy (no dedup, its response lost after the commit),
// two are held at crm (paused with the courier binary) and one waits to
// retry at helpdesk (a 503, then an hour's backoff; its breaker counts the
// failure). `courier destination status`, with the workers' destinations
// file from COURIER_DESTINATIONS, lists every configured destination, the
// idle ones too, with its dedup kind, gate, breaker and exact counts, as
// JSON and as a table that fits 120 columns; with a file that lacks crm it
// marks crm's gate not configured; with no file it lists the gates, and
// says how to list the rest.
func TestDestinationDesk(t *testing.T) {
	// A 503 at helpdesk waits an hour for the next attempt, well past the
	// test, and counts toward a breaker that opens at 5.
	b := startLab(t, 10*time.Minute, func(cfg *destinations.Config) {
		h := cfg.Destinations[lab.DestHelpdesk]
		h.Contract.Retry.InitialInterval, h.Contract.Retry.MaxInterval = contract.Duration(time.Hour), contract.Duration(time.Hour)
		h.Contract.Retry.Deadline = contract.Duration(3 * time.Hour)
		h.Contract.Breaker = &contract.Breaker{Failures: 5, Window: contract.Duration(time.Hour), CoolDown: contract.Duration(time.Minute)}
		cfg.Destinations[lab.DestHelpdesk] = h
	})
	ctx, st := b.ctx, b.st

	// Parked at legacy; the helpdesk delivery created beside it waits for
	// nothing and is counted nowhere.
	_, parked, err := lab.CreatedAndParked(ctx, st.Starter, st.Sandbox.Server, [2]string{"desk-created", "desk-parked"})
	require.NoError(t, err)
	legacy, err := st.Sandbox.Records(lab.DestLegacy)
	require.NoError(t, err)
	require.Len(t, legacy, 1, "the parked delivery's ticket was stored")

	// Held at crm.
	const reason = "partner maintenance INC-7"
	pause := b.run("destination", "pause", lab.DestCRM, "--reason", reason, "--by", "alice")
	require.Equal(t, cli.CodeOK, pause.code, pause.stderr)
	var held []string
	for _, id := range []string{"desk-held-1", "desk-held-2"} {
		h, err := st.Starter.Start(ctx, lab.TicketInput(lab.DestCRM, id))
		require.NoError(t, err)
		held = append(held, h.Key)
	}

	// Retrying at helpdesk.
	require.NoError(t, st.Sandbox.Inject(lab.SandboxService(st.Config.Destinations[lab.DestHelpdesk]), sandbox.Fault{Kind: sandbox.FaultFail503}))
	retrying, err := st.Starter.Start(ctx, lab.TicketInput(lab.DestHelpdesk, "desk-retrying"))
	require.NoError(t, err)

	all := []string{"COURIER_DESTINATIONS=" + st.ConfigPath}
	r, desk := b.awaitDesk(all, []deskRow{
		{Name: lab.DestCRM, Dedup: "lookup", Configured: "yes", State: gate.Paused, Breaker: gate.Closed, Held: 2},
		{Name: lab.DestHelpdesk, Dedup: "key", Configured: "yes", State: gate.Closed, Breaker: gate.Closed, Failures: 1, Retrying: 1},
		{Name: lab.DestHelpdeskOnce, Dedup: "key", Configured: "yes", State: gate.Closed, Breaker: gate.Closed},
		{Name: lab.DestIgnoring, Dedup: "key", Configured: "yes", State: gate.Closed, Breaker: gate.Closed},
		{Name: lab.DestLedger, Dedup: "unique-commit", Configured: "yes", State: gate.Closed, Breaker: gate.Closed},
		{Name: lab.DestLegacy, Dedup: "none", Configured: "yes", State: gate.Closed, Breaker: gate.Closed, Parked: 1},
	})
	require.Empty(t, r.stderr)
	crm, helpdesk := desk[0], desk[1]
	require.NotNil(t, crm.Paused)
	require.Equal(t, reason, crm.Paused.Reason)
	require.Equal(t, "alice", crm.Paused.By)
	require.False(t, crm.Since.IsZero())
	require.NotNil(t, helpdesk.Breaker.Config, "the gate took the breaker from the workers' file")
	require.Equal(t, 5, helpdesk.Breaker.Config.Failures)
	require.Empty(t, desk[5].Transitions, "legacy has no gate")

	// What the destinations saw: nothing at crm, one 503 for the retrying
	// delivery, which waits in retry_wait.
	require.Empty(t, st.Sandbox.Requests(lab.SandboxService(st.Config.Destinations[lab.DestCRM])), "nothing is sent to a paused destination")
	for _, key := range held {
		s, err := st.Starter.Status(ctx, key)
		require.NoError(t, err)
		require.Equal(t, workflows.StatePaused, s.State, key)
	}
	s, err := st.Starter.Status(ctx, retrying.Key)
	require.NoError(t, err)
	require.Equal(t, workflows.StateRetryWait, s.State)
	require.Len(t, s.Attempts, 1)
	require.Equal(t, 503, s.Attempts[0].StatusCode)
	s, err = st.Starter.Status(ctx, parked.Key)
	require.NoError(t, err)
	require.Equal(t, workflows.StateAwaitingReview, s.State)

	t.Run("table", func(t *testing.T) {
		b.t = t
		r := b.runWith(all, "destination", "status")
		require.Equal(t, cli.CodeOK, r.code, r.stderr)
		t.Logf("courier destination status:\n%s", r.stdout)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, 10, r.stdout)
		require.Equal(t, "Unproven reviews (no reviewer keys: any typed name decides): crm, helpdesk, helpdesk-once, ignoring, ledger, legacy", lines[9])
		require.Regexp(t, `^Horizon: no outcome ledger \(\$COURIER_LEDGER\): a repeat is recognised only while the namespace keeps its run \(\S+\)$`, lines[8])
		for _, l := range lines {
			require.LessOrEqual(t, utf8.RuneCountInString(l), 120, "%q", l)
		}
		require.Equal(t, []string{"DESTINATION", "DEDUP", "STATE", "SINCE", "BREAKER", "PARKED", "HELD", "RETRYING", "WHY"}, strings.Fields(lines[0]))
		since := `\d\d-\d\d \d\d:\d\d`
		for i, want := range []string{
			`^crm\s+lookup\s+paused\s+` + since + `\s+closed\s+0\s+2\s+0\s+` + regexp.QuoteMeta(reason+" (alice)") + `$`,
			`^helpdesk\s+key\s+closed\s+(` + since + `|-)\s+closed 1/5\s+0\s+0\s+1\s+-$`,
			`^helpdesk-once\s+key\s+closed\s+-\s+closed\s+0\s+0\s+0\s+-$`,
			`^ignoring\s+key\s+closed\s+-\s+closed\s+0\s+0\s+0\s+-$`,
			`^ledger\s+unique-commit\s+closed\s+-\s+closed\s+0\s+0\s+0\s+-$`,
			`^legacy\s+none\s+closed\s+-\s+closed\s+1\s+0\s+0\s+-$`,
		} {
			require.Regexp(t, want, lines[i+1])
		}
	})

	t.Run("the horizon the ledger gives", func(t *testing.T) {
		b.t = t
		r := b.runWith(append(slices.Clone(all), "COURIER_LEDGER=sqlite:outcomes.db", "COURIER_LEDGER_RETENTION=8760h"), "destination", "status")
		require.Equal(t, cli.CodeOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "\nHorizon: a repeat answers its first outcome for 8760h0m0s (the outcome ledger's retention, $COURIER_LEDGER_RETENTION)\n")
		r = b.runWith(append(slices.Clone(all), "COURIER_LEDGER=sqlite:outcomes.db"), "destination", "status")
		require.Contains(t, r.stdout, "\nHorizon: a repeat answers its first outcome for ever (the outcome ledger, $COURIER_LEDGER)\n")
		r = b.runWith(append(slices.Clone(all), "COURIER_LEDGER_RETENTION=-1h"), "destination", "status")
		require.Equal(t, cli.CodeUsage, r.code, r.stderr)
	})

	t.Run("a gate the file does not list", func(t *testing.T) {
		b.t = t
		cfg := st.Config
		cfg.Destinations = map[string]destinations.Destination{}
		for name, d := range st.Config.Destinations {
			if name != lab.DestCRM {
				cfg.Destinations[name] = d
			}
		}
		file := filepath.Join(t.TempDir(), "without-crm.json")
		require.NoError(t, lab.WriteDestinations(file, cfg))
		// --destinations wins over COURIER_DESTINATIONS.
		r := b.runWith(all, "destination", "status", "--destinations", file, "--json")
		require.Equal(t, cli.CodeOK, r.code, r.stderr)
		var desk []gateclient.Status
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &desk), r.stdout)
		require.Len(t, desk, 6)
		require.Equal(t, deskRow{Name: lab.DestCRM, Configured: "no", State: gate.Paused, Breaker: gate.Closed, Held: 2}, deskRows(desk)[0])
		r = b.runWith(all, "destination", "status", "--destinations", file)
		require.Equal(t, cli.CodeOK, r.code, r.stderr)
		require.Regexp(t, `(?m)^crm\s+not configured\s+paused\s`, r.stdout)
	})

	t.Run("no file", func(t *testing.T) {
		b.t = t
		r := b.runWith([]string{"COURIER_DESTINATIONS="}, "destination", "status", "--json")
		require.Equal(t, cli.CodeOK, r.code, r.stderr)
		var desk []gateclient.Status
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &desk), r.stdout)
		require.Equal(t, []deskRow{
			{Name: lab.DestCRM, Configured: "unknown", State: gate.Paused, Breaker: gate.Closed, Held: 2},
			{Name: lab.DestHelpdesk, Configured: "unknown", State: gate.Closed, Breaker: gate.Closed, Failures: 1, Retrying: 1},
		}, deskRows(desk), "only the gates")
		require.Equal(t, "only destinations with a gate are listed; for every configured one: "+
			"--destinations FILE, or export COURIER_DESTINATIONS=FILE (the workers' destinations file)\n", r.stderr)
	})
}
