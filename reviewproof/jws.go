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

// What every kind of proof shares: its compact JWS, checked one way.

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
	return Verified{Principal: r.Name, Policy: p.Rule(r), Key: r.Key}, nil
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
