package codec

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
)

func newKey(t *testing.T) string {
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(b)
}

func TestRoundTripAndRotation(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	old, err := ParseKeys([]byte("k1:" + k1))
	require.NoError(t, err)
	oldCodec, err := New(old)
	require.NoError(t, err)

	secret := map[string]string{"subject": "Move the workshop booking"}
	p, err := oldCodec.DataConverter().ToPayload(secret)
	require.NoError(t, err)
	require.Equal(t, Encoding, string(p.Metadata[MetadataEncoding]))
	require.Equal(t, "k1", string(p.Metadata[MetadataKeyID]))
	require.NotContains(t, string(p.Data), "workshop", "the payload is ciphertext")

	// Rotated: k2 encrypts now, k1 still decodes what it wrote.
	rotated, err := ParseKeys([]byte("# rotated\nk2:" + k2 + "\nk1:" + k1 + "\n"))
	require.NoError(t, err)
	require.Equal(t, "k2", rotated.Active)
	c, err := New(rotated)
	require.NoError(t, err)
	var got map[string]string
	require.NoError(t, c.DataConverter().FromPayload(p, &got))
	require.Equal(t, secret, got)
	p2, err := c.DataConverter().ToPayload(secret)
	require.NoError(t, err)
	require.Equal(t, "k2", string(p2.Metadata[MetadataKeyID]))

	// Without the key: a clear error, never garbage.
	err = oldCodec.DataConverter().FromPayload(p2, &got)
	require.ErrorContains(t, err, `payload encrypted with key "k2", which this process does not hold`)

	// Plain payloads (history from before encryption) pass through.
	plain, err := converter.GetDefaultDataConverter().ToPayload(secret)
	require.NoError(t, err)
	require.NoError(t, c.DataConverter().FromPayload(plain, &got))
}

func TestTamperingIsDetected(t *testing.T) {
	keys, err := ParseKeys([]byte("k:" + newKey(t)))
	require.NoError(t, err)
	c, err := New(keys)
	require.NoError(t, err)
	enc, err := c.Encode([]*commonpb.Payload{{Data: []byte(`"x"`)}})
	require.NoError(t, err)
	enc[0].Data[len(enc[0].Data)-1] ^= 1
	_, err = c.Decode(enc)
	require.ErrorContains(t, err, "decrypt payload")
}

func TestParseKeysErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":      "no keys",
		"nokey": "line 1: want id:base64-key",
		"k:!!!": `key "k" is not base64`,
		"k:" + base64.StdEncoding.EncodeToString([]byte("short")): "has 5 bytes; AES-256 needs 32",
	} {
		_, err := ParseKeys([]byte(in))
		require.ErrorContains(t, err, want, in)
	}
}

// TestCodecServerConfig: a server that would serve the keys to more than
// it should does not start, and the error says how to fix it.
func TestCodecServerConfig(t *testing.T) {
	c := testCodec(t)
	tok := []string{"0123456789abcdef"}
	for name, tc := range map[string]struct {
		o    ServerOptions
		want string
	}{
		"no token":                {ServerOptions{Addr: "127.0.0.1:8089"}, "no token: anyone who reaches the codec server"},
		"no auth, not loopback":   {ServerOptions{Addr: "10.0.0.5:8089", NoAuth: true}, "only on a loopback address (--addr 127.0.0.1:8089)"},
		"no auth, all interfaces": {ServerOptions{Addr: ":8089", NoAuth: true}, "only on a loopback address"},
		"no auth and a token":     {ServerOptions{Addr: "127.0.0.1:8089", NoAuth: true, Tokens: tok}, "both given: choose one"},
		"short token":             {ServerOptions{Addr: "127.0.0.1:8089", Tokens: []string{"secret"}}, "a token has 6 characters; use at least 16"},
		"every interface":         {ServerOptions{Addr: "0.0.0.0:8089", Tokens: tok}, "name the host (and port) clients use with --allowed-host"},
		"origin with a path":      {ServerOptions{Addr: "127.0.0.1:8089", Tokens: tok, UIOrigins: []string{"http://ui.example/app"}}, "--ui-origin"},
		"origin wildcard":         {ServerOptions{Addr: "127.0.0.1:8089", Tokens: tok, UIOrigins: []string{"*"}}, "--ui-origin"},
		"huge body":               {ServerOptions{Addr: "127.0.0.1:8089", Tokens: tok, MaxBody: 2 << 30}, "--max-body"},
	} {
		_, err := NewServer(c, tc.o)
		require.ErrorContains(t, err, tc.want, name)
	}
	_, err := NewServer(c, ServerOptions{Addr: "localhost:8089", NoAuth: true})
	require.NoError(t, err, "no auth on loopback, when asked for")
	_, err = NewServer(c, ServerOptions{Addr: "0.0.0.0:8089", Tokens: tok, AllowedHosts: []string{"codec.example.com"}})
	require.NoError(t, err)
}

// TestCodecServerRotationAndPreflight: both tokens of a rotation work, the
// browser's preflight passes without one, and a proxy's host name is
// accepted once allowed.
func TestCodecServerRotationAndPreflight(t *testing.T) {
	c := testCodec(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv, err := NewServer(c, ServerOptions{
		Addr: l.Addr().String(), Tokens: []string{"old-token-0123456789", "new-token-0123456789"},
		AllowedHosts: []string{"codec.example.com"}, UIOrigins: []string{"https://temporal.example.com"},
	})
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + l.Addr().String()

	p, err := c.DataConverter().ToPayload("hello")
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{p}})
	require.NoError(t, err)
	for _, tc := range []struct{ token, host string }{
		{"old-token-0123456789", ""}, {"new-token-0123456789", ""}, {"new-token-0123456789", "codec.example.com"},
	} {
		req, _ := http.NewRequest(http.MethodPost, url+"/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tc.token)
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var out commonpb.Payloads
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%+v: %s", tc, b)
		require.NoError(t, protojson.Unmarshal(b, &out))
		require.Equal(t, `"hello"`, strings.TrimSpace(string(out.Payloads[0].Data)))
	}

	req, _ := http.NewRequest(http.MethodOptions, url+"/decode", nil)
	req.Header.Set("Origin", "https://temporal.example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,x-namespace")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, "https://temporal.example.com", resp.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"))
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "X-Namespace")
}

func testCodec(t *testing.T) *Codec {
	keys, err := ParseKeys([]byte("k:" + newKey(t)))
	require.NoError(t, err)
	c, err := New(keys)
	require.NoError(t, err)
	return c
}

// TestRefusePlaintext: with COURIER_CODEC_REFUSE_PLAINTEXT, a payload that
// is not encrypted is refused, naming the setting; by default it passes.
func TestRefusePlaintext(t *testing.T) {
	t.Setenv(EnvKeyFile, "")
	t.Setenv(EnvKey, base64.StdEncoding.EncodeToString(make([]byte, 32)))
	plain, err := converter.GetDefaultDataConverter().ToPayloads("sent without the codec")
	require.NoError(t, err)

	t.Setenv(EnvRefusePlaintext, "")
	dc, err := FromEnv()
	require.NoError(t, err)
	var s string
	require.NoError(t, dc.FromPayloads(plain, &s), "history from before encryption still reads")

	t.Setenv(EnvRefusePlaintext, "1")
	dc, err = FromEnv()
	require.NoError(t, err)
	require.ErrorContains(t, dc.FromPayloads(plain, &s), "is not encrypted")
	sealed, err := dc.ToPayloads("sent with the codec")
	require.NoError(t, err)
	require.NoError(t, dc.FromPayloads(sealed, &s))
	require.Equal(t, "sent with the codec", s)

	t.Setenv(EnvRefusePlaintext, "maybe")
	_, err = FromEnv()
	require.ErrorContains(t, err, "use 1 to refuse")
}
