package starter

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/workflows"
)

func newJobID() string { return "courier-review-" + uuid.NewString() }

// SignBulk returns d with sg's job proof for the deliveries p's filter
// selects, and the claims it signed: the decision, its note's hash, a new
// batch job's id, and the filter each delivery checks itself against, so
// the proof decides nothing outside it, in another job, or after it
// expires. The filter must name a destination and a parked-before time,
// and no free-form query (a delivery cannot check one). Errors:
// *InvalidRequestError.
func (s *Client) SignBulk(p BulkPreview, d BulkDecision, sg Signer, now time.Time) (BulkDecision, reviewproof.JobClaims, error) {
	f := p.Filter
	switch {
	case d.Decision == workflows.DecisionDelivered:
		return d, reviewproof.JobClaims{}, &InvalidRequestError{errors.New("a signed bulk review decides retry or abandon: " +
			"delivered needs each delivery's own resource id, so sign each one (courier review KEY --decision delivered --resource-id ID --key FILE)")}
	case f.Query != "":
		return d, reviewproof.JobClaims{}, &InvalidRequestError{errors.New("a signed bulk review takes no free-form query: " +
			"each delivery checks the signed filter itself (destination, tenant, operation, parked-before), and cannot check a query")}
	}
	ttl := sg.TTL
	if ttl == 0 {
		ttl = DefaultProofTTL
	}
	job := reviewproof.Job{ID: newJobID(), Decision: d.Decision, Note: d.Note, Filter: reviewproof.JobFilter{
		Destination: f.Destination, Tenant: f.Tenant, Operation: f.Operation, ParkedBefore: f.ParkedBefore}}
	proof, err := reviewproof.SignJob(sg.Key, sg.Name, job, now, ttl)
	if err != nil {
		return d, reviewproof.JobClaims{}, &InvalidRequestError{fmt.Errorf("sign the job: %w", err)}
	}
	d.JobID, d.Proof = job.ID, proof
	return d, reviewproof.JobClaimsOf(sg.Name, job, now, ttl), nil
}

// checkSigned refuses an unsigned bulk decision for deliveries whose
// reviewers sign: each would ignore it, so no job is started for nothing.
// Only the statuses the preview read are known (all of them when the
// filter reads statuses, else its sample); any other keyed delivery
// ignores the decision itself.
func checkSigned(p BulkPreview, d BulkDecision) error {
	if d.Proof != "" || len(p.KeyedReviewers) == 0 {
		return nil
	}
	return fmt.Errorf("%s sign their decisions, and an unsigned batch job would be ignored by every delivery they review: "+
		"sign it with --key FILE (or $COURIER_REVIEWER_KEY); nothing was sent", strings.Join(p.KeyedReviewers, " and "))
}
