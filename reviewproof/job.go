package reviewproof

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"time"
)

// JobAudience is a job proof's aud: one decision for every delivery a
// filter selects (courier review --all), never one delivery's decision.
const JobAudience = "courier-review-job"

// Why a job proof is refused, besides the reasons a decision's proof is.
var (
	ErrOtherJob    = errors.New("signed for another batch job")
	ErrOutsideJob  = errors.New("outside the signed job's filter")
	ErrParkedAfter = errors.New("parked after the signed job's parked-before")
)

// Job is what a job proof binds: one decision, the batch job that sends
// it, and the filter of the deliveries it may decide.
type Job struct {
	// ID is the batch job's id, known before the job starts.
	ID       string
	Decision string
	Note     string
	Filter   JobFilter
}

// JobFilter is what each delivery checks of itself. Destination and
// ParkedBefore are required: the policy is a destination's, and a job
// decides only what had parked when the reviewer looked. An empty Tenant
// or Operation selects any.
type JobFilter struct {
	Destination  string    `json:"destination"`
	Tenant       string    `json:"tenant,omitempty"`
	Operation    string    `json:"operation,omitempty"`
	ParkedBefore time.Time `json:"parked_before"`
}

// Check refuses a filter a delivery could not hold itself to.
func (f JobFilter) Check() error {
	var errs []error
	if f.Destination == "" {
		errs = append(errs, errors.New("destination: required; a signed job decides at one destination, under its reviewers"))
	}
	if f.ParkedBefore.IsZero() {
		errs = append(errs, errors.New("parked_before: required; a signed job decides only deliveries parked before it"))
	}
	return errors.Join(errs...)
}

// JobClaims are a job proof's payload.
type JobClaims struct {
	Audience   string    `json:"aud"`
	Subject    string    `json:"sub"`
	Job        string    `json:"job"`
	Decision   string    `json:"decision"`
	NoteSHA256 string    `json:"note_sha256"`
	Filter     JobFilter `json:"filter"`
	IssuedAt   int64     `json:"iat"`
	Expires    int64     `json:"exp"`
}

// JobClaimsOf are the claims SignJob signs, for showing before signing.
func JobClaimsOf(name string, j Job, now time.Time, ttl time.Duration) JobClaims {
	j.Filter.ParkedBefore = j.Filter.ParkedBefore.UTC()
	return JobClaims{Audience: JobAudience, Subject: name, Job: j.ID, Decision: j.Decision, NoteSHA256: noteSum(j.Note),
		Filter: j.Filter, IssuedAt: now.Unix(), Expires: now.Add(ttl).Unix()}
}

// SignJob is the proof of job j by the reviewer name with key, issued at
// now and good for ttl.
func SignJob(key ed25519.PrivateKey, name string, j Job, now time.Time, ttl time.Duration) (string, error) {
	if err := j.Filter.Check(); err != nil {
		return "", err
	}
	return sign(key, name, JobClaimsOf(name, j, now, ttl), ttl)
}

// JobDelivery is one delivery as it received a job's decision: where it
// is, when it parked, and the decision as it arrived.
type JobDelivery struct {
	Destination string
	Tenant      string
	Operation   string
	Parked      time.Time
	BatchJob    string
	Decision    string
	Note        string
}

// VerifyJob checks a job proof against one delivery d, policy p and the
// workflow's time now: the proof cannot decide a delivery outside its
// filter, for another job, or after it expires.
func VerifyJob(proof string, d JobDelivery, p Policy, now time.Time) (Verified, error) {
	var c JobClaims
	r, err := open(proof, p, JobAudience, "their decisions: a batch job's decision needs courier review --all ... --key FILE", now, &c)
	if err != nil {
		return Verified{}, err
	}
	f := c.Filter
	if c.Job != d.BatchJob {
		return Verified{}, fmt.Errorf("%w: signed for %q, sent as %q", ErrOtherJob, excerpt(c.Job), excerpt(d.BatchJob))
	}
	if err := f.Check(); err != nil {
		return Verified{}, fmt.Errorf("%w: filter: %v", ErrMalformed, err)
	}
	var outside []string
	if f.Destination != d.Destination {
		outside = append(outside, fmt.Sprintf("destination %q, not %q", d.Destination, excerpt(f.Destination)))
	}
	if f.Tenant != "" && f.Tenant != d.Tenant {
		outside = append(outside, fmt.Sprintf("tenant %q, not %q", d.Tenant, excerpt(f.Tenant)))
	}
	if f.Operation != "" && f.Operation != d.Operation {
		outside = append(outside, fmt.Sprintf("operation %q, not %q", d.Operation, excerpt(f.Operation)))
	}
	if len(outside) > 0 {
		return Verified{}, fmt.Errorf("%w: this delivery's %s", ErrOutsideJob, strings.Join(outside, ", "))
	}
	if !d.Parked.Before(f.ParkedBefore) {
		return Verified{}, fmt.Errorf("%w: parked at %s, the job decides those parked before %s",
			ErrParkedAfter, Parked(d.Parked), Parked(f.ParkedBefore))
	}
	var altered []string
	if c.Decision != d.Decision {
		altered = append(altered, fmt.Sprintf("decision (signed %q)", excerpt(c.Decision)))
	}
	return allow(p, r, d.Decision, altered, c.NoteSHA256, d.Note)
}
