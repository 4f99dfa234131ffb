package reviewproof_test

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/reviewproof"
)

func TestVerifyJob(t *testing.T) {
	alice, bob, mallory := key(t), key(t), key(t)
	policy := reviewproof.Policy{Source: "legacy's reviewers", Reviewers: []reviewproof.Reviewer{
		{Name: "alice", Key: reviewproof.FormatPublicKey(alice.Public().(ed25519.PublicKey)), Decisions: []string{"retry", "abandon"}},
		{Name: "bob", Key: reviewproof.FormatPublicKey(bob.Public().(ed25519.PublicKey)), Decisions: []string{"abandon"}},
	}}
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	job := reviewproof.Job{ID: "courier-review-1", Decision: "retry", Note: "outage over",
		Filter: reviewproof.JobFilter{Destination: "legacy", Tenant: "acme", Operation: "create-ticket", ParkedBefore: now}}
	d := reviewproof.JobDelivery{Destination: "legacy", Tenant: "acme", Operation: "create-ticket",
		Parked: now.Add(-time.Hour), BatchJob: job.ID, Decision: "retry", Note: "outage over"}
	sign := func(k ed25519.PrivateKey, name string, j reviewproof.Job, at time.Time) string {
		p, err := reviewproof.SignJob(k, name, j, at, 15*time.Minute)
		require.NoError(t, err)
		return p
	}
	good := sign(alice, "alice", job, now)
	v, err := reviewproof.VerifyJob(good, d, policy, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, reviewproof.Verified{Principal: "alice", Policy: "legacy's reviewers: alice may retry, abandon", Key: policy.Reviewers[0].Key}, v)

	// Any tenant or operation when the job names none.
	wide := job
	wide.Filter.Tenant, wide.Filter.Operation = "", ""
	other := d
	other.Tenant, other.Operation = "globex", "close-ticket"
	_, err = reviewproof.VerifyJob(sign(alice, "alice", wide, now), other, policy, now)
	require.NoError(t, err)

	withD := func(f func(*reviewproof.JobDelivery)) reviewproof.JobDelivery { c := d; f(&c); return c }
	withJ := func(f func(*reviewproof.Job)) reviewproof.Job { c := job; f(&c); return c }
	single, err := reviewproof.Sign(alice, "alice", reviewproof.Decision{Key: "k-1", Destination: "legacy", Parked: d.Parked,
		Decision: "retry", Note: "outage over"}, now, time.Minute)
	require.NoError(t, err)
	for _, c := range []struct {
		name  string
		proof string
		got   reviewproof.JobDelivery
		at    time.Time
		want  error
		says  string
	}{
		{"missing", "", d, now, reviewproof.ErrMissing, "courier review --all ... --key FILE"},
		{"garbage", "a.b", d, now, reviewproof.ErrMalformed, "compact JWS"},
		{"forged", sign(mallory, "alice", job, now), d, now, reviewproof.ErrSignature, "alice's key"},
		{"unknown key id", sign(mallory, "mallory", job, now), d, now, reviewproof.ErrUnknownKey, `"mallory" is not among`},
		{"one delivery's proof", single, d, now, reviewproof.ErrAudience, `aud "courier-review", not "courier-review-job"`},
		{"expired", good, d, now.Add(15 * time.Minute), reviewproof.ErrExpired, "sign the decision again"},
		{"another job", good, withD(func(d *reviewproof.JobDelivery) { d.BatchJob = "courier-review-2" }), now, reviewproof.ErrOtherJob, `signed for "courier-review-1"`},
		{"another destination", good, withD(func(d *reviewproof.JobDelivery) { d.Destination = "crm" }), now, reviewproof.ErrOutsideJob, `destination "crm", not "legacy"`},
		{"another tenant", good, withD(func(d *reviewproof.JobDelivery) { d.Tenant = "globex" }), now, reviewproof.ErrOutsideJob, `tenant "globex", not "acme"`},
		{"another operation", good, withD(func(d *reviewproof.JobDelivery) { d.Operation = "close-ticket" }), now, reviewproof.ErrOutsideJob, `operation "close-ticket"`},
		{"parked after", good, withD(func(d *reviewproof.JobDelivery) { d.Parked = now }), now, reviewproof.ErrParkedAfter, "decides those parked before 2026-03-01T10:00:00Z"},
		{"decision altered", good, withD(func(d *reviewproof.JobDelivery) { d.Decision = "abandon" }), now, reviewproof.ErrAltered, `decision (signed "retry")`},
		{"note altered", good, withD(func(d *reviewproof.JobDelivery) { d.Note = "x" }), now, reviewproof.ErrAltered, "note"},
		{"not allowed", sign(bob, "bob", job, now), d, now, reviewproof.ErrNotAllowed, "bob may abandon"},
	} {
		_, err := reviewproof.VerifyJob(c.proof, c.got, policy, c.at)
		require.True(t, errors.Is(err, c.want), "%s: %v", c.name, err)
		require.Contains(t, err.Error(), c.says, c.name)
	}

	// A job proof never decides one delivery.
	_, err = reviewproof.Verify(good, reviewproof.Decision{Key: "k-1", Destination: "legacy", Parked: d.Parked,
		Decision: "retry", Note: "outage over"}, policy, now)
	require.ErrorIs(t, err, reviewproof.ErrAudience)

	// A filter a delivery could not hold itself to is not signed.
	_, err = reviewproof.SignJob(alice, "alice", withJ(func(j *reviewproof.Job) { j.Filter.Destination = "" }), now, time.Minute)
	require.ErrorContains(t, err, "destination: required")
	_, err = reviewproof.SignJob(alice, "alice", withJ(func(j *reviewproof.Job) { j.Filter.ParkedBefore = time.Time{} }), now, time.Minute)
	require.ErrorContains(t, err, "parked_before: required")
	_, err = reviewproof.SignJob(alice, "alice", job, now, 25*time.Hour)
	require.ErrorContains(t, err, "at most 24h0m0s")
}
