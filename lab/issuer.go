package lab

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The issuer stands in for an organisation's identity provider in the lab
// topologies (the native one and compose): one ES256 signing key, its
// public half served as a JWKS that Temporal's authorizer reads, and a
// token per role in the form Temporal's default claim mapper reads
// (a permissions claim of namespace:role entries).

// IssuerAudience is the aud every token carries and the server requires
// (TEMPORAL_JWT_AUDIENCE in deploy/temporal/courier.yaml).
const IssuerAudience = "courier"

// issuerName is the tokens' iss.
const issuerName = "courier-lab-issuer"

// signingKeyFile holds the key in the issuer's folder: kept across
// restarts, so that tokens handed out stay valid.
const signingKeyFile = "signing-key.pem"

// Role is a kind of caller and the permissions its token carries.
type Role struct {
	Name        string
	Permissions []string
	What        string
}

// Roles are the callers of the lab topologies. Temporal 1.29's default
// authorizer ranks roles (worker < read < write < admin) and puts polling
// and completing tasks at write, beside starting and signalling: whoever
// holds write on Courier's namespace can poll its task queues and run its
// workflows' tasks. So only the workers, the HTTP API (which starts
// deliveries for the tenants its configuration binds) and operators hold
// it; services
// hold write on their own namespace, deliver through Courier's Nexus
// endpoint, and read Courier's.
var Roles = []Role{
	{"worker", []string{"default:write"}, "courier worker processes: poll Courier's task queues, start and complete its runs"},
	{"api", []string{"default:write"}, "courier api processes: start and join deliveries for the tenants their configuration binds, read their status"},
	{"operator", []string{"default:write"}, "operators: courier deliver by hand, review, pause and resume destinations"},
	{"service", []string{CallerNamespace + ":write", "default:read"}, "services: their own namespace's workflows, delivering through Courier's Nexus endpoint; status of Courier's"},
	{"reader", []string{"default:read"}, "dashboards and people who look: status, list, describe, query"},
	{"admin", []string{"temporal-system:admin"}, "setup: namespaces, search attributes, Nexus endpoints; the lab's harness"},
}

// RoleNamed is the role of that name.
func RoleNamed(name string) (Role, error) {
	for _, r := range Roles {
		if r.Name == name {
			return r, nil
		}
	}
	return Role{}, fmt.Errorf("no role %q", name)
}

// Issuer signs tokens with its key.
type Issuer struct {
	key *ecdsa.PrivateKey
	kid string
}

// LoadIssuer reads the issuer's key from dir, creating both if missing.
func LoadIssuer(dir string) (*Issuer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, signingKeyFile)
	b, err := os.ReadFile(path)
	var key *ecdsa.PrivateKey
	switch {
	case errors.Is(err, os.ErrNotExist):
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, err
		}
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		blk, _ := pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("%s: not a PEM key", path)
		}
		if key, err = x509.ParseECPrivateKey(blk.Bytes); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(pub)
	return &Issuer{key: key, kid: b64(sum[:12])}, nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// JWKS is the key set with the issuer's public key.
func (is *Issuer) JWKS() []byte {
	p := is.key.PublicKey
	coord := func(n *big.Int) string { return b64(n.FillBytes(make([]byte, 32))) }
	b, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "EC", "crv": "P-256", "x": coord(p.X), "y": coord(p.Y),
		"kid": is.kid, "alg": "ES256", "use": "sig",
	}}})
	return b
}

// Mint signs a token for role, valid for ttl.
func (is *Issuer) Mint(role Role, ttl time.Duration) (string, error) {
	now := time.Now()
	header, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": is.kid})
	claims, _ := json.Marshal(map[string]any{
		"iss": issuerName, "sub": "courier-" + role.Name, "aud": IssuerAudience,
		"iat": now.Unix(), "exp": now.Add(ttl).Unix(), "permissions": role.Permissions,
	})
	signing := b64(header) + "." + b64(claims)
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, is.key, digest[:])
	if err != nil {
		return "", err
	}
	// JWS's ES256 signature is r and s, 32 bytes each, not ASN.1.
	sig := append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	return signing + "." + b64(sig), nil
}

// TokenFile is role's token in the issuer's folder.
func TokenFile(dir, role string) string { return filepath.Join(dir, role+".token") }

// ProfileFile is role's Temporal client profile (TEMPORAL_CONFIG_FILE) in
// the issuer's folder: its token as the API key, over plaintext.
func ProfileFile(dir, role string) string { return filepath.Join(dir, role+".toml") }

// WriteTokens mints a token for every role into dir, as TokenFile and
// ProfileFile.
func (is *Issuer) WriteTokens(dir string, ttl time.Duration) error {
	for _, r := range Roles {
		tok, err := is.Mint(r, ttl)
		if err != nil {
			return err
		}
		if err := os.WriteFile(TokenFile(dir, r.Name), []byte(tok+"\n"), 0o600); err != nil {
			return err
		}
		// An API key turns TLS on by default; the lab's server is plaintext.
		profile := fmt.Sprintf("# %s: %s\n[profile.default]\napi_key = %q\n\n[profile.default.tls]\ndisabled = true\n", r.Name, r.What, tok)
		if err := os.WriteFile(ProfileFile(dir, r.Name), []byte(profile), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// ReadToken reads role's token that WriteTokens wrote to dir.
func ReadToken(dir, role string) (string, error) {
	b, err := os.ReadFile(TokenFile(dir, role))
	if err != nil {
		return "", fmt.Errorf("the %s token: %w (the issuer writes it when it starts)", role, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// ClientEnv is the client environment that sends token as the API key to
// a plaintext server.
func ClientEnv(token string) []string {
	return []string{"TEMPORAL_API_KEY=" + token, "TEMPORAL_TLS=false"}
}

// ServeIssuer serves the JWKS at path on addr until ctx is done.
func (is *Issuer) Serve(ctx context.Context, addr, path string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	jwks := is.JWKS()
	mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(jwks)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
