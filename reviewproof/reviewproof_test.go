package reviewproof_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/reviewproof"
)

func key(t *testing.T) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return k
}

func TestVerify(t *testing.T) {
	alice, bob, mallory := key(t), key(t), key(t)
	policy := reviewproof.Policy{Source: "legacy's reviewers", Reviewers: []reviewproof.Reviewer{
		{Name: "alice", Key: reviewproof.FormatPublicKey(alice.Public().(ed25519.PublicKey)), Decisions: []string{"retry", "delivered", "abandon"}},
		{Name: "bob", Key: reviewproof.FormatPublicKey(bob.Public().(ed25519.PublicKey)), Decisions: []string{"abandon"}},
	}}
	parked := time.Date(2026, 3, 1, 9, 0, 0, 123456789, time.UTC)
	now := parked.Add(time.Hour)
	d := reviewproof.Decision{Key: "k-1", Destination: "legacy", Parked: parked, Decision: "delivered", ResourceID: "ticket-1", Note: "found it"}
	sign := func(k ed25519.PrivateKey, name string, d reviewproof.Decision, at time.Time, ttl time.Duration) string {
		p, err := reviewproof.Sign(k, name, d, at, ttl)
		require.NoError(t, err)
		return p
	}
	good := sign(alice, "alice", d, now, 10*time.Minute)
	v, err := reviewproof.Verify(good, d, policy, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, reviewproof.Verified{Principal: "alice", Policy: "legacy's reviewers: alice may retry, delivered, abandon", Key: policy.Reviewers[0].Key}, v)

	with := func(f func(*reviewproof.Decision)) reviewproof.Decision { c := d; f(&c); return c }
	parts := strings.Split(good, ".")
	for _, c := range []struct {
		name  string
		proof string
		got   reviewproof.Decision
		at    time.Time
		want  error
		says  string
	}{
		{"missing", "", d, now, reviewproof.ErrMissing, "legacy's reviewers sign"},
		{"garbage", "not-a-jws", d, now, reviewproof.ErrMalformed, "compact JWS"},
		{"forged with another key", sign(mallory, "alice", d, now, time.Minute), d, now, reviewproof.ErrSignature, "alice's key"},
		{"signature of other claims", parts[0] + "." + strings.Split(sign(alice, "alice", with(func(d *reviewproof.Decision) { d.Key = "k-2" }), now, time.Minute), ".")[1] + "." + parts[2],
			d, now, reviewproof.ErrSignature, "forged"},
		{"unknown key id", sign(mallory, "mallory", d, now, time.Minute), d, now, reviewproof.ErrUnknownKey, `"mallory" is not among legacy's reviewers (alice, bob)`},
		{"note altered", good, with(func(d *reviewproof.Decision) { d.Note = "something else" }), now, reviewproof.ErrAltered, "note"},
		{"decision altered", good, with(func(d *reviewproof.Decision) { d.Decision = "abandon"; d.ResourceID = "" }), now, reviewproof.ErrAltered, `decision (signed "delivered"), resource_id`},
		{"expired", good, d, now.Add(10 * time.Minute), reviewproof.ErrExpired, "sign the decision again"},
		{"issued in the future", sign(alice, "alice", d, now.Add(time.Hour), time.Minute), d, now, reviewproof.ErrExpired, "in the future"},
		{"another delivery", good, with(func(d *reviewproof.Decision) { d.Key = "k-2" }), now, reviewproof.ErrOtherDelivery, `"k-1", not k-2`},
		{"another destination", good, with(func(d *reviewproof.Decision) { d.Destination = "crm" }), now, reviewproof.ErrOtherDestination, `"legacy", this delivery goes to "crm"`},
		{"earlier park", good, with(func(d *reviewproof.Decision) { d.Parked = parked.Add(time.Second) }), now, reviewproof.ErrEarlierPark, "2026-03-01T09:00:00.123456789Z"},
		{"not allowed", sign(bob, "bob", d, now, time.Minute), d, now, reviewproof.ErrNotAllowed, "legacy's reviewers: bob may abandon"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := reviewproof.Verify(c.proof, c.got, policy, c.at)
			require.Error(t, err)
			require.True(t, errors.Is(err, c.want), "%v is not %v", err, c.want)
			require.Contains(t, err.Error(), c.says)
		})
	}
	_, err = reviewproof.Sign(alice, "alice", d, now, 25*time.Hour)
	require.ErrorContains(t, err, "at most 24h0m0s")
}

func TestKeys(t *testing.T) {
	k := key(t)
	f := reviewproof.NewKeyFile("you", k)
	b := []byte(`{"name": "you", "key": "` + f.Key + `"}`)
	name, got, err := reviewproof.ParseKeyFile(b)
	require.NoError(t, err)
	require.Equal(t, "you", name)
	require.True(t, k.Equal(got))
	pub, err := reviewproof.ParsePublicKey(reviewproof.FormatPublicKey(k.Public().(ed25519.PublicKey)))
	require.NoError(t, err)
	require.True(t, pub.Equal(k.Public()))

	for in, says := range map[string]string{
		"AAAA":             `does not start with "ed25519:"`,
		"ed25519:???":      "not base64",
		"ed25519:AAAAAAAA": "6 bytes; an Ed25519 public key has 32",
	} {
		_, err := reviewproof.ParsePublicKey(in)
		require.ErrorContains(t, err, says)
	}
	for in, says := range map[string]string{
		`{}`:                                     "name: missing",
		`{"name": "you", "key": "ed25519:AAAA"}`: `does not start with "ed25519-private:"`,
		`{"name": "you", "key": "ed25519-private:AAAA"}`: "32-byte Ed25519 seed",
		`ed25519:AAAA`: "not a reviewer key file",
	} {
		_, _, err := reviewproof.ParseKeyFile([]byte(in))
		require.ErrorContains(t, err, says)
	}
}
