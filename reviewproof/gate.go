package reviewproof

import (
	"crypto/ed25519"
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
	return sign(key, name, GateClaims{
		Audience: GateAudience, Subject: name, Destination: c.Destination, Action: c.Action,
		ReasonSHA256: noteSum(c.Reason), Until: stamp(c.Until), State: c.State, Since: stamp(c.Since),
		IssuedAt: now.Unix(), Expires: now.Add(ttl).Unix(),
	}, ttl)
}

// VerifyGate checks proof against change c as the gate received it (its
// State and Since the gate's own), policy p and the workflow's time now.
func VerifyGate(proof string, c GateChange, p Policy, now time.Time) (Verified, error) {
	var got GateClaims
	r, err := open(proof, p, GateAudience, "pauses and resumes: add --key FILE to courier destination "+c.Action+", or send its --print output", now, &got)
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
