package httpapi

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/abde64c9/courier/opkey"
)

// Config is the API server's file: which bearer token speaks for which
// tenant, and how often a tenant may call.
type Config struct {
	// Callers binds each token (by its SHA-256) to exactly one tenant.
	Callers []Caller `json:"callers"`
	// RateLimit is every tenant's budget of requests; zero: DefaultRateLimit.
	RateLimit RateLimit `json:"rate_limit,omitempty"`
}

// Caller is one credential and the tenant it speaks for: the hex SHA-256
// of a bearer token (never the token itself), or of a client certificate
// (its DER) that the server's client CA verifies on mutual TLS.
type Caller struct {
	Tenant      string `json:"tenant"`
	TokenSHA256 string `json:"token_sha256,omitempty"`
	CertSHA256  string `json:"cert_sha256,omitempty"`
}

// RateLimit is a token bucket per tenant: PerSecond requests a second on
// average, Burst at once.
type RateLimit struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

// DefaultRateLimit is a tenant's budget when the file sets none.
var DefaultRateLimit = RateLimit{PerSecond: 50, Burst: 100}

// LoadConfig reads and checks the API's configuration file (JSON).
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("api config: %w", err)
	}
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("api config %s: %w (see docs/api.md for its fields)", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("api config %s: %w", path, err)
	}
	return cfg, nil
}

// Validate names every mistake in the file: a hash that is not 64 hex
// digits, a token listed twice, a tenant that is not a valid key field.
func (c Config) Validate() error {
	var errs []error
	if len(c.Callers) == 0 {
		errs = append(errs, errors.New(`callers: none; add {"tenant": "acme", "token_sha256": "<hash>"} (make the hash with courier api hash-token)`))
	}
	seen := map[string]int{}
	for i, cl := range c.Callers {
		at := fmt.Sprintf("callers[%d]", i)
		if cl.Tenant == "" {
			errs = append(errs, fmt.Errorf("%s.tenant: required", at))
		} else if err := (opkey.Operation{Tenant: cl.Tenant, Destination: "d", Operation: "o", BusinessID: "b"}).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.%w", at, err))
		}
		field, what, h := "token_sha256", "token", cl.TokenSHA256
		switch {
		case cl.TokenSHA256 != "" && cl.CertSHA256 != "":
			errs = append(errs, fmt.Errorf("%s: token_sha256 and cert_sha256 both set: one credential per entry; list the other in an entry of its own", at))
			continue
		case cl.CertSHA256 != "":
			field, what, h = "cert_sha256", "certificate", cl.CertSHA256
		}
		h = normalHash(h)
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			errs = append(errs, fmt.Errorf("%s.%s: not a SHA-256 in hex (64 hex digits); make it with courier api hash-token (--cert for a certificate), never put the token itself here", at, field))
			continue
		}
		if j, ok := seen[field+h]; ok {
			errs = append(errs, fmt.Errorf("%s.%s: the same %s as callers[%d]: a credential speaks for exactly one tenant", at, field, what, j))
		}
		seen[field+h] = i
	}
	if r := c.RateLimit; r != (RateLimit{}) && (r.PerSecond <= 0 || r.Burst < 1) {
		errs = append(errs, fmt.Errorf("rate_limit: per_second must be above 0 and burst at least 1 (got %g and %d); leave it out for %g and %d",
			r.PerSecond, r.Burst, DefaultRateLimit.PerSecond, DefaultRateLimit.Burst))
	}
	return errors.Join(errs...)
}

// normalHash is a hash in lower-case hex, without the colons openssl's
// fingerprints put between bytes.
func normalHash(h string) string { return strings.ToLower(strings.ReplaceAll(h, ":", "")) }

// HashToken is what the file stores of a token: its SHA-256 in hex.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// HashCert is what the file stores of a client certificate: the SHA-256 of
// its DER in hex, as `openssl x509 -noout -fingerprint -sha256` shows it.
func HashCert(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// NewToken is a fresh random bearer token.
func NewToken() string {
	return "courier_" + rand.Text()
}

// credentials finds a credential's tenant: a token's, or a certificate's.
type credentials struct {
	hashes  [][]byte
	tenants []string
}

// newCredentials are the callers' tokens, or with certs their certificates.
func newCredentials(callers []Caller, certs bool) credentials {
	var c credentials
	for _, cl := range callers {
		h := cl.TokenSHA256
		if certs {
			h = cl.CertSHA256
		}
		if h == "" {
			continue
		}
		b, _ := hex.DecodeString(normalHash(h))
		c.hashes = append(c.hashes, b)
		c.tenants = append(c.tenants, cl.Tenant)
	}
	return c
}

// tenant is the tenant a token (or a certificate's DER) speaks for: every
// stored hash is compared, in constant time, so the answer's timing says
// nothing of which nearly matched.
func (c credentials) tenant(secret []byte) (string, bool) {
	sum := sha256.Sum256(secret)
	found := -1
	for i, h := range c.hashes {
		if subtle.ConstantTimeCompare(sum[:], h) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return c.tenants[found], true
}
