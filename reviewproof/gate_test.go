package reviewproof_test

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/reviewproof"
)

func TestVerifyGate(t *testing.T) {
	alice, bob, mallory := key(t), key(t), key(t)
	policy := reviewproof.Policy{Source: "legacy's reviewers", Reviewers: []reviewproof.Reviewer{
		{Name: "alice", Key: reviewproof.FormatPublicKey(alice.Public().(ed25519.PublicKey)), Decisions: []string{"abandon", "pause", "resume"}},
		{Name: "bob", Key: reviewproof.FormatPublicKey(bob.Public().(ed25519.PublicKey)), Decisions: []string{"retry", "delivered", "abandon"}},
	}}
	since := time.Date(2026, 3, 1, 9, 0, 0, 123456789, time.UTC)
	now := since.Add(time.Hour)
	c := reviewproof.GateChange{Destination: "legacy", Action: "pause", Reason: "maintenance", Until: now.Add(2 * time.Hour), State: "closed", Since: since}
	sign := func(k ed25519.PrivateKey, name string, c reviewproof.GateChange, at time.Time, ttl time.Duration) string {
		p, err := reviewproof.SignGate(k, name, c, at, ttl)
		require.NoError(t, err)
		return p
	}
	good := sign(alice, "alice", c, now, 15*time.Minute)
	v, err := reviewproof.VerifyGate(good, c, policy, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, reviewproof.Verified{Principal: "alice", Policy: "legacy's reviewers: alice may abandon, pause, resume"}, v)

	fresh := reviewproof.GateChange{Destination: "legacy", Action: "pause", Reason: "first", State: "closed"}
	_, err = reviewproof.VerifyGate(sign(alice, "alice", fresh, now, time.Minute), fresh, policy, now)
	require.NoError(t, err, "a gate that never changed is signed for with no since")

	review, err := reviewproof.Sign(alice, "alice", reviewproof.Decision{Key: "k", Destination: "legacy", Decision: "abandon"}, now, time.Minute)
	require.NoError(t, err)
	with := func(f func(*reviewproof.GateChange)) reviewproof.GateChange { d := c; f(&d); return d }
	parts := strings.Split(good, ".")
	for _, tc := range []struct {
		name  string
		proof string
		got   reviewproof.GateChange
		at    time.Time
		want  error
		says  string
	}{
		{"missing", "", c, now, reviewproof.ErrMissing, "--key FILE"},
		{"garbage", "a.b", c, now, reviewproof.ErrMalformed, "compact JWS"},
		{"forged with another key", sign(mallory, "alice", c, now, time.Minute), c, now, reviewproof.ErrSignature, "alice's key"},
		{"signature of other claims", parts[0] + "." + strings.Split(sign(alice, "alice", with(func(c *reviewproof.GateChange) { c.Reason = "x" }), now, time.Minute), ".")[1] + "." + parts[2],
			c, now, reviewproof.ErrSignature, "forged"},
		{"unknown key id", sign(mallory, "mallory", c, now, time.Minute), c, now, reviewproof.ErrUnknownKey, `"mallory" is not among`},
		{"a review decision's proof", review, c, now, reviewproof.ErrAudience, `aud "courier-review", not "courier-gate"`},
		{"reason altered", good, with(func(c *reviewproof.GateChange) { c.Reason = "other" }), now, reviewproof.ErrAltered, "reason"},
		{"until altered", good, with(func(c *reviewproof.GateChange) { c.Until = c.Until.Add(time.Hour) }), now, reviewproof.ErrAltered, "until"},
		{"action altered", good, with(func(c *reviewproof.GateChange) { c.Action = "resume"; c.Until = time.Time{} }), now, reviewproof.ErrAltered, `action (signed "pause")`},
		{"expired", good, c, now.Add(15 * time.Minute), reviewproof.ErrExpired, "sign"},
		{"issued in the future", sign(alice, "alice", c, now.Add(time.Hour), time.Minute), c, now, reviewproof.ErrExpired, "in the future"},
		{"another destination", good, with(func(c *reviewproof.GateChange) { c.Destination = "crm" }), now, reviewproof.ErrOtherDestination, `"legacy", this gate is "crm"'s`},
		{"replayed after the gate moved on", good, with(func(c *reviewproof.GateChange) { c.Since = now }), now, reviewproof.ErrOtherState, "sign again"},
		{"another state", good, with(func(c *reviewproof.GateChange) { c.State = "paused" }), now, reviewproof.ErrOtherState, "signed for closed"},
		{"not allowed", sign(bob, "bob", c, now, time.Minute), c, now, reviewproof.ErrNotAllowed, "bob may retry, delivered, abandon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := reviewproof.VerifyGate(tc.proof, tc.got, policy, tc.at)
			require.Error(t, err)
			require.True(t, errors.Is(err, tc.want), "%v is not %v", err, tc.want)
			require.Contains(t, err.Error(), tc.says)
		})
	}
	// A gate proof never decides a review.
	_, err = reviewproof.Verify(good, reviewproof.Decision{Destination: "legacy"}, policy, now)
	require.ErrorIs(t, err, reviewproof.ErrAudience)
	_, err = reviewproof.SignGate(alice, "alice", c, now, 25*time.Hour)
	require.ErrorContains(t, err, "at most 24h0m0s")
}

func TestCheckGateActions(t *testing.T) {
	r := reviewproof.Reviewer{Name: "ops", Key: reviewproof.FormatPublicKey(key(t).Public().(ed25519.PublicKey)), Decisions: []string{"pause", "resume"}}
	require.NoError(t, r.Check())
	r.Decisions = []string{"halt"}
	require.ErrorContains(t, r.Check(), "use retry, delivered, abandon, pause, resume")
}
