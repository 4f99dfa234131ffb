package reviewproof

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// allow is the verdict on a proof whose claims matched but for altered,
// and the note's sum: r may make decision under p, or why not.
func allow(p Policy, r Reviewer, decision string, altered []string, noteSHA256, note string) (Verified, error) {
	if noteSHA256 != noteSum(note) {
		altered = append(altered, "note (its sha-256 differs)")
	}
	if len(altered) > 0 {
		return Verified{}, fmt.Errorf("%w: %s", ErrAltered, strings.Join(altered, ", "))
	}
	if !slices.Contains(r.Decisions, decision) {
		return Verified{}, fmt.Errorf("%w: %s", ErrNotAllowed, p.Rule(r))
	}
	return Verified{Principal: r.Name, Policy: p.Rule(r)}, nil
}

// sign is the compact JWS of claims by the reviewer name with key.
func sign(key ed25519.PrivateKey, name string, claims any, ttl time.Duration) (string, error) {
	if ttl <= 0 || ttl > MaxLifetime {
		return "", fmt.Errorf("a proof lives more than nothing and at most %s, not %s", MaxLifetime, ttl)
	}
	h, err := json.Marshal(header{Alg: Alg, Kid: name, Typ: "JWT"})
	if err != nil {
		return "", err
	}
	c, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	return signing + "." + b64.EncodeToString(ed25519.Sign(key, []byte(signing))), nil
}

// open checks what every proof carries: its form, a signature by one of
// p's reviewers, its subject, audience aud, and lifetime at now. It decodes
// the claims into claims and returns the reviewer who signed; hint says
// how to sign when proof is missing.
func open(proof string, p Policy, aud, hint string, now time.Time, claims any) (Reviewer, error) {
	if proof == "" {
		return Reviewer{}, fmt.Errorf("%w: %s sign %s", ErrMissing, p.Source, hint)
	}
	if len(proof) > MaxLen {
		return Reviewer{}, fmt.Errorf("%w: %d bytes, over %d", ErrMalformed, len(proof), MaxLen)
	}
	parts := strings.Split(proof, ".")
	if len(parts) != 3 {
		return Reviewer{}, fmt.Errorf("%w: not a compact JWS (header.claims.signature)", ErrMalformed)
	}
	var h header
	if err := decode(parts[0], &h); err != nil {
		return Reviewer{}, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if h.Alg != Alg {
		return Reviewer{}, fmt.Errorf("%w: alg %q; proofs are signed %s", ErrMalformed, excerpt(h.Alg), Alg)
	}
	i := slices.IndexFunc(p.Reviewers, func(r Reviewer) bool { return r.Name == h.Kid })
	if i < 0 {
		return Reviewer{}, fmt.Errorf("%w: %q is not among %s (%s)", ErrUnknownKey, excerpt(h.Kid), p.Source, strings.Join(p.names(), ", "))
	}
	r := p.Reviewers[i]
	pub, err := ParsePublicKey(r.Key)
	if err != nil {
		return r, fmt.Errorf("%w: %s's recorded %v", ErrUnknownKey, r.Name, err)
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		return r, fmt.Errorf("%w: the signature does not verify with %s's key: forged, or signed with another key", ErrSignature, r.Name)
	}
	var c struct {
		Audience string `json:"aud"`
		Subject  string `json:"sub"`
		IssuedAt int64  `json:"iat"`
		Expires  int64  `json:"exp"`
	}
	if err := errors.Join(decode(parts[1], &c), decode(parts[1], claims)); err != nil {
		return r, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	if c.Subject != r.Name {
		return r, fmt.Errorf("%w: sub %q is not the key id %q", ErrMalformed, excerpt(c.Subject), r.Name)
	}
	if c.Audience != aud {
		return r, fmt.Errorf("%w: aud %q, not %q", ErrAudience, excerpt(c.Audience), aud)
	}
	iat, exp := time.Unix(c.IssuedAt, 0), time.Unix(c.Expires, 0)
	switch {
	case !now.Before(exp):
		return r, fmt.Errorf("%w at %s (now %s): sign the decision again", ErrExpired, exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case iat.After(now.Add(Skew)):
		return r, fmt.Errorf("%w: issued at %s, in the future (now %s)", ErrExpired, iat.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case exp.Sub(iat) > MaxLifetime:
		return r, fmt.Errorf("%w: lives %s, over %s", ErrExpired, exp.Sub(iat), MaxLifetime)
	}
	return r, nil
}
