// Package reviewproof signs and verifies the proof a review decision
// carries: a compact JWS (EdDSA) by the reviewer's Ed25519 key over what
// was decided, for which delivery, destination and park, until when. Pure:
// the workflows verify with it, the starter and the commands sign with it.
//
// It is pure computation (no I/O, no clock of its own), so the Delivery
// workflow verifies a decision from the keys recorded with its terms, and
// replay verifies it again alike.
package reviewproof

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/abde64c9/courier/internal/text"
)

const (
	// Audience is the proof's aud: a token signed for anything else is
	// never a review decision.
	Audience = "courier-review"
	// Alg is the only JWS algorithm a proof may use.
	Alg = "EdDSA"
	// KeyPrefix marks a public key in the destinations file, and
	// PrivatePrefix a reviewer's private key (its 32-byte seed).
	KeyPrefix     = "ed25519:"
	PrivatePrefix = "ed25519-private:"
	// MaxLen bounds a proof; MaxLifetime bounds exp - iat, so a proof
	// leaked from a terminal is not good for long; Skew is how far ahead
	// of the workflow's clock a signer's clock may be.
	MaxLen      = 2048
	MaxLifetime = 24 * time.Hour
	Skew        = time.Minute
)

// Why a proof is refused; each error wraps one of these.
var (
	ErrMissing          = errors.New("proof required")
	ErrMalformed        = errors.New("proof malformed")
	ErrUnknownKey       = errors.New("unknown key id")
	ErrSignature        = errors.New("bad signature")
	ErrAudience         = errors.New("wrong audience")
	ErrExpired          = errors.New("proof expired")
	ErrOtherDelivery    = errors.New("signed for another delivery")
	ErrOtherDestination = errors.New("signed for another destination")
	ErrEarlierPark      = errors.New("signed for another park")
	ErrAltered          = errors.New("decision altered after signing")
	ErrNotAllowed       = errors.New("decision not allowed")
)

// Reviewer is one entry of a destination's reviewers: a name, which is the
// key id of the proofs it signs, its public key, and the decisions it may
// make.
type Reviewer struct {
	Name      string   `json:"name"`
	Key       string   `json:"key"`
	Decisions []string `json:"decisions"`
}

// Policy is who may decide what at a destination, as recorded with a
// delivery's terms.
type Policy struct {
	// Source says where it was declared: "legacy's reviewers", or "the
	// default reviewers".
	Source    string     `json:"source"`
	Reviewers []Reviewer `json:"reviewers"`
}

// Rule is the part of the policy that allows name's decisions, for the
// audit trail: "legacy's reviewers: alice may retry, delivered, abandon".
func (p Policy) Rule(r Reviewer) string {
	return fmt.Sprintf("%s: %s may %s", p.Source, r.Name, strings.Join(r.Decisions, ", "))
}

func (p Policy) names() []string {
	names := make([]string, len(p.Reviewers))
	for i, r := range p.Reviewers {
		names[i] = r.Name
	}
	return names
}

// ParsePublicKey reads "ed25519:<base64 of the 32-byte key>".
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b64, ok := strings.CutPrefix(s, KeyPrefix)
	if !ok {
		return nil, fmt.Errorf("key: %q does not start with %q", excerpt(s), KeyPrefix)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("key: not base64: %w", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("key: %d bytes; an Ed25519 public key has %d", len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// FormatPublicKey is ParsePublicKey's inverse.
func FormatPublicKey(k ed25519.PublicKey) string {
	return KeyPrefix + base64.StdEncoding.EncodeToString(k)
}

// KeyFile is a reviewer's private key as courier review keygen writes it.
type KeyFile struct {
	Name string `json:"name"`
	Key  string `json:"key"` // PrivatePrefix and the base64 seed
}

// NewKeyFile is a key file for name holding key.
func NewKeyFile(name string, key ed25519.PrivateKey) KeyFile {
	return KeyFile{Name: name, Key: PrivatePrefix + base64.StdEncoding.EncodeToString(key.Seed())}
}

// ParseKeyFile reads a key file's content.
func ParseKeyFile(b []byte) (string, ed25519.PrivateKey, error) {
	var f KeyFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return "", nil, fmt.Errorf(`not a reviewer key file ({"name": ..., "key": %q...}): %w`, PrivatePrefix, err)
	}
	if f.Name == "" {
		return "", nil, errors.New("name: missing")
	}
	b64, ok := strings.CutPrefix(f.Key, PrivatePrefix)
	if !ok {
		return "", nil, fmt.Errorf("key: does not start with %q", PrivatePrefix)
	}
	seed, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(seed) != ed25519.SeedSize {
		return "", nil, fmt.Errorf("key: not the base64 of a %d-byte Ed25519 seed", ed25519.SeedSize)
	}
	return f.Name, ed25519.NewKeyFromSeed(seed), nil
}

// Decision is what a proof binds: the decision and where it is decided.
type Decision struct {
	Key         string
	Destination string
	// Parked is when the delivery parked (its review's requested time):
	// a proof for one park cannot decide the next.
	Parked     time.Time
	Decision   string
	ResourceID string
	Note       string
}

// Claims are a proof's payload.
type Claims struct {
	Audience    string `json:"aud"`
	Subject     string `json:"sub"`
	Key         string `json:"key"`
	Destination string `json:"destination"`
	Decision    string `json:"decision"`
	ResourceID  string `json:"resource_id,omitempty"`
	NoteSHA256  string `json:"note_sha256"`
	Parked      string `json:"parked"`
	IssuedAt    int64  `json:"iat"`
	Expires     int64  `json:"exp"`
}

// Parked formats a park time as claims carry it.
func Parked(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func noteSum(note string) string {
	s := sha256.Sum256([]byte(note))
	return hex.EncodeToString(s[:])
}

type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ,omitempty"`
}

var b64 = base64.RawURLEncoding

// Sign is the proof of d by the reviewer name (its key id) with key,
// issued at now and good for ttl.
func Sign(key ed25519.PrivateKey, name string, d Decision, now time.Time, ttl time.Duration) (string, error) {
	return sign(key, name, Claims{
		Audience: Audience, Subject: name, Key: d.Key, Destination: d.Destination,
		Decision: d.Decision, ResourceID: d.ResourceID, NoteSHA256: noteSum(d.Note), Parked: Parked(d.Parked),
		IssuedAt: now.Unix(), Expires: now.Add(ttl).Unix(),
	}, ttl)
}

// Verified is who a proof proves decided, and the rule that allowed it.
// Key is the public key the proof verified with, as the policy holds it:
// the one the workers' current file must still list for the decision to
// count (revocation).
type Verified struct {
	Principal string
	Policy    string
	Key       string
}

// Verify checks proof against decision d as received, policy p and the
// time now (the workflow's), and says why it refuses one.
func Verify(proof string, d Decision, p Policy, now time.Time) (Verified, error) {
	var c Claims
	r, err := open(proof, p, Audience, "their decisions: send the output of courier review KEY ... --key FILE --print", now, &c)
	if err != nil {
		return Verified{}, err
	}
	if c.Key != d.Key {
		return Verified{}, fmt.Errorf("%w: signed for delivery %q, not %s", ErrOtherDelivery, excerpt(c.Key), d.Key)
	}
	if c.Destination != d.Destination {
		return Verified{}, fmt.Errorf("%w: signed for %q, this delivery goes to %q", ErrOtherDestination, excerpt(c.Destination), d.Destination)
	}
	if parked := Parked(d.Parked); c.Parked != parked {
		return Verified{}, fmt.Errorf("%w: signed for the park at %s; this one began at %s", ErrEarlierPark, excerpt(c.Parked), parked)
	}
	var altered []string
	if c.Decision != d.Decision {
		altered = append(altered, fmt.Sprintf("decision (signed %q)", excerpt(c.Decision)))
	}
	if c.ResourceID != d.ResourceID {
		altered = append(altered, fmt.Sprintf("resource_id (signed %q)", excerpt(c.ResourceID)))
	}
	return allow(p, r, d.Decision, altered, c.NoteSHA256, d.Note)
}

func decode(part string, v any) error {
	b, err := b64.DecodeString(part)
	if err != nil {
		return err
	}
	// Decoding into a struct is deterministic, though the check cannot
	// tell (encoding/json works by reflection).
	//workflowcheck:ignore
	return json.Unmarshal(b, v)
}

// excerpt keeps a quoted value from a proof short: it is anyone's to set.
func excerpt(s string) string { return text.Excerpt(s, 80) }

// Decisions are the review decisions a reviewer may be allowed.
var Decisions = []string{"retry", "delivered", "abandon"}

// Check checks one keyed reviewer entry, as a destinations file declares it.
func (r Reviewer) Check() error {
	var errs []error
	if !validName(r.Name) {
		errs = append(errs, fmt.Errorf("name: %q: 1 to 64 letters, digits and . _ @ - (it is the key id of the reviewer's proofs)", excerpt(r.Name)))
	}
	if _, err := ParsePublicKey(r.Key); err != nil {
		errs = append(errs, fmt.Errorf("%w (courier review keygen prints an entry)", err))
	}
	if len(r.Decisions) == 0 {
		errs = append(errs, fmt.Errorf("decisions: missing; list what %s may decide, of %s", r.Name, strings.Join(append(slices.Clone(Decisions), GateActions...), ", ")))
	}
	for i, d := range r.Decisions {
		switch {
		case !slices.Contains(Decisions, d) && !slices.Contains(GateActions, d):
			errs = append(errs, fmt.Errorf("decisions: %q unknown; use %s", excerpt(d), strings.Join(append(slices.Clone(Decisions), GateActions...), ", ")))
		case slices.Index(r.Decisions, d) < i:
			errs = append(errs, fmt.Errorf("decisions: %q listed twice", d))
		}
	}
	return errors.Join(errs...)
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("._@-", c)) {
			return false
		}
	}
	return true
}
