package lab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIssuerTokensVerify: a token verifies against the JWKS the issuer
// serves, with the claims Temporal's claim mapper reads, and the key (so
// the JWKS) survives a restart.
func TestIssuerTokensVerify(t *testing.T) {
	dir := t.TempDir()
	is, err := LoadIssuer(dir)
	require.NoError(t, err)
	again, err := LoadIssuer(dir)
	require.NoError(t, err)
	require.Equal(t, string(is.JWKS()), string(again.JWKS()))

	var set struct {
		Keys []struct{ Kty, Crv, X, Y, Kid, Alg string }
	}
	require.NoError(t, json.Unmarshal(is.JWKS(), &set))
	require.Len(t, set.Keys, 1)
	k := set.Keys[0]
	require.Equal(t, []string{"EC", "P-256", "ES256"}, []string{k.Kty, k.Crv, k.Alg})
	dec := func(s string) []byte {
		b, err := base64.RawURLEncoding.DecodeString(s)
		require.NoError(t, err)
		return b
	}
	pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(dec(k.X)), Y: new(big.Int).SetBytes(dec(k.Y))}

	require.NoError(t, is.WriteTokens(dir, time.Hour))
	reader, err := RoleNamed("reader")
	require.NoError(t, err)
	tok, err := ReadToken(dir, "reader")
	require.NoError(t, err)
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	var header map[string]string
	require.NoError(t, json.Unmarshal(dec(parts[0]), &header))
	require.Equal(t, k.Kid, header["kid"])
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	sig := dec(parts[2])
	require.True(t, ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])))
	var claims struct {
		Sub, Aud    string
		Exp         int64
		Permissions []string
	}
	require.NoError(t, json.Unmarshal(dec(parts[1]), &claims))
	require.Equal(t, "courier-reader", claims.Sub)
	require.Equal(t, IssuerAudience, claims.Aud)
	require.Equal(t, reader.Permissions, claims.Permissions)
	require.InDelta(t, time.Now().Add(time.Hour).Unix(), claims.Exp, 5)

	profile, err := os.ReadFile(ProfileFile(dir, "reader"))
	require.NoError(t, err)
	require.Contains(t, string(profile), `api_key = "`+tok+`"`)
	require.Contains(t, string(profile), "disabled = true")
}
