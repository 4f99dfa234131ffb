package activities

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/reviewproof"
)

// TestCheckSigner: a signer decides only while the workers' current file
// lists its name with its key, allowed the decision, at the destination
// (its own reviewers, or the default for one the file no longer names).
func TestCheckSigner(t *testing.T) {
	pub := func() string {
		k, _, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		return reviewproof.FormatPublicKey(k)
	}
	alice, bob, ops := pub(), pub(), pub()
	a := &Activities{
		Reviewing: map[string]Reviewing{
			"legacy": {Policy: &reviewproof.Policy{Source: "legacy's reviewers", Reviewers: []reviewproof.Reviewer{
				{Name: "alice", Key: alice, Decisions: []string{"abandon"}},
			}}},
			"plain": {Names: []string{"ops"}},
		},
		DefaultPolicy: &reviewproof.Policy{Source: "the default reviewers", Reviewers: []reviewproof.Reviewer{
			{Name: "ops", Key: ops, Decisions: reviewproof.Decisions},
		}},
	}
	for _, c := range []struct {
		name string
		s    Signer
		says string
	}{
		{"listed", Signer{Destination: "legacy", Reviewer: "alice", PublicKey: alice, Decision: "abandon"}, ""},
		{"removed", Signer{Destination: "legacy", Reviewer: "bob", PublicKey: bob, Decision: "abandon"},
			"key of reviewer bob for destination legacy is no longer in the destinations file"},
		{"same name, another key", Signer{Destination: "legacy", Reviewer: "alice", PublicKey: bob, Decision: "abandon"},
			"key of reviewer alice for destination legacy is no longer in the destinations file"},
		{"decision taken away", Signer{Destination: "legacy", Reviewer: "alice", PublicKey: alice, Decision: "retry"},
			"reviewer alice may no longer decide retry at destination legacy: the destinations file now gives legacy's reviewers: alice may abandon"},
		{"reviewers without keys now", Signer{Destination: "plain", Reviewer: "ops", PublicKey: ops, Decision: "retry"},
			"key of reviewer ops for destination plain is no longer in the destinations file"},
		{"a destination the file no longer names takes the default", Signer{Destination: "gone", Reviewer: "ops", PublicKey: ops, Decision: "retry"}, ""},
		{"not in the default", Signer{Destination: "gone", Reviewer: "alice", PublicKey: alice, Decision: "abandon"},
			"key of reviewer alice for destination gone is no longer in the destinations file"},
	} {
		why, err := a.CheckSigner(context.Background(), c.s)
		require.NoError(t, err, c.name)
		if c.says == "" {
			require.Empty(t, why, c.name)
		} else {
			require.Contains(t, why, c.says, c.name)
		}
	}
}
