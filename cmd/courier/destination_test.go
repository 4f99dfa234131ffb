package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/internal/cli"
)

// TestPrintDeskShowsAStoppedGate: a gate stopped while paused reads as
// such, with how to move on; one stopped while closed is just closed.
func TestPrintDeskShowsAStoppedGate(t *testing.T) {
	var out, errs bytes.Buffer
	require.NoError(t, printDesk(&out, &errs, []gateclient.Status{
		{DestinationState: gate.DestinationState{Name: "legacy", State: gate.Paused, Stopped: "terminated"}, Waiting: gateclient.Waiting{Held: 2}},
		{DestinationState: gate.DestinationState{Name: "plain", State: gate.Closed, Stopped: "canceled"}},
	}))
	require.Contains(t, out.String(), "paused (gate terminated)")
	require.NotContains(t, out.String(), "gate canceled")
	require.Equal(t, "legacy: its gate was terminated while paused; it holds until: "+
		"courier destination resume legacy --by <YOUR-NAME> (clears it) or courier destination pause legacy --reason \"why\" --by <YOUR-NAME> (restores it)\n", errs.String())
}

// TestPrintDeskFitsTheTerminal: every line of the table fits 120 columns,
// the why cut to what the other columns leave; a destination the file does
// not list is marked, and the breaker shows its failures.
func TestPrintDeskFitsTheTerminal(t *testing.T) {
	since := time.Date(2026, 3, 4, 5, 6, 7, 0, time.Local)
	long := strings.Repeat("partner maintenance, see INC-42 and the runbook; ", 4)
	yes, no := true, false
	var out, errs bytes.Buffer
	require.NoError(t, printDesk(&out, &errs, []gateclient.Status{
		{DestinationState: gate.DestinationState{Name: "crm", State: gate.Paused, Since: since, Breaker: gate.Breaker{State: gate.Closed},
			Transitions: []gate.Transition{{At: since, From: gate.Closed, To: gate.Paused, By: "alice", Why: long}}},
			Waiting: gateclient.Waiting{Held: 2}, Dedup: contract.DedupLookup, Configured: &yes},
		{DestinationState: gate.DestinationState{Name: "helpdesk", State: gate.Closed,
			Breaker: gate.Breaker{State: gate.Closed, Failures: 1, Config: &contract.Breaker{Failures: 5}}},
			Waiting: gateclient.Waiting{Retrying: 1}, Dedup: contract.DedupKey, Configured: &yes},
		{DestinationState: gate.DestinationState{Name: "ledger", State: gate.Closed, Breaker: gate.Breaker{State: gate.Closed}},
			Dedup: contract.DedupUniqueCommit, Configured: &yes},
		{DestinationState: gate.DestinationState{Name: "retired", State: gate.Open, Since: since, Breaker: gate.Breaker{State: gate.Open, Failures: 5}},
			Configured: &no},
	}))
	require.Empty(t, errs.String())
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 5, out.String())
	for _, l := range lines {
		require.LessOrEqual(t, utf8.RuneCountInString(l), deskWidth, "%q", l)
	}
	require.Equal(t, []string{"DESTINATION", "DEDUP", "STATE", "SINCE", "BREAKER", "PARKED", "HELD", "RETRYING", "WHY"}, strings.Fields(lines[0]))
	crm := lines[1]
	require.True(t, strings.HasPrefix(crm, "crm "), crm)
	require.Contains(t, crm, " lookup ")
	require.Contains(t, crm, " paused ")
	require.Contains(t, crm, " 03-04 05:06 ")
	require.Contains(t, crm, " partner maintenance, see INC-42")
	require.True(t, strings.HasSuffix(crm, "…"), "the long why is cut: %q", crm)
	require.Regexp(t, `^helpdesk\s+key\s+closed\s+-\s+closed 1/5\s+0\s+0\s+1\s+-$`, lines[2])
	require.Regexp(t, `^ledger\s+unique-commit\s+closed\s+-\s+closed\s+0\s+0\s+0\s+-$`, lines[3])
	require.Regexp(t, `^retired\s+not configured\s+open\s+03-04 05:06\s+open 5\s+0\s+0\s+0\s+-$`, lines[4])

	// A why that just fits is whole.
	desk := []gateclient.Status{{DestinationState: gate.DestinationState{Name: "crm", State: gate.Paused, Since: since,
		Breaker: gate.Breaker{State: gate.Closed}, Transitions: []gate.Transition{{By: "alice", Why: "-"}}}}}
	out.Reset()
	require.NoError(t, printDesk(&out, &errs, desk))
	room := deskWidth - strings.Index(out.String(), "WHY")
	fits := strings.Repeat("x", room-len(" (alice)"))
	desk[0].Transitions[0].Why = fits
	out.Reset()
	require.NoError(t, printDesk(&out, &errs, desk))
	require.Contains(t, out.String(), " "+fits+" (alice)\n")
	desk[0].Transitions[0].Why += "x"
	out.Reset()
	require.NoError(t, printDesk(&out, &errs, desk))
	require.Contains(t, out.String(), " "+fits+"x (alic…\n", "one more is cut, to fit with its ellipsis")
}

// TestDestinationStatusWithoutAFileHints: with no destinations file, the
// desk lists only the gates and says, on one line of stderr, how to list
// every configured destination; it says so before it dials Temporal.
func TestDestinationStatusWithoutAFileHints(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv(envDestinations, "")
	_, stderr, err := runCourier(context.Background(), "destination", "status")
	require.ErrorContains(t, err, "cannot reach Temporal at 127.0.0.1:1")
	require.Equal(t, "only destinations with a gate are listed; for every configured one: "+
		"--destinations FILE, or export COURIER_DESTINATIONS=FILE (the workers' destinations file)\n", stderr)

	_, stderr, err = runCourier(context.Background(), "destination", "status", "legacy")
	require.ErrorContains(t, err, "cannot reach Temporal at 127.0.0.1:1")
	require.Empty(t, stderr, "one destination asked for by name needs no hint")
}

// TestDestinationStatusRefusesABadFile: a destinations file that does not
// load stops the desk before it dials Temporal, with a usage status, what
// is wrong, which setting named the file and how to go on; --destinations
// wins over COURIER_DESTINATIONS.
func TestDestinationStatusRefusesABadFile(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	good := writeDestinations(t, goodDestinations)
	badDedup := writeDestinations(t, strings.Replace(goodDestinations, `"dedup": "key"`, `"dedup": "maybe"`, 1))
	missing := filepath.Join(t.TempDir(), "gone.json")
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want []string
	}{
		{"missing file from the environment", missing, nil,
			[]string{"gone.json", "no such file", "fix the file COURIER_DESTINATIONS names, or point COURIER_DESTINATIONS at the workers' destinations file"}},
		{"bad file from the flag", good, []string{"--destinations", badDedup},
			[]string{`destination "helpdesk" (line 3)`, `contract.dedup: unknown kind "maybe"`, "fix the file --destinations names", "its format is in docs/destinations.md"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envDestinations, tc.env)
			_, stderr, err := runCourier(context.Background(), append([]string{"destination", "status", "--json"}, tc.args...)...)
			var ee *cli.ExitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, cli.CodeUsage, ee.Code, err.Error())
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.NotContains(t, err.Error(), "cannot reach Temporal", "the file is read before dialing")
			require.Empty(t, stderr)
		})
	}
	t.Run("the flag wins", func(t *testing.T) {
		t.Setenv(envDestinations, missing)
		_, _, err := runCourier(context.Background(), "destination", "status", "--destinations", good)
		require.ErrorContains(t, err, "cannot reach Temporal at 127.0.0.1:1")
	})
}
