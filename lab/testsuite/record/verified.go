package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/lab/wftest"
	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// verifiedSeed names the -verified scenarios in a history index.
const verifiedSeed = "verified"

// verifiedDriver drives deliveries to legacy, whose reviewers have keys:
// alice may decide anything, bob may only abandon. The last scenario
// removes bob's key from the file.
type verifiedDriver struct {
	*trustDriver
	alice, bob ed25519.PrivateKey
}

func (v *verifiedDriver) signer(name string) starter.Signer {
	if name == "bob" {
		return starter.Signer{Name: name, Key: v.bob}
	}
	return starter.Signer{Name: name, Key: v.alice}
}

func (v *verifiedDriver) signal(ctx context.Context, h starter.Handle, d workflows.ReviewDecision) error {
	return v.c.SignalWorkflow(ctx, h.WorkflowID, "", workflows.SignalReview, d)
}

var verifiedScenarios = []struct {
	name string
	run  func(ctx context.Context, v *verifiedDriver) (string, error)
}{
	{"unsigned, forged and not-allowed decisions ignored by signal; a signed retry by update parks again; its proof replayed is ignored; a signed abandon by signal ends it", func(ctx context.Context, v *verifiedDriver) (string, error) {
		h, err := v.park(ctx, "verified-retry", "verified reviews")
		if err != nil {
			return "", err
		}
		retry := workflows.ReviewDecision{Decision: workflows.DecisionRetry, Reviewer: "Alice", Note: "not in legacy"}
		forged, err := v.s.Sign(ctx, h.Key, retry, starter.Signer{Name: "alice", Key: v.bob})
		if err != nil {
			return "", err
		}
		notAllowed, err := v.s.Sign(ctx, h.Key, retry, v.signer("bob"))
		if err != nil {
			return "", err
		}
		for _, d := range []workflows.ReviewDecision{retry, forged, notAllowed} {
			if err := v.signal(ctx, h, d); err != nil {
				return "", err
			}
		}
		signed, err := v.s.Sign(ctx, h.Key, retry, v.signer("alice"))
		if err != nil {
			return "", err
		}
		if err := v.env.Inject(lab.DestLegacy, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}); err != nil {
			return "", err
		}
		if _, err := v.s.Review(ctx, h.Key, signed); err != nil {
			return "", err
		}
		if st, err := v.s.Wait(ctx, h.Key); err != nil || st.State != workflows.StateAwaitingReview {
			return "", fmt.Errorf("after the retry: %v, %s; want parked again", err, st.State)
		}
		if err := v.signal(ctx, h, signed); err != nil {
			return "", err
		}
		abandon, err := v.s.Sign(ctx, h.Key, workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "Bob", Note: "customer cancelled"}, v.signer("bob"))
		if err != nil {
			return "", err
		}
		if err := v.signal(ctx, h, abandon); err != nil {
			return "", err
		}
		return v.abandoned(ctx, h, 4)
	}},
	{"a signed delivered by update", func(ctx context.Context, v *verifiedDriver) (string, error) {
		h, err := v.park(ctx, "verified-delivered", "verified delivered")
		if err != nil {
			return "", err
		}
		d, err := v.s.Sign(ctx, h.Key, workflows.ReviewDecision{Decision: workflows.DecisionDelivered, ResourceID: "ticket-found", Reviewer: "Alice", Note: "found it"}, v.signer("alice"))
		if err != nil {
			return "", err
		}
		rec, err := v.s.Review(ctx, h.Key, d)
		if err != nil {
			return "", err
		}
		if rec.Principal != "alice" {
			return "", fmt.Errorf("recorded %+v, want alice's verified decision", rec)
		}
		st, err := v.s.Wait(ctx, h.Key)
		if err != nil {
			return "", err
		}
		return h.WorkflowID, want(st.Status, workflows.StatusDeliveredByReview)
	}},
	{"a signed batch job: its proof outside the delivery's filter and an expired one ignored by signal; the job's abandon accepted", func(ctx context.Context, v *verifiedDriver) (string, error) {
		h, err := v.park(ctx, "verified-job", "verified job")
		if err != nil {
			return "", err
		}
		abandon := workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "Alice", Note: "customer cancelled"}
		byHand := func(id string, f reviewproof.JobFilter, at time.Time) error {
			d := abandon
			d.BatchJob = id
			d.Proof, err = reviewproof.SignJob(v.alice, "alice", reviewproof.Job{ID: id, Decision: d.Decision, Note: d.Note, Filter: f}, at, 10*time.Minute)
			if err != nil {
				return err
			}
			return v.signal(ctx, h, d)
		}
		if err := byHand("job-outside", reviewproof.JobFilter{Destination: lab.DestLegacy, Operation: "another-operation", ParkedBefore: time.Now()}, time.Now()); err != nil {
			return "", err
		}
		if err := byHand("job-expired", reviewproof.JobFilter{Destination: lab.DestLegacy, ParkedBefore: time.Now()}, time.Now().Add(-time.Hour)); err != nil {
			return "", err
		}
		// Visibility lags the park by a moment.
		var p starter.BulkPreview
		for try := 0; p.Matched == 0 && try < 50; try++ {
			time.Sleep(200 * time.Millisecond)
			if p, err = v.s.PreviewBulk(ctx, starter.BulkFilter{Destination: lab.DestLegacy, ParkedBefore: time.Now()}, 0); err != nil {
				return "", err
			}
		}
		if p.Matched != 1 || p.Keys[0] != h.Key {
			return "", fmt.Errorf("preview %v, want %s alone", p.Keys, h.Key)
		}
		d, _, err := v.s.SignBulk(p, starter.BulkDecision{Decision: abandon.Decision, Reviewer: abandon.Reviewer, Note: abandon.Note}, v.signer("alice"), time.Now())
		if err != nil {
			return "", err
		}
		rep, err := v.s.ReviewBulk(ctx, p, d)
		if err != nil {
			return "", err
		}
		if rep.Accepted != 1 {
			return "", fmt.Errorf("report %+v, want the job accepted", rep)
		}
		return v.abandoned(ctx, h, 2)
	}},
	{"bob's key removed from the file after the delivery parked: his signed abandon refused by update, ignored by signal and as a signed batch job's; alice's abandon by update ends it", func(ctx context.Context, v *verifiedDriver) (string, error) {
		h, err := v.park(ctx, "verified-revoked", "verified revoked")
		if err != nil {
			return "", err
		}
		if err := v.redeploy(func(cfg *destinations.Config) {
			d := cfg.Destinations[lab.DestLegacy]
			d.Reviewers = d.Reviewers[:1] // alice
			cfg.Destinations[lab.DestLegacy] = d
		}); err != nil {
			return "", err
		}
		abandon := workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "Bob", Note: "customer cancelled"}
		byBob, err := v.s.Sign(ctx, h.Key, abandon, v.signer("bob"))
		if err != nil {
			return "", err
		}
		var refused *starter.ReviewRefusedError
		if _, err := v.s.Review(ctx, h.Key, byBob); !errors.As(err, &refused) {
			return "", fmt.Errorf("bob's update: %v, want it refused", err)
		}
		if err := v.signal(ctx, h, byBob); err != nil {
			return "", err
		}
		job := abandon
		job.BatchJob = "job-revoked"
		job.Proof, err = reviewproof.SignJob(v.bob, "bob", reviewproof.Job{ID: job.BatchJob, Decision: job.Decision, Note: job.Note,
			Filter: reviewproof.JobFilter{Destination: lab.DestLegacy, ParkedBefore: time.Now()}}, time.Now(), 10*time.Minute)
		if err != nil {
			return "", err
		}
		if err := v.signal(ctx, h, job); err != nil {
			return "", err
		}
		byAlice, err := v.s.Sign(ctx, h.Key, workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "Alice", Note: "customer cancelled"}, v.signer("alice"))
		if err != nil {
			return "", err
		}
		if _, err := v.s.Review(ctx, h.Key, byAlice); err != nil {
			return "", err
		}
		return v.abandoned(ctx, h, 3)
	}},
}

// abandoned waits for h's delivery to end and checks that it ended
// abandoned, with ignored decisions recorded and ignored.
func (v *verifiedDriver) abandoned(ctx context.Context, h starter.Handle, ignored int) (string, error) {
	_ = v.c.GetWorkflow(ctx, h.WorkflowID, "").Get(ctx, nil) // abandoned fails: nothing delivered
	st, err := v.s.Status(ctx, h.Key)
	if err != nil {
		return "", err
	}
	if st.Review == nil || st.Review.Ignored != ignored {
		return "", fmt.Errorf("review %+v, want %d decisions ignored", st.Review, ignored)
	}
	return h.WorkflowID, want(st.Status, workflows.StatusAbandoned)
}

// recordVerified runs every -verified scenario against a `courier worker`
// process whose legacy destination has keyed reviewers.
func recordVerified(ctx context.Context, tmp *lab.Temporal, courier, dir string, logger *slog.Logger) (map[string][]byte, []wftest.RecordedCase, error) {
	v := &verifiedDriver{}
	edit := func(cfg *destinations.Config) error {
		alice, bob, err := reviewerKeys()
		if err != nil {
			return err
		}
		v.alice, v.bob = alice, bob
		d := cfg.Destinations[lab.DestLegacy]
		d.Reviewers = destinations.Reviewers{
			{Name: "alice", Key: reviewproof.FormatPublicKey(alice.Public().(ed25519.PublicKey)), Decisions: reviewproof.Decisions},
			{Name: "bob", Key: reviewproof.FormatPublicKey(bob.Public().(ed25519.PublicKey)), Decisions: []string{workflows.DecisionAbandon}},
		}
		cfg.Destinations[lab.DestLegacy] = d
		return nil
	}
	return recordScenarios(ctx, tmp, courier, dir, logger, verifiedSeed, edit, func(t *trustDriver) []scenario {
		v.trustDriver = t
		var scs []scenario
		for _, sc := range verifiedScenarios {
			scs = append(scs, scenario{sc.name, func(ctx context.Context) (string, error) { return sc.run(ctx, v) }})
		}
		return scs
	})
}

func reviewerKeys() (alice, bob ed25519.PrivateKey, err error) {
	if _, alice, err = ed25519.GenerateKey(rand.Reader); err != nil {
		return nil, nil, err
	}
	_, bob, err = ed25519.GenerateKey(rand.Reader)
	return alice, bob, err
}
