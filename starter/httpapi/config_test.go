package httpapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadConfig(t *testing.T) {
	h := HashToken("secret")
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "api.json")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	cfg, err := LoadConfig(write(`{"callers": [{"tenant": "acme", "token_sha256": "` + strings.ToUpper(h) + `"}]}`))
	require.NoError(t, err)
	tenant, ok := newCredentials(cfg.Callers, false).tenant([]byte("secret"))
	require.True(t, ok)
	require.Equal(t, "acme", tenant)
	_, ok = newCredentials(cfg.Callers, false).tenant([]byte("secreT"))
	require.False(t, ok)
	_, ok = newCredentials(cfg.Callers, true).tenant([]byte("secret"))
	require.False(t, ok, "a token is not a certificate")

	// A certificate's hash as openssl prints it: upper case, colons.
	var fp []string
	for i, c := 0, strings.ToUpper(HashCert([]byte("der"))); i < len(c); i += 2 {
		fp = append(fp, c[i:i+2])
	}
	cfg, err = LoadConfig(write(`{"callers": [{"tenant": "globex", "cert_sha256": "` + strings.Join(fp, ":") + `"}]}`))
	require.NoError(t, err)
	tenant, ok = newCredentials(cfg.Callers, true).tenant([]byte("der"))
	require.True(t, ok)
	require.Equal(t, "globex", tenant)

	for name, c := range map[string]struct{ body, want string }{
		"no callers":     {`{"callers": []}`, "callers: none"},
		"unknown field":  {`{"callers": [], "tokens": []}`, `unknown field "tokens"`},
		"token in clear": {`{"callers": [{"tenant": "acme", "token_sha256": "secret"}]}`, "callers[0].token_sha256: not a SHA-256"},
		"duplicate": {`{"callers": [{"tenant": "acme", "token_sha256": "` + h + `"}, {"tenant": "globex", "token_sha256": "` + h + `"}]}`,
			"callers[1].token_sha256: the same token as callers[0]"},
		"both": {`{"callers": [{"tenant": "acme", "token_sha256": "` + h + `", "cert_sha256": "` + h + `"}]}`, "callers[0]: token_sha256 and cert_sha256 both set"},
		"duplicate cert": {`{"callers": [{"tenant": "acme", "cert_sha256": "` + h + `"}, {"tenant": "globex", "cert_sha256": "` + h + `"}]}`,
			"callers[1].cert_sha256: the same certificate as callers[0]"},
		"no tenant":   {`{"callers": [{"token_sha256": "` + h + `"}]}`, "callers[0].tenant: required"},
		"bad tenant":  {`{"callers": [{"tenant": "ac\u202eme", "token_sha256": "` + h + `"}]}`, "callers[0].tenant: bidirectional formatting character"},
		"long tenant": {`{"callers": [{"tenant": "` + strings.Repeat("a", 256) + `", "token_sha256": "` + h + `"}]}`, "callers[0].tenant: 256 bytes"},
		"bad rate":    {`{"callers": [{"tenant": "acme", "token_sha256": "` + h + `"}], "rate_limit": {"per_second": 0, "burst": 3}}`, "rate_limit: per_second must be above 0"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadConfig(write(c.body))
			require.ErrorContains(t, err, c.want)
		})
	}
}
