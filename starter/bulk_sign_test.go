package starter

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/reviewproof"
)

// TestSignBulk: a signed job binds the preview's filter and a fresh job id
// the job is then sent under; what a delivery cannot check is refused, and
// an unsigned job for keyed reviewers is refused before it starts.
func TestSignBulk(t *testing.T) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	sg := Signer{Name: "alice", Key: key}
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	p := BulkPreview{Filter: BulkFilter{Destination: "legacy", Tenant: "acme", ParkedBefore: now}, Matched: 1, Keys: []string{"k"},
		KeyedReviewers: []string{"legacy's reviewers"}}
	retry := BulkDecision{Decision: "retry", Reviewer: "Alice A.", Note: "outage over"}
	s := &Client{}

	require.ErrorContains(t, checkSigned(p, retry), "legacy's reviewers sign their decisions")
	d, claims, err := s.SignBulk(p, retry, sg, now)
	require.NoError(t, err)
	require.NoError(t, checkSigned(p, d))
	require.Equal(t, d.JobID, claims.Job)
	require.Equal(t, reviewproof.JobFilter{Destination: "legacy", Tenant: "acme", ParkedBefore: now}, claims.Filter)
	require.Equal(t, now.Add(DefaultProofTTL).Unix(), claims.Expires)
	one := d.decision(d.JobID, "k")
	require.Equal(t, d.Proof, one.Proof, "every delivery gets the job's one proof")

	_, _, err = s.SignBulk(p, BulkDecision{Decision: "delivered", Reviewer: "a", Note: "n"}, sg, now)
	require.ErrorContains(t, err, "delivered needs each delivery's own resource id")
	q := p
	q.Filter.Query = `CourierBusinessID STARTS_WITH "inv-"`
	_, _, err = s.SignBulk(q, retry, sg, now)
	require.ErrorContains(t, err, "takes no free-form query")
	q = p
	q.Filter.Destination = ""
	_, _, err = s.SignBulk(q, retry, sg, now)
	require.ErrorContains(t, err, "destination: required")
}
