package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/workflows"
)

// destKeyed2 is legacy's service under the same keyed reviewers: a proof
// alice signed for legacy verifies there, so only the job's filter keeps
// it out.
const destKeyed2 = "legacy-keyed2"

// reviewerKeys are test reviewers' private keys, by name.
type reviewerKeys map[string]ed25519.PrivateKey

func newReviewerKeys(t *testing.T, names ...string) reviewerKeys {
	keys := reviewerKeys{}
	for _, name := range names {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		keys[name] = k
	}
	return keys
}

// pub is name's public key as the destinations file holds it.
func (k reviewerKeys) pub(name string) string {
	return reviewproof.FormatPublicKey(k[name].Public().(ed25519.PublicKey))
}

// file writes name's key file into dir, as courier review keygen does.
func (k reviewerKeys) file(t *testing.T, dir, name string) string {
	p := filepath.Join(dir, name+".key")
	kb, err := json.Marshal(reviewproof.NewKeyFile(name, k[name]))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, kb, 0o600))
	return p
}

// TestReviewAllSigned: at a destination whose reviewers have keys, an
// unsigned --all is refused before any job starts; a job alice signs
// decides exactly the parked deliveries inside its filter, each verifying
// the proof itself; the same proof sent by hand to deliveries outside the
// filter (another tenant, operation or destination, or parked after
// parked-before) is ignored with the reason, as are an expired job proof
// and a job signed by a reviewer not allowed the decision.
func TestReviewAllSigned(t *testing.T) {
	keys := newReviewerKeys(t, "alice", "bob")
	pub := keys.pub
	b := startLab(t, 10*time.Minute, func(cfg *destinations.Config) {
		cfg.Reviewers = destinations.Plain("ops")
		legacy := cfg.Destinations[lab.DestLegacy]
		legacy.Reviewers = destinations.Reviewers{
			{Name: "alice", Key: pub("alice"), Decisions: []string{"retry", "abandon"}},
			{Name: "bob", Key: pub("bob"), Decisions: []string{"abandon"}},
		}
		cfg.Destinations[lab.DestLegacy] = legacy
		cfg.Destinations[destKeyed2] = legacy
	})
	ctx, st := b.ctx, b.st
	dir := t.TempDir()
	keyFile := func(name string) string { return keys.file(t, dir, name) }
	park := func(dest, tenant, op, id string) string {
		t.Helper()
		require.NoError(t, st.Sandbox.Inject(lab.SandboxService(st.Config.Destinations[dest]), sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
		s, err := st.Starter.Deliver(ctx, workflows.DeliveryInput{
			Operation: opkey.Operation{Tenant: tenant, Destination: dest, Operation: op, BusinessID: id},
			Payload:   lab.Ticket(id, "signed bulk "+id),
		})
		require.NoError(t, err)
		require.Equal(t, workflows.StateAwaitingReview, s.State, "%s parks: its response was lost after the commit", id)
		return s.Key
	}
	const op = "create-ticket"
	inside := []string{park(lab.DestLegacy, "acme", op, "in-1"), park(lab.DestLegacy, "acme", op, "in-2"), park(lab.DestLegacy, "acme", op, "in-3")}
	otherTenant := park(lab.DestLegacy, "globex", op, "other-tenant")
	otherOp := park(lab.DestLegacy, "acme", "close-ticket", "other-op")
	otherDest := park(destKeyed2, "acme", op, "other-dest")
	parkedBefore := time.Now().UTC()
	late := park(lab.DestLegacy, "acme", op, "late")
	b.awaitCount(fmt.Sprintf("CourierState = %q", workflows.StateAwaitingReview), 7)

	filter := []string{"--destination", lab.DestLegacy, "--tenant", "acme", "--operation", op, "--parked-before", parkedBefore.Format(time.RFC3339Nano)}
	retry := func(more ...string) []string {
		return append([]string{"review", "--all", "--decision", "retry", "--reviewer", "Alice A.", "--note", "outage over"}, more...)
	}

	// Unsigned: the dry run warns, and --yes is refused before any job starts.
	r := b.runWith([]string{envReviewerKey + "="}, retry(append(filter, "--dry-run")...)...)
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "legacy's reviewers sign their decisions: without --key FILE, --yes would be refused")
	r = b.runWith([]string{envReviewerKey + "="}, retry(append(filter, "--yes")...)...)
	require.Equal(t, cli.CodeUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "legacy's reviewers sign their decisions")
	require.Contains(t, r.stderr, "sign it with --key FILE")
	require.Zero(t, batchJobs(t, b), "no job started")

	// What a signed job cannot carry is refused before anything is read.
	r = b.run(retry("--query", `CourierBusinessID STARTS_WITH "in-"`, "--destination", lab.DestLegacy, "--key", keyFile("alice"), "--yes")...)
	require.Equal(t, cli.CodeUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--query cannot be signed")
	r = b.run(retry("--key", keyFile("alice"), "--yes")...)
	require.Equal(t, cli.CodeUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "a signed --all (you sign as alice, from --key or $COURIER_REVIEWER_KEY) needs --destination")

	// The dry run shows what would be signed and sends nothing.
	r = b.run(retry(append(filter, "--key", keyFile("alice"), "--dry-run")...)...)
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "3 deliveries awaiting review match")
	require.Contains(t, r.stderr, `signed job (each delivery checks it against itself): {"aud":"courier-review-job","sub":"alice"`)
	require.Contains(t, r.stderr, `"filter":{"destination":"legacy","tenant":"acme","operation":"create-ticket","parked_before":"`)
	require.Zero(t, batchJobs(t, b), "the dry run started no job")

	// alice signs the job: exactly the three inside the filter accept it.
	r = b.runWith([]string{envReviewerKey + "=" + keyFile("alice")}, retry(append(filter, "--yes")...)...)
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	rep := bulkReport(t, r)
	require.Equal(t, 3, rep.Matched)
	require.Equal(t, 3, rep.Accepted, r.stderr)
	require.Zero(t, rep.Ignored+rep.Unaccounted, r.stderr)
	for _, k := range inside {
		_, recs := b.records(k, rep.JobID)
		require.Len(t, recs, 1, k)
		require.True(t, recs[0].Accepted, k)
		require.True(t, recs[0].SignedJob, k)
		require.Equal(t, "alice", recs[0].Principal, k)
		require.Equal(t, "legacy's reviewers: alice may retry, abandon", recs[0].Policy, k)
		require.Equal(t, "Alice A.", recs[0].Reviewer, "the typed name, for display")
	}

	// The job's own decision, proof and all, from a history it reached.
	var sent workflows.ReviewDecision
	it := st.Temporal.Client().GetWorkflowHistory(ctx, workflows.WorkflowID(inside[0]), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if sig := e.GetWorkflowExecutionSignaledEventAttributes(); sig != nil && sig.GetSignalName() == workflows.SignalReview {
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(sig.GetInput(), &sent))
		}
	}
	require.Equal(t, rep.JobID, sent.BatchJob)
	require.NotEmpty(t, sent.Proof)

	signal := func(key string, d workflows.ReviewDecision) {
		t.Helper()
		require.NoError(t, st.Temporal.Client().SignalWorkflow(ctx, workflows.WorkflowID(key), "", workflows.SignalReview, d))
	}
	// Another job's proof: an expired one, and one by bob, who may not retry.
	jobFor := func(signer string, tenant string, at time.Time, ttl time.Duration) workflows.ReviewDecision {
		d := sent
		d.BatchJob = "courier-review-by-hand-" + signer
		var err error
		d.Proof, err = reviewproof.SignJob(keys[signer], signer, reviewproof.Job{ID: d.BatchJob, Decision: "retry", Note: "outage over",
			Filter: reviewproof.JobFilter{Destination: lab.DestLegacy, Tenant: tenant, ParkedBefore: parkedBefore}}, at, ttl)
		require.NoError(t, err)
		return d
	}
	expired := jobFor("alice", "globex", time.Now().Add(-time.Hour), 10*time.Minute)
	for _, c := range []struct {
		key  string
		d    workflows.ReviewDecision
		says string
	}{
		{otherTenant, sent, `outside the signed job's filter: this delivery's tenant "globex", not "acme"`},
		{otherOp, sent, `this delivery's operation "close-ticket", not "create-ticket"`},
		{otherDest, sent, `this delivery's destination "legacy-keyed2", not "legacy"`},
		{late, sent, "parked after the signed job's parked-before"},
		{otherTenant, expired, "proof expired"},
	} {
		signal(c.key, c.d)
		require.Eventually(t, func() bool {
			_, recs := b.records(c.key, c.d.BatchJob)
			return len(recs) == 1
		}, time.Minute, 100*time.Millisecond, c.says)
		s, recs := b.records(c.key, c.d.BatchJob)
		require.False(t, recs[0].Accepted, c.says)
		require.Contains(t, recs[0].Reason, "proof: ", c.says)
		require.Contains(t, recs[0].Reason, c.says)
		require.Empty(t, recs[0].Principal)
		require.Equal(t, workflows.StateAwaitingReview, s.State, "%s: nothing moved", c.says)
	}

	// bob's job for the globex tenant, through the CLI: a real batch job,
	// ignored for what bob may decide.
	r = b.run(retry("--destination", lab.DestLegacy, "--tenant", "globex", "--key", keyFile("bob"), "--yes")...)
	require.Equal(t, cli.CodeRefused, r.code, r.stderr)
	rep = bulkReport(t, r)
	require.Equal(t, 1, rep.Ignored, r.stderr)
	require.Equal(t, otherTenant, rep.IgnoredDeliveries[0].Key)
	require.Contains(t, rep.IgnoredDeliveries[0].Reason, "proof: decision not allowed: legacy's reviewers: bob may abandon")

	for _, k := range []string{otherTenant, otherOp, otherDest, late} {
		s, err := st.Starter.Status(ctx, k)
		require.NoError(t, err)
		require.Equal(t, workflows.StateAwaitingReview, s.State, "%s: still parked", k)
		require.Zero(t, s.Review.AcceptedDecisions(), k)
	}
}
