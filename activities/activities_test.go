package activities

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/abde64c9/courier/activities/ledger"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/opkey"
)

// TestNameTheOriginal: a duplicate names the original effect, so an answer
// read as a replay that names none is an unknown outcome, saying what was
// read where; receipts say where they came from.
func TestNameTheOriginal(t *testing.T) {
	out := nameTheOriginal(Outcome{Class: contract.ClassReplayed, StatusCode: 409, Receipt: &Receipt{Replayed: true},
		Reads: []Read{{Field: "rules[0].receipt.id", Pointer: "/error/original", Value: "(absent)"}}})
	require.Equal(t, contract.ClassUnknown, out.Class)
	require.Nil(t, out.Receipt)
	require.Contains(t, out.Error, "HTTP 409 was read as a replay but names no resource id (read rules[0].receipt.id /error/original: (absent))")

	out = nameTheOriginal(Outcome{Class: contract.ClassReplayed, Receipt: &Receipt{ResourceID: "E-1", Replayed: true}})
	require.Equal(t, contract.ClassReplayed, out.Class)
	require.Equal(t, SourceReplayed, out.Receipt.Source)

	out = nameTheOriginal(Outcome{Class: contract.ClassCreated, Receipt: &Receipt{}})
	require.Equal(t, contract.ClassCreated, out.Class, "a created answer without an id is still the effect this attempt made")
	require.Equal(t, SourceCreated, out.Receipt.Source)
}

// lookingAdapter answers lookups as scripted and counts what it is asked.
type lookingAdapter struct {
	found   Found
	err     error
	lookups int
}

func (l *lookingAdapter) Deliver(context.Context, destination.Request) destination.Outcome {
	panic("lookFirst never sends")
}

func (l *lookingAdapter) Lookup(context.Context, destination.Request) (Found, error) {
	l.lookups++
	return l.found, l.err
}

// TestLookFirst: a lookup destination's attempt looks before sending when an
// earlier attempt may have applied (the workflow says so, or this run's mark
// in the outcome ledger does); found, it answers with the effect as a
// lookup found it and nothing is sent; the look failing sends nothing
// either. Any other attempt sends without looking.
func TestLookFirst(t *testing.T) {
	ctx, a := context.Background(), &Activities{}
	lookup := &contract.Contract{Dedup: contract.DedupLookup}
	found := Found{Found: true, Receipt: &Receipt{ResourceID: "rec-1", StatusCode: 200}}
	for _, c := range []struct {
		name     string
		req      Request
		own      *ledger.Entry
		ad       *lookingAdapter
		answered bool
		class    contract.Class
	}{
		{"first attempt", Request{Contract: lookup}, nil, &lookingAdapter{found: found}, false, ""},
		{"not a lookup destination", Request{Contract: &contract.Contract{Dedup: contract.DedupNone}, MayHaveApplied: true}, nil,
			&lookingAdapter{found: found}, false, ""},
		{"found after an unknown outcome", Request{Contract: lookup, MayHaveApplied: true}, nil, &lookingAdapter{found: found}, true,
			contract.ClassReplayed},
		{"found where the ledger holds this run's mark", Request{Contract: lookup}, &ledger.Entry{Status: ledger.StatusPending},
			&lookingAdapter{found: found}, true, contract.ClassReplayed},
		{"not found", Request{Contract: lookup, MayHaveApplied: true}, nil, &lookingAdapter{}, false, ""},
		{"the look failed", Request{Contract: lookup, MayHaveApplied: true}, nil, &lookingAdapter{err: errors.New("HTTP 503")}, true,
			contract.ClassNotSent},
		{"the answer names no effect", Request{Contract: lookup, MayHaveApplied: true}, nil,
			&lookingAdapter{found: Found{Found: true, Receipt: &Receipt{}}}, true, contract.ClassNotSent},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, answered := a.lookFirst(ctx, c.ad, c.req, c.own)
			require.Equal(t, c.answered, answered)
			require.Equal(t, c.class, out.Class, out.Error)
			looks := c.req.Contract.Dedup == contract.DedupLookup && (c.req.MayHaveApplied || c.own != nil)
			require.Equal(t, looks, c.ad.lookups == 1, "looked: %d", c.ad.lookups)
			if out.Class == contract.ClassReplayed {
				require.Equal(t, "rec-1", out.Receipt.ResourceID)
				require.Equal(t, SourceLookup, out.Receipt.Source)
			}
			if out.Class == contract.ClassNotSent {
				require.Contains(t, out.Error, "not sent: an earlier attempt may have applied it, and the lookup before sending again failed")
			}
		})
	}
}

// TestAdapterClassifiesNeverDecides: an adapter's answer of a class an
// attempt does not have (one that would hold the delivery, stop it for an
// earlier run, or none at all) is read as an unknown outcome, so no
// adapter can skip the decision table; the attempt's own classes pass.
func TestAdapterClassifiesNeverDecides(t *testing.T) {
	for _, cl := range []contract.Class{contract.ClassHeld, contract.ClassEarlierRun, contract.ClassUnconfigured, "", "delivered"} {
		out := attempted(destination.Outcome{Class: cl, Error: "said so"})
		require.Equal(t, contract.ClassUnknown, out.Class, "%q", cl)
		require.Contains(t, out.Error, fmt.Sprintf("the adapter answered class %q, which is not one of an attempt's classes", cl))
		require.Contains(t, out.Error, "said so")
	}
	for _, cl := range []contract.Class{destination.Created, destination.Replayed, destination.NotSent, destination.Unknown, destination.InFlight,
		destination.Conflict, destination.Rejected, destination.Throttled, destination.ServerError} {
		require.Equal(t, cl, attempted(destination.Outcome{Class: cl}).Class)
	}
}

// TestIdentify: the worker derives an attempt's key and fingerprint from
// its operation and payload; a request that carries others (a workflow
// asking under another operation's key) is refused.
func TestIdentify(t *testing.T) {
	req := Request{Tenant: "acme", Destination: "helpdesk", Operation: "create-ticket", BusinessID: "T-1",
		Payload: []byte(`{"subject":"Printer on fire"}`)}
	derived := req
	require.NoError(t, derived.Identify())
	require.Equal(t, opkey.Key(opkey.Operation{Tenant: "acme", Destination: "helpdesk", Operation: "create-ticket", BusinessID: "T-1"}), derived.Key)
	fp, err := opkey.Fingerprint(req.Payload)
	require.NoError(t, err)
	require.Equal(t, fp, derived.Fingerprint)
	again := derived
	require.NoError(t, again.Identify(), "an older run's request carries the derived ones")

	other := req
	other.Key = opkey.Key(opkey.Operation{Destination: "helpdesk", Operation: "create-ticket", BusinessID: "T-2"})
	require.ErrorContains(t, other.Identify(), "is not its operation's")
	other = req
	other.Fingerprint = "0000"
	require.ErrorContains(t, other.Identify(), "fingerprint 0000 is not its payload's")
	other = req
	other.Payload = []byte(`{"subject":`)
	require.ErrorContains(t, other.Identify(), "payload:")
}

// answering is an adapter that answers every attempt with one class.
type answering contract.Class

func (c answering) Deliver(context.Context, destination.Request) destination.Outcome {
	return destination.Outcome{Class: contract.Class(c), Receipt: &destination.Receipt{ResourceID: "T-1"}}
}

// TestTermsByDigest: where the request allows it, a created or replayed
// attempt names the terms it ran under by digest; any other class carries
// them whole, for the delivery to decide from; a request that does not
// allow it (workflow code from before) gets them whole always.
func TestTermsByDigest(t *testing.T) {
	c := contract.Contract{Dedup: contract.DedupKey, KeyHeader: "Idempotency-Key",
		Retry: contract.Retry{MaxAttempts: 3, AttemptTimeout: contract.Duration(time.Second), Deadline: contract.Duration(time.Minute)}}
	terms := Terms{Contract: &c}
	req := Request{Destination: "helpdesk", Operation: "create-ticket", BusinessID: "T-1", Payload: []byte(`{"subject":"x"}`), Attempt: 1}
	for _, tc := range []struct {
		class   contract.Class
		allowed bool
		digest  bool
	}{
		{contract.ClassCreated, true, true},
		{contract.ClassReplayed, true, true},
		{contract.ClassUnknown, true, false},
		{contract.ClassCreated, false, false},
	} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestActivityEnvironment()
		a := &Activities{Adapters: map[string]destination.Adapter{"helpdesk": answering(tc.class)}, Contracts: map[string]contract.Contract{"helpdesk": c}}
		env.RegisterActivity(a)
		r := req
		r.TermsByDigest = tc.allowed
		v, err := env.ExecuteActivity(a.Attempt, r)
		require.NoError(t, err)
		var out Outcome
		require.NoError(t, v.Get(&out))
		name := fmt.Sprintf("%s, allowed %v", tc.class, tc.allowed)
		if tc.digest {
			require.Nil(t, out.Terms, name)
			require.Equal(t, terms.Digest(), out.TermsDigest, name)
		} else {
			require.Equal(t, &terms, out.Terms, name)
			require.Empty(t, out.TermsDigest, name)
		}
	}
	require.Len(t, terms.Digest(), 16)
	other := c
	other.Dedup = contract.DedupNone
	require.NotEqual(t, terms.Digest(), Terms{Contract: &other}.Digest(), "other terms, another digest")
}
