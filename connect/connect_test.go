package connect_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/connect/codec"
)

// noEnv clears the client environment, so the host's own settings do not
// leak into the test.
func noEnv(t *testing.T) {
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "none.toml"))
	for _, k := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_PROFILE",
		"TEMPORAL_TLS", codec.EnvKey, codec.EnvKeyFile, codec.EnvKeyID} {
		t.Setenv(k, "")
	}
}

func TestClientOptions(t *testing.T) {
	noEnv(t)
	opts, err := connect.ClientOptions(nil)
	require.NoError(t, err)
	require.Equal(t, client.DefaultHostPort, opts.HostPort)
	require.Nil(t, opts.DataConverter, "no keys: no encryption")
	require.Nil(t, opts.FailureConverter, "no keys: failures as the SDK writes them")
	require.Nil(t, opts.Logger)

	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:7999")
	t.Setenv("TEMPORAL_NAMESPACE", "payments")
	t.Setenv(codec.EnvKey, base64.StdEncoding.EncodeToString(make([]byte, 32)))
	opts, err = connect.ClientOptions(slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7999", opts.HostPort)
	require.Equal(t, "payments", opts.Namespace)
	require.NotNil(t, opts.DataConverter, "keys set: payloads are encrypted")
	require.NotNil(t, opts.Logger)

	t.Setenv(codec.EnvKey, "not base64")
	_, err = connect.ClientOptions(nil)
	require.ErrorContains(t, err, "payload encryption: "+codec.EnvKey)
}

// TestCodecEncodesFailures: with keys set, a failure's message and stack
// trace (its cause's too) leave the process as ciphertext, and come back
// whole with the same options.
func TestCodecEncodesFailures(t *testing.T) {
	noEnv(t)
	t.Setenv(codec.EnvKey, base64.StdEncoding.EncodeToString(make([]byte, 32)))
	opts, err := connect.ClientOptions(nil)
	require.NoError(t, err)
	require.NotNil(t, opts.FailureConverter, "keys set: failures are encrypted")
	marker := "echoed-subject-" + t.Name()
	f := opts.FailureConverter.ErrorToFailure(temporal.NewApplicationErrorWithCause("HTTP 400 "+marker, "Rejected",
		fmt.Errorf("cause quoting %s", marker)))
	b, err := proto.Marshal(f)
	require.NoError(t, err)
	require.NotContains(t, string(b), marker, "neither the message nor its cause's in clear")
	require.Equal(t, "Encoded failure", f.GetMessage())
	require.Equal(t, codec.Encoding, string(f.GetEncodedAttributes().GetMetadata()[codec.MetadataEncoding]))

	err = opts.FailureConverter.FailureToError(f)
	require.ErrorContains(t, err, "HTTP 400 "+marker)
	require.ErrorContains(t, errors.Unwrap(err), "cause quoting "+marker)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "Rejected", app.Type(), "the type stays readable: code matches on it")
}

func TestDialNamesTheAddress(t *testing.T) {
	noEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	t.Setenv("TEMPORAL_ADDRESS", addr)

	_, err = connect.Dial(context.Background(), nil)
	require.ErrorContains(t, err, "cannot reach Temporal at "+addr+` (namespace "default")`)
	require.ErrorContains(t, err, "courier-lab dev")
}
