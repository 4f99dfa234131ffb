package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abde64c9/courier/lab/testcert"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter/httpapi"
	"github.com/abde64c9/courier/workflows"
)

// TestAPIHashToken: the hash an operator puts in the file is the one the
// server compares, read from stdin or made with a fresh token.
func TestAPIHashToken(t *testing.T) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetIn(strings.NewReader("s3cret\n"))
	_, err := cli.Execute(context.Background(), root, []string{"api", "hash-token"})
	require.NoError(t, err)
	require.Equal(t, httpapi.HashToken("s3cret")+"\n", out.String())

	stdout, _, err := runCourier(context.Background(), "api", "hash-token", "--new")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 2)
	require.Equal(t, httpapi.HashToken(lines[0]), lines[1])
}

// TestAPIRefusesBadConfig: a file with a token in clear, one token for two
// tenants or an invalid tenant stops the server before it serves.
func TestAPIRefusesBadConfig(t *testing.T) {
	_, _, err := runCourier(context.Background(), "api")
	var exit *cli.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, cli.CodeUsage, exit.Code)
	require.ErrorContains(t, err, "--config is required")

	h := httpapi.HashToken("t")
	path := filepath.Join(t.TempDir(), "api.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"callers": [
		{"tenant": "acme", "token_sha256": "t"},
		{"tenant": "acme", "token_sha256": "`+h+`"},
		{"tenant": "globex", "token_sha256": "`+h+`"},
		{"tenant": "a\u0007b", "token_sha256": "`+httpapi.HashToken("u")+`"}]}`), 0o600))
	_, _, err = runCourier(context.Background(), "api", "--config", path, "--addr", "127.0.0.1:0")
	require.Error(t, err)
	for _, want := range []string{"callers[0].token_sha256: not a SHA-256", "callers[2].token_sha256: the same token as callers[1]",
		"callers[3].tenant: control character"} {
		require.ErrorContains(t, err, want)
	}
}

// TestAPIStopsOnSIGTERM: `courier api`, a process of its own on a real dev
// server with a real worker, answers the request in flight when SIGTERM
// comes (202 and its Location), exits 0, and the caller's repeat on a new
// server joins the delivery it started: one effect.
func TestAPIStopsOnSIGTERM(t *testing.T) {
	ctx, courier := lab.RealTest(t, 3*time.Minute)
	stack, err := lab.Start(ctx, lab.Options{Courier: courier, Workers: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = stack.Close() })
	const token = "acme-token"
	cfg := filepath.Join(t.TempDir(), "api.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"callers": [{"tenant": "acme", "token_sha256": "`+httpapi.HashToken(token)+`"}]}`), 0o600))
	start := func() (*exec.Cmd, string) {
		addr, err := lab.FreeAddr()
		require.NoError(t, err)
		cmd := exec.CommandContext(ctx, courier, "api", "--config", cfg, "--addr", addr, "--destinations", stack.ConfigPath)
		cmd.Env = stack.Temporal.Env(os.Environ())
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		url := "http://" + addr
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			resp, err := http.Get(url + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return cmd, url
				}
			}
			require.True(t, time.Now().Before(deadline), "courier api not ready: %v", err)
		}
	}
	post := func(url string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/destinations/helpdesk/operations/create-ticket",
			bytes.NewReader(lab.Ticket("sigterm-1", "x")))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", `"sigterm-1"`)
		return http.DefaultClient.Do(req)
	}
	cmd, url := start()
	require.NoError(t, stack.Sandbox.Inject(lab.DestHelpdesk, sandbox.Fault{Kind: sandbox.FaultDelayAfterCommit, Delay: 3 * time.Second}))
	type result struct {
		resp *http.Response
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := post(url)
		got <- result{resp, err}
	}()
	key := opkey.Key(opkey.Operation{Tenant: "acme", Destination: lab.DestHelpdesk, Operation: "create-ticket", BusinessID: "sigterm-1"})
	for {
		_, err := stack.Temporal.Client().DescribeWorkflowExecution(ctx, workflows.WorkflowID(key), "")
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) {
			require.NoError(t, err)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	r := <-got
	require.NoError(t, r.err, "the request in flight is answered")
	r.resp.Body.Close()
	require.Equal(t, http.StatusAccepted, r.resp.StatusCode)
	require.Equal(t, "/v1/deliveries/"+key, r.resp.Header.Get("Location"))
	require.NoError(t, cmd.Wait(), "courier api exits 0 after SIGTERM")

	_, url = start()
	resp, err := post(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var res httpapi.Result
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
	require.Equal(t, http.StatusOK, resp.StatusCode, "the repeat joins the delivery started before SIGTERM")
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	require.Equal(t, key, res.Key)
	n, err := stack.Effects.Count(ctx, lab.DestHelpdesk, "sigterm-1")
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// TestAPIServesTLS: with --tls-cert and --tls-key the API answers HTTPS
// only, so a token never crosses in clear; it stops when its context ends.
func TestAPIServesTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := testcert.New(t, nil, nil, "courier api", []string{"127.0.0.1"})
	certFile := testcert.WritePEM(t, dir, "cert.pem", "CERTIFICATE", cert.Raw)
	keyFile := testcert.WritePEM(t, dir, "key.pem", "PRIVATE KEY", key)
	cfg := filepath.Join(dir, "api.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"callers": [{"tenant": "acme", "token_sha256": "`+httpapi.HashToken("t")+`"}]}`), 0o600))

	_, _, err := runCourier(context.Background(), "api", "--config", cfg, "--tls-cert", certFile)
	require.ErrorContains(t, err, "--tls-cert and --tls-key go together")
	_, _, err = runCourier(context.Background(), "api", "--config", cfg, "--client-ca", certFile)
	require.ErrorContains(t, err, "--client-ca needs --tls-cert")
	stdout, _, err := runCourier(context.Background(), "api", "hash-token", "--cert", certFile)
	require.NoError(t, err)
	require.Equal(t, httpapi.HashCert(cert.Raw)+"\n", stdout, "the certificate's hash, as the file holds it")

	addr, err := lab.FreeAddr()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := runCourier(ctx, "api", "--config", cfg, "--addr", addr, "--tls-cert", certFile, "--tls-key", keyFile)
		done <- err
	}()
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	var resp *http.Response
	require.Eventually(t, func() bool {
		resp, err = client.Get("https://" + addr + "/healthz")
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = client.Get("https://" + addr + "/v1/destinations")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, err = http.Get("http://" + addr + "/healthz")
	if err == nil {
		resp.Body.Close()
		require.NotEqual(t, http.StatusOK, resp.StatusCode, "plain HTTP is not served")
	}
	cancel()
	require.NoError(t, <-done)
}
