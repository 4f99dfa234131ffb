package worker

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/destinations"
)

// TestRedactorDecodesBasic: a Basic credential is redacted decoded too
// (user:password, the password alone), whatever the scheme's case; a
// password too short to redact is named at start, and the rest still is.
func TestRedactorDecodesBasic(t *testing.T) {
	pass := "pw/long+enough=secret"
	t.Setenv("COURIER_TEST_BASIC", base64.StdEncoding.EncodeToString([]byte("ops:"+pass)))
	t.Setenv("COURIER_TEST_BASIC_SHORT", base64.StdEncoding.EncodeToString([]byte("ops-team:pw")))
	auth := func(env string) *destinations.Auth {
		return &destinations.Auth{Header: "Authorization", Scheme: "basic", SecretEnv: env}
	}
	red, warnings := Redactor(destinations.Config{Destinations: map[string]destinations.Destination{
		"long": {Auth: auth("COURIER_TEST_BASIC")}, "short": {Auth: auth("COURIER_TEST_BASIC_SHORT")},
	}})
	require.Len(t, warnings, 1)
	require.Contains(t, warnings[0], "short auth password: shorter than 8 bytes")
	for _, echo := range []string{"ops:" + pass, pass, "ops%3A" + strings.ReplaceAll(pass, "/", "%2f"), "ops-team:pw"} {
		got := red.String("saw " + echo + " here")
		require.NotContains(t, got, "enough", echo)
		require.NotContains(t, got, "team:pw", echo)
	}
	require.Equal(t, "pw is short", red.String("pw is short"))
}
