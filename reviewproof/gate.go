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

// A destination's gate takes proofs too: a pause or resume by a keyed
// reviewer, bound to the gate's state it answers so that it cannot be
// sent again once that state has moved on.

const (
	// GateAudience is a gate change's aud: a review decision's proof
	// never pauses or resumes a destination, nor the reverse.
	GateAudience = "courier-gate"
	// ActionPause and ActionResume are the gate's changes, and the
	// decisions a keyed reviewer is allowed them by.
	ActionPause  = "pause"
	ActionResume = "resume"
)

// GateActions are the gate changes a reviewer may be allowed, beside
// Decisions.
var GateActions = []string{ActionPause, ActionResume}

// ErrOtherState refuses a gate change signed for a state the gate has
// left: a resume proof replayed after a later pause, say.
var ErrOtherState = errors.New("signed for another state of the gate")

// GateChange is what a gate change's proof binds.
type GateChange struct {
	Destination string
	Action      string
	// Reason is a pause's reason or a resume's note.
	Reason string
	// Until is a pause's end; zero for none, and for a resume.
	Until time.Time
	// State and Since are the gate's state the change answers and when it
	// began; a zero Since is a gate that has never changed.
	State string
	Since time.Time
}

// GateClaims are a gate change proof's payload.
type GateClaims struct {
	Audience     string `json:"aud"`
	Subject      string `json:"sub"`
	Destination  string `json:"destination"`
	Action       string `json:"action"`
	ReasonSHA256 string `json:"reason_sha256"`
	Until        string `json:"until,omitempty"`
	State        string `json:"state"`
	Since        string `json:"since,omitempty"`
	IssuedAt     int64  `json:"iat"`
	Expires      int64  `json:"exp"`
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return Parked(t)
}

// SignGate is the proof of change c by the reviewer name with key, issued
// at now and good for ttl.
func SignGate(key ed25519.PrivateKey, name string, c GateChange, now time.Time, ttl time.Duration) (string, error) {
	if ttl <= 0 || ttl > MaxLifetime {
		return "", fmt.Errorf("a proof lives more than nothing and at most %s, not %s", MaxLifetime, ttl)
	}
	return sign(key, name, GateClaims{
		Audience: GateAudience, Subject: name, Destination: c.Destination, Action: c.Action,
		ReasonSHA256: noteSum(c.Reason), Until: stamp(c.Until), State: c.State, Since: stamp(c.Since),
		IssuedAt: now.Unix(), Expires: now.Add(ttl).Unix(),
	})
}

// VerifyGate checks proof against change c as the gate received it (its
// State and Since the gate's own), policy p and the workflow's time now.
func VerifyGate(proof string, c GateChange, p Policy, now time.Time) (Verified, error) {
	if proof == "" {
		return Verified{}, fmt.Errorf("%w: %s sign pauses and resumes: add --key FILE to courier destination %s, or send its --print output",
			ErrMissing, p.Source, c.Action)
	}
	var got GateClaims
	r, err := open(proof, p, now, GateAudience, &got)
	if err != nil {
		return Verified{}, err
	}
	if got.Destination != c.Destination {
		return Verified{}, fmt.Errorf("%w: signed for %q, this gate is %q's", ErrOtherDestination, excerpt(got.Destination), c.Destination)
	}
	if got.State != c.State || got.Since != stamp(c.Since) {
		return Verified{}, fmt.Errorf("%w: signed for %s since %q; it is %s since %s: read it and sign again",
			ErrOtherState, excerpt(got.State), excerpt(got.Since), c.State, Parked(c.Since))
	}
	var altered []string
	if got.Action != c.Action {
		altered = append(altered, fmt.Sprintf("action (signed %q)", excerpt(got.Action)))
	}
	if got.ReasonSHA256 != noteSum(c.Reason) {
		altered = append(altered, "reason or note (its sha-256 differs)")
	}
	if got.Until != stamp(c.Until) {
		altered = append(altered, fmt.Sprintf("until (signed %q)", excerpt(got.Until)))
	}
	if len(altered) > 0 {
		return Verified{}, fmt.Errorf("%w: %s", ErrAltered, strings.Join(altered, ", "))
	}
	if !slices.Contains(r.Decisions, c.Action) {
		return Verified{}, fmt.Errorf("%w: %s", ErrNotAllowed, p.Rule(r))
	}
	return Verified{Principal: r.Name, Policy: p.Rule(r)}, nil
}

// sign is the compact JWS of claims by the key id name.
func sign(key ed25519.PrivateKey, name string, claims any) (string, error) {
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

// registered are the claims every proof carries, whatever it decides.
type registered struct {
	Audience string `json:"aud"`
	Subject  string `json:"sub"`
	IssuedAt int64  `json:"iat"`
	Expires  int64  `json:"exp"`
}

// open checks what every proof must be (well formed, signed by a reviewer
// of p, for aud, good at now), decodes its claims into claims, and says
// whose it is.
func open(proof string, p Policy, now time.Time, aud string, claims any) (Reviewer, error) {
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
		return Reviewer{}, fmt.Errorf("%w: %s's recorded %v", ErrUnknownKey, r.Name, err)
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		return Reviewer{}, fmt.Errorf("%w: the signature does not verify with %s's key: forged, or signed with another key", ErrSignature, r.Name)
	}
	var c registered
	if err := decode(parts[1], &c); err != nil {
		return Reviewer{}, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	if err := decode(parts[1], claims); err != nil {
		return Reviewer{}, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	if c.Subject != h.Kid {
		return Reviewer{}, fmt.Errorf("%w: sub %q is not the key id %q", ErrMalformed, excerpt(c.Subject), r.Name)
	}
	if c.Audience != aud {
		return Reviewer{}, fmt.Errorf("%w: aud %q, not %q", ErrAudience, excerpt(c.Audience), aud)
	}
	iat, exp := time.Unix(c.IssuedAt, 0), time.Unix(c.Expires, 0)
	switch {
	case !now.Before(exp):
		return Reviewer{}, fmt.Errorf("%w at %s (now %s): sign the decision again", ErrExpired, exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case iat.After(now.Add(Skew)):
		return Reviewer{}, fmt.Errorf("%w: issued at %s, in the future (now %s)", ErrExpired, iat.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case exp.Sub(iat) > MaxLifetime:
		return Reviewer{}, fmt.Errorf("%w: lives %s, over %s", ErrExpired, exp.Sub(iat), MaxLifetime)
	}
	return r, nil
}
