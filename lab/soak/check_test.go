package soak

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// TestChecksCatchViolations: the soak's checks flag each kind of violation
// they claim to, so a clean soak means something.
func TestChecksCatchViolations(t *testing.T) {
	r := &run{}
	r.sum.ReviewsBy = map[string]int{}
	var found []string
	bad := func(d *delivery, format string, args ...any) {
		found = append(found, d.in.BusinessID+": "+fmt.Sprintf(format, args...))
	}
	lost := func(d *delivery, format string, args ...any) {
		r.sum.Lost++
		bad(d, format, args...)
	}
	mk := func(dest string, dedup contract.Dedup, id string) *delivery {
		d := &delivery{dedup: dedup, in: workflows.DeliveryInput{Operation: opkey.Operation{
			Tenant: "soak", Destination: dest, Operation: "create-ticket", BusinessID: id}}}
		d.key = opkey.Key(d.in.Operation)
		r.deliveries = append(r.deliveries, d)
		return d
	}
	two := []lab.Effect{{Dest: lab.DestLegacy, ID: "ticket-1"}, {Dest: lab.DestLegacy, ID: "ticket-2"}}
	created := func(id string) workflows.DeliveryResult {
		return workflows.DeliveryResult{Status: workflows.StatusCreated, Receipt: &activities.Receipt{ResourceID: id}}
	}

	// Two effects at a key destination: a duplicate.
	r.checkEffects(mk(lab.DestHelpdesk, contract.DedupKey, "k"), two, nil, bad)
	require.Equal(t, 1, r.sum.Duplicates)
	require.Len(t, found, 1)

	// Two effects at a none destination: a duplicate without a review
	// decision, a reviewed repeat after a reviewer's retry.
	none := mk(lab.DestLegacy, contract.DedupNone, "n")
	r.checkEffects(none, two, &workflows.DeliveryResult{}, bad)
	require.Equal(t, 2, r.sum.Duplicates)
	retried := workflows.DeliveryResult{Review: &workflows.Review{Decisions: []workflows.ReviewRecord{
		{ReviewDecision: workflows.ReviewDecision{Decision: workflows.DecisionRetry, Reviewer: "soak"}, Accepted: true}}}}
	r.checkEffects(none, two, &retried, bad)
	require.Equal(t, 2, r.sum.Duplicates)
	require.Equal(t, 1, r.sum.ReviewedRepeats)
	require.Len(t, found, 2)

	// Created, but the destination holds nothing: lost.
	r.checkStatus(mk(lab.DestHelpdesk, contract.DedupKey, "l"), nil, created("ticket-9"), lost, bad)
	require.Equal(t, 1, r.sum.Lost)
	// Created with a receipt that names no stored effect.
	r.checkStatus(mk(lab.DestHelpdesk, contract.DedupKey, "r"), two[:1], created("ticket-9"), lost, bad)
	require.Contains(t, found[len(found)-1], "names none of the stored effects")
	// Rejected although its payload was valid, and an effect exists.
	r.checkStatus(mk(lab.DestHelpdesk, contract.DedupKey, "v"), two[:1],
		workflows.DeliveryResult{Status: workflows.StatusRejected}, lost, bad)
	require.Contains(t, found[len(found)-2], "rejected, but the destination holds")
	require.Contains(t, found[len(found)-1], "rejected a valid payload")
	// Gave up while its effect exists.
	r.checkStatus(mk(lab.DestHelpdesk, contract.DedupKey, "a"), two[:1],
		workflows.DeliveryResult{Status: workflows.StatusAttemptLimit}, lost, bad)
	require.Contains(t, found[len(found)-1], "gave up")

	// An effect of no delivery, and one stored under another key.
	n := len(found)
	r.checkOrphans(map[string][]lab.Effect{
		"k":     {{Dest: lab.DestHelpdesk, ID: "ticket-1", Key: r.deliveries[0].key}},
		"k2":    {{Dest: lab.DestHelpdesk, ID: "ticket-3"}},
		"n":     {{Dest: lab.DestLegacy, ID: "ticket-4", Key: r.deliveries[0].key}},
		"other": {{Dest: lab.DestLedger, ID: "result-x"}},
	}, bad)
	require.Len(t, r.sum.Violations, 2, "k2 and other belong to no delivery: %v", r.sum.Violations)
	require.Len(t, found, n+1, "n's effect is under k's key")
	require.Contains(t, found[n], "not the delivery's")
}
