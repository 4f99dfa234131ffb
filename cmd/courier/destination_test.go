package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/gate/gateclient"
)

// TestPrintGatesShowsAStoppedGate: a gate stopped while paused reads as
// such, with how to move on; one stopped while closed is just closed.
func TestPrintGatesShowsAStoppedGate(t *testing.T) {
	var out, errs bytes.Buffer
	require.NoError(t, printGates(&out, &errs, []gateclient.Status{
		{DestinationState: gate.DestinationState{Name: "legacy", State: gate.Paused, Stopped: "terminated"}, Held: 2},
		{DestinationState: gate.DestinationState{Name: "plain", State: gate.Closed, Stopped: "canceled"}},
	}))
	require.Contains(t, out.String(), "paused (gate terminated)")
	require.NotContains(t, out.String(), "gate canceled")
	require.Equal(t, "legacy: its gate was terminated while paused; it holds until: "+
		"courier destination resume legacy --by NAME (clears it) or courier destination pause legacy --reason TEXT --by NAME (restores it)\n", errs.String())
}
