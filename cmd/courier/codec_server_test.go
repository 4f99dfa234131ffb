package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/abde64c9/courier/connect/codec"
	"github.com/abde64c9/courier/lab/testcert"
)

// vmRSS is a process's resident memory in KiB, from /proc.
func vmRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			require.NoError(t, err)
			return kb
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// TestCodecServerProcess runs a real `courier codec-server` and sends it
// what an attacker or a misconfigured client would: each is refused with
// its reason (and logged without its body), the right request round-trips,
// and a 50 MB body is refused without the process reading it into memory.
func TestCodecServerProcess(t *testing.T) {
	cs := buildCodecServer(t)
	key, dir, run := cs.key, cs.dir, cs.run

	// Without a token, or without auth off a loopback address: no start.
	out, err := run("--addr", closedPort(t)).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "no token: anyone who reaches the codec server could decrypt")
	out, err = run("--addr", "0.0.0.0:0", "--insecure-no-auth").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "only on a loopback address")

	token := "codec-test-token-" + base64.RawURLEncoding.EncodeToString(key[:12])
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("# current\n"+token+"\n"), 0o600))
	addr := closedPort(t)
	const ui = "http://127.0.0.1:8233"
	cmd, log := cs.start(t, addr, "--token-file", tokens, "--ui-origin", ui)
	base := "http://" + addr

	// What the refused requests carry must not reach the log.
	marker := "review-decision-forged-" + base64.RawURLEncoding.EncodeToString(key[12:20])
	plain, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{{
		Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"` + marker + `"`),
	}}})
	require.NoError(t, err)
	type call struct {
		method, path, auth, ctype, host, origin string
		body                                    io.Reader
	}
	do := func(c call) (int, string) {
		t.Helper()
		if c.method == "" {
			c.method = http.MethodPost
		}
		if c.body == nil {
			c.body = bytes.NewReader(plain)
		}
		req, err := http.NewRequest(c.method, base+c.path, c.body)
		require.NoError(t, err)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		if c.host != "" {
			req.Host = c.host
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	bearer, json := "Bearer "+token, "application/json"
	for name, tc := range map[string]struct {
		c      call
		status int
		reason string
	}{
		"anonymous":   {call{path: "/encode", ctype: json}, 401, "missing credential: send Authorization: Bearer TOKEN"},
		"wrong token": {call{path: "/decode", ctype: json, auth: "Bearer not-the-token-at-all"}, 401, "holds no token this codec server accepts"},
		"basic auth":  {call{path: "/decode", ctype: json, auth: "Basic " + base64.StdEncoding.EncodeToString([]byte("a:"+token))}, 401, "holds no token"},
		"wrong path":  {call{path: "/x/decode", ctype: json, auth: bearer}, 404, "/x/decode is not served: only POST /encode and POST /decode"},
		"text/plain":  {call{path: "/encode", ctype: "text/plain", auth: bearer}, 415, "send Content-Type: application/json"},
		"no type":     {call{path: "/encode", auth: bearer}, 415, "send Content-Type: application/json"},
		"GET":         {call{method: http.MethodGet, path: "/decode", auth: bearer}, 405, "GET /decode: use POST"},
		"wrong host":  {call{path: "/encode", ctype: json, auth: bearer, host: "rebound.example:" + addr[strings.LastIndex(addr, ":")+1:]}, 421, "is not a name of this codec server"},
		"wrong origin": {call{path: "/encode", ctype: json, auth: bearer, origin: "https://evil.example"}, 403,
			"origin https://evil.example may not call this codec server; if that is your Temporal web UI, start the server with --ui-origin https://evil.example"},
	} {
		status, body := do(tc.c)
		require.Equal(t, tc.status, status, "%s: %s", name, body)
		require.Contains(t, body, tc.reason, name)
	}

	// The right request: the web UI's, from its origin, with the token.
	status, enc := do(call{path: "/encode", ctype: json, auth: bearer, origin: ui})
	require.Equal(t, http.StatusOK, status, enc)
	require.NotContains(t, enc, marker, "encoded")
	require.NotContains(t, enc, base64.StdEncoding.EncodeToString([]byte(`"`+marker+`"`)))
	status, dec := do(call{path: "/decode", ctype: "application/json; charset=utf-8", auth: bearer, origin: ui, body: strings.NewReader(enc)})
	require.Equal(t, http.StatusOK, status, dec)
	var got commonpb.Payloads
	require.NoError(t, protojson.Unmarshal([]byte(dec), &got))
	require.Len(t, got.Payloads, 1)
	require.Equal(t, `"`+marker+`"`, string(got.Payloads[0].Data))

	// 50 MB, declared and streamed: refused, never held.
	before := vmRSS(t, cmd.Process.Pid)
	const big = 50 << 20
	status, body := do(call{path: "/decode", ctype: json, auth: bearer, body: bytes.NewReader(make([]byte, big))})
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	require.Contains(t, body, "body over 4194304 bytes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, io.LimitReader(zeros{}, big))
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/decode", pr)
	require.NoError(t, err)
	req.Header.Set("Content-Type", json)
	req.Header.Set("Authorization", bearer)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	pr.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "a streamed (chunked) body is cut off at the limit")
	after := vmRSS(t, cmd.Process.Pid)
	t.Logf("codec server VmRSS: %d KiB before the 50 MB requests, %d KiB after", before, after)
	require.Less(t, after, 100<<10, "resident memory stays under 100 MB")

	logs := log()
	require.NotContains(t, logs, marker, "refusals are logged without the body")
	require.NotContains(t, logs, token, "nor the credential")
	require.Contains(t, logs, `reason="missing credential`)
	require.Contains(t, logs, "status=421")
}

// codecServer is a built courier binary and the environment its
// codec-server runs in: a fresh key, nothing else of the test's.
type codecServer struct {
	bin, dir string
	key      []byte
	env      []string
}

func buildCodecServer(t *testing.T) *codecServer {
	t.Helper()
	cs := &codecServer{dir: t.TempDir(), key: make([]byte, 32)}
	cs.bin = filepath.Join(cs.dir, "courier")
	build := exec.Command("go", "build", "-o", cs.bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run(), "build the courier binary")
	_, err := rand.Read(cs.key)
	require.NoError(t, err)
	cs.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + cs.dir, codec.EnvKey + "=" + base64.StdEncoding.EncodeToString(cs.key)}
	return cs
}

// run is the codec-server command with args.
func (cs *codecServer) run(args ...string) *exec.Cmd {
	cmd := exec.Command(cs.bin, append([]string{"codec-server"}, args...)...)
	cmd.Env = cs.env
	return cmd
}

// start runs the codec server on addr until the test ends, once it
// listens, and returns its process and a reader of its log.
func (cs *codecServer) start(t *testing.T, addr string, args ...string) (*exec.Cmd, func() string) {
	t.Helper()
	cmd := cs.run(append([]string{"--addr", addr}, args...)...)
	logFile, err := os.CreateTemp(cs.dir, "codec-server-*.log")
	require.NoError(t, err)
	t.Cleanup(func() { _ = logFile.Close() })
	cmd.Stdout, cmd.Stderr = logFile, logFile
	log := func() string { b, _ := os.ReadFile(logFile.Name()); return string(b) }
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return cmd, log
		}
		require.True(t, time.Now().Before(deadline), "the codec server did not listen: %s", log())
		time.Sleep(50 * time.Millisecond)
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestCodecServerTLS runs a real `courier codec-server` with a certificate
// made for the test: it refuses to start on TLS files it cannot use, saying
// which; over loopback, a client that trusts the CA round-trips a payload,
// while a plaintext request and a client that does not trust it get
// nothing. With a client CA (given by environment), only a client with a
// certificate it signed is served.
func TestCodecServerTLS(t *testing.T) {
	cs := buildCodecServer(t)
	dir := cs.dir
	ca, caKey := testcert.New(t, nil, nil, "codec test CA", nil)
	srvCert, srvKey := testcert.New(t, ca, caKey, "codec server", []string{"localhost"})
	cliCert, cliKey := testcert.New(t, ca, caKey, "operator", nil)
	caFile := testcert.WritePEM(t, dir, "ca.pem", "CERTIFICATE", ca.Raw)
	certFile := testcert.WritePEM(t, dir, "server.pem", "CERTIFICATE", srvCert.Raw)
	keyFile := testcert.WritePEM(t, dir, "server-key.pem", "PRIVATE KEY", srvKey)
	otherKey := testcert.WritePEM(t, dir, "other-key.pem", "PRIVATE KEY", cliKey)
	token := "codec-tls-token-" + base64.RawURLEncoding.EncodeToString(cs.key[:12])
	cs.env = append(cs.env, codec.EnvServerToken+"="+token)

	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"a certificate without its key": {[]string{"--tls-cert", certFile}, "--tls-cert and --tls-key (or COURIER_CODEC_TLS_CERT and COURIER_CODEC_TLS_KEY) go together"},
		"a client CA alone":             {[]string{"--tls-client-ca", caFile}, "go together"},
		"a missing certificate":         {[]string{"--tls-cert", filepath.Join(dir, "none.pem"), "--tls-key", keyFile}, "none.pem: no such file"},
		"another certificate's key":     {[]string{"--tls-cert", certFile, "--tls-key", otherKey}, "private key does not match public key"},
		"a key as the certificate":      {[]string{"--tls-cert", keyFile, "--tls-key", keyFile}, "want PEM files: the server's certificate"},
		"a client CA that is no PEM":    {[]string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", keyFile}, "holds no PEM certificate"},
	} {
		out, err := cs.run(append([]string{"--addr", closedPort(t)}, tc.args...)...).CombinedOutput()
		require.Error(t, err, name)
		require.Contains(t, string(out), tc.want, name)
	}

	trusting := x509.NewCertPool()
	trusting.AddCert(ca)
	client := func(roots *x509.CertPool, certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: certs}}}
	}
	payload, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{{
		Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"over tls"`)}}})
	require.NoError(t, err)
	encode := func(c *http.Client, url string) (int, error) {
		req, err := http.NewRequest(http.MethodPost, url+"/encode", bytes.NewReader(payload))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK {
			require.NotContains(t, string(b), "over tls", "encrypted")
		}
		return resp.StatusCode, nil
	}

	addr := closedPort(t)
	_, log := cs.start(t, addr, "--tls-cert", certFile, "--tls-key", keyFile)
	status, err := encode(client(trusting), "https://"+addr)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, log())
	status, err = encode(http.DefaultClient, "http://"+addr)
	require.NoError(t, err, "the server answers a plaintext request, with a refusal")
	require.Equal(t, http.StatusBadRequest, status, "Go's TLS server: client sent an HTTP request to an HTTPS server")
	_, err = encode(client(nil), "https://"+addr)
	require.ErrorContains(t, err, "certificate signed by unknown authority")
	require.Contains(t, log(), "set the web UI's codec endpoint to https://"+addr)

	// Client certificates, the files named by environment.
	cs.env = append(cs.env, codec.EnvServerTLSCert+"="+certFile, codec.EnvServerTLSKey+"="+keyFile, codec.EnvServerTLSClientCA+"="+caFile)
	addr = closedPort(t)
	_, log = cs.start(t, addr)
	_, err = encode(client(trusting), "https://"+addr)
	require.Error(t, err, "no client certificate: no handshake")
	status, err = encode(client(trusting, tls.Certificate{Certificate: [][]byte{cliCert.Raw}, PrivateKey: cliKey}), "https://"+addr)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, log())
}
