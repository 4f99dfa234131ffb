package codec

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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

// TestServer: the web UI's codec endpoint decodes over real HTTP, for the
// UI's origin only.
func TestServer(t *testing.T) {
	keys, err := ParseKeys([]byte("k:" + newKey(t)))
	require.NoError(t, err)
	c, err := New(keys)
	require.NoError(t, err)
	srv := httptest.NewServer(c.Handler("http://localhost:8233"))
	defer srv.Close()

	p, err := c.DataConverter().ToPayload("hello")
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{p}})
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/decode", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://localhost:8233")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "http://localhost:8233", resp.Header.Get("Access-Control-Allow-Origin"))
	var out struct {
		Payloads []struct {
			Data string `json:"data"`
		} `json:"payloads"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Len(t, out.Payloads, 1)
	data, err := base64.StdEncoding.DecodeString(out.Payloads[0].Data)
	require.NoError(t, err)
	require.Equal(t, `"hello"`, strings.TrimSpace(string(data)))
}
