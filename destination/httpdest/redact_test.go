package httpdest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/redact"
	"github.com/abde64c9/courier/lab/sandbox"
)

// TestEchoedCredentialRedacted: a destination that echoes its request in a
// 201, a 400 and a 500 gives Courier back the credential it was sent;
// the outcome (receipt body, error) carries a marker instead, in clear,
// base64 and URL-encoded alike.
func TestEchoedCredentialRedacted(t *testing.T) {
	secret := "tok-" + uuid.NewString()
	t.Setenv("COURIER_TEST_ECHO_TOKEN", secret)
	sb, base := startSandbox(t)
	d := sandboxDest(base, "helpdesk")
	d.Auth = &destinations.Auth{Header: "Authorization", Scheme: "Bearer", SecretEnv: "COURIER_TEST_ECHO_TOKEN"}
	red, _ := redact.New(redact.Secret{Label: "helpdesk auth", Value: secret}, redact.Secret{Label: "helpdesk auth", Value: "Bearer " + secret})
	a, err := New("helpdesk", d, red)
	require.NoError(t, err)

	forms := []string{secret, base64.StdEncoding.EncodeToString([]byte("Bearer " + secret)), url.QueryEscape("Bearer " + secret)}
	for _, c := range []struct {
		fault sandbox.FaultKind
		class contract.Class
	}{
		{sandbox.FaultEcho400, contract.ClassRejected},
		{sandbox.FaultEcho500, contract.ClassServerError},
		{sandbox.FaultEchoCreated, contract.ClassCreated},
	} {
		require.NoError(t, sb.Inject("helpdesk", sandbox.Fault{Kind: c.fault}))
		out := a.Deliver(context.Background(), request(uuid.NewString()))
		require.Equal(t, c.class, out.Class, "%s: %s", c.fault, out.Error)
		b, err := json.Marshal(out)
		require.NoError(t, err)
		for _, f := range forms {
			require.NotContains(t, string(b), f, "%s", c.fault)
		}
		require.Contains(t, string(b), "[redacted: helpdesk auth]", "%s: the echo is there, redacted", c.fault)
		if out.Receipt != nil {
			require.True(t, json.Valid(out.Receipt.Body), "the receipt body stays JSON")
			require.NotEmpty(t, out.Receipt.ResourceID)
		}
	}
}
