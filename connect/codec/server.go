package codec

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// EnvServerToken is a bearer token the codec server accepts (besides those
// of its --token-file).
const EnvServerToken = "COURIER_CODEC_SERVER_TOKEN"

// The codec server's TLS files, when its flags leave them out: PEM files of
// its certificate (chain) and private key, and of the CAs whose client
// certificates it requires.
const (
	EnvServerTLSCert     = "COURIER_CODEC_TLS_CERT"
	EnvServerTLSKey      = "COURIER_CODEC_TLS_KEY"
	EnvServerTLSClientCA = "COURIER_CODEC_TLS_CLIENT_CA"
)

// DefaultMaxBody bounds a request's body: the server holds one whole body
// in memory, and a Temporal payload is at most 2 MB by default.
const DefaultMaxBody = 4 << 20

// minTokenLen refuses tokens short enough to guess.
const minTokenLen = 16

// ServerOptions say who may use the codec server.
type ServerOptions struct {
	// Addr is the listen address (host:port).
	Addr string
	// Tokens are the accepted bearer tokens (several while rotating).
	Tokens []string
	// NoAuth serves without a token; only on a loopback Addr.
	NoAuth bool
	// AllowedHosts are Host header values accepted besides Addr's own:
	// "name" (any port) or "name:port".
	AllowedHosts []string
	// UIOrigins are the browser origins (scheme://host[:port]) allowed to
	// call it; requests without an Origin (the CLI, a proxy) are not
	// browser requests and pass.
	UIOrigins []string
	// MaxBody bounds a request body in bytes (0: DefaultMaxBody).
	MaxBody int64
	// Log receives one line per request; refusals say why, never the body.
	Log *slog.Logger
	// TLSCert and TLSKey (PEM files: the certificate, then any
	// intermediates; its private key) make it serve https only.
	// TLSClientCA (a PEM bundle) also requires every client to present a
	// certificate one of its CAs signed.
	TLSCert, TLSKey, TLSClientCA string
}

// ReadTokens reads a token file: one token per line; blank lines and lines
// starting with # are skipped.
func ReadTokens(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var toks []string
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); line != "" && !strings.HasPrefix(line, "#") {
			toks = append(toks, line)
		}
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("%s holds no token", path)
	}
	return toks, nil
}

// NewServer returns the codec server for c, or an error naming what is
// wrong with o and how to fix it.
func NewServer(c *Codec, o ServerOptions) (*http.Server, error) {
	h, err := newHandler(c, o)
	if err != nil {
		return nil, err
	}
	tc, err := serverTLS(o)
	if err != nil {
		return nil, err
	}
	return &http.Server{
		Addr: o.Addr, Handler: h, TLSConfig: tc,
		// Bounded so that slow or endless clients cannot hold connections.
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		// The UI may forward a signed-in user's access token: a few KB.
		MaxHeaderBytes: 64 << 10,
	}, nil
}

// Serve serves srv (from NewServer) on l: https when it has a certificate.
func Serve(srv *http.Server, l net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(l, "", "")
	}
	return srv.Serve(l)
}

// serverTLS is the TLS configuration o's files give; nil for none.
func serverTLS(o ServerOptions) (*tls.Config, error) {
	switch {
	case o.TLSCert == "" && o.TLSKey == "" && o.TLSClientCA == "":
		return nil, nil
	case o.TLSCert == "" || o.TLSKey == "":
		return nil, fmt.Errorf("--tls-cert and --tls-key (or %s and %s) go together: give both to serve https "+
			"(--tls-client-ca needs them too), or neither", EnvServerTLSCert, EnvServerTLSKey)
	}
	cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w (want PEM files: the server's certificate, then any "+
			"intermediates, and the private key that matches it)", o.TLSCert, o.TLSKey, err)
	}
	if now := time.Now(); now.After(cert.Leaf.NotAfter) || now.Before(cert.Leaf.NotBefore) {
		return nil, fmt.Errorf("--tls-cert %s: valid from %s until %s, not now: renew it", o.TLSCert,
			cert.Leaf.NotBefore.Format(time.RFC3339), cert.Leaf.NotAfter.Format(time.RFC3339))
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if o.TLSClientCA != "" {
		b, err := os.ReadFile(o.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--tls-client-ca %s holds no PEM certificate: want the CAs that sign your clients' certificates", o.TLSClientCA)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

type handler struct {
	c       *Codec
	tokens  [][sha256.Size]byte
	noAuth  bool
	hosts   map[string]bool // host:port, or host for any port
	origins map[string]bool
	maxBody int64
	log     *slog.Logger
}

func newHandler(c *Codec, o ServerOptions) (*handler, error) {
	h := &handler{c: c, noAuth: o.NoAuth, hosts: map[string]bool{}, origins: map[string]bool{}, maxBody: o.MaxBody, log: o.Log}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBody
	}
	if h.maxBody < 0 || h.maxBody > 1<<30 {
		return nil, fmt.Errorf("--max-body %d: want 1 to %d bytes", h.maxBody, 1<<30)
	}
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %w (want host:port, e.g. 127.0.0.1:8089)", o.Addr, err)
	}
	loopback := isLoopback(host)
	switch {
	case o.NoAuth && len(o.Tokens) > 0:
		return nil, fmt.Errorf("--insecure-no-auth and a token (--token-file or %s) both given: choose one", EnvServerToken)
	case o.NoAuth && !loopback:
		return nil, fmt.Errorf("--insecure-no-auth serves the keys to anyone who can connect, so only on a loopback address "+
			"(--addr 127.0.0.1:%s); %q is not one: give a token with --token-file or %s instead", port, o.Addr, EnvServerToken)
	case !o.NoAuth && len(o.Tokens) == 0:
		return nil, fmt.Errorf("no token: anyone who reaches the codec server could decrypt and encrypt with the keys. "+
			"Give one with --token-file FILE or %s (openssl rand -base64 32), "+
			"or, on your own machine only, --insecure-no-auth with a loopback --addr", EnvServerToken)
	}
	for _, t := range o.Tokens {
		if len(t) < minTokenLen {
			return nil, fmt.Errorf("a token has %d characters; use at least %d (openssl rand -base64 32)", len(t), minTokenLen)
		}
		h.tokens = append(h.tokens, sha256.Sum256([]byte(t)))
	}
	switch {
	case loopback:
		for _, n := range []string{"localhost", "127.0.0.1", "::1"} {
			h.hosts[net.JoinHostPort(n, port)] = true
		}
	case host != "" && !net.ParseIP(host).IsUnspecified():
		h.hosts[strings.ToLower(net.JoinHostPort(host, port))] = true
	case len(o.AllowedHosts) == 0:
		return nil, fmt.Errorf("--addr %q listens on every interface, so the server cannot tell its own name: "+
			"name the host (and port) clients use with --allowed-host, e.g. --allowed-host codec.example.com", o.Addr)
	}
	for _, a := range o.AllowedHosts {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == "" || strings.ContainsAny(a, "/*") {
			return nil, fmt.Errorf("--allowed-host %q: want a host name or host:port", a)
		}
		h.hosts[a] = true
	}
	for _, o := range o.UIOrigins {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("--ui-origin %q: want the web UI's origin, scheme://host[:port], e.g. http://localhost:8233", o)
		}
		h.origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	return h, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refuse answers a request the server will not serve, and logs why.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, status int, reason string) {
	h.log.Warn("codec request refused", "status", status, "reason", reason, "method", r.Method, "path", r.URL.Path,
		"host", r.Host, "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
	http.Error(w, reason, status)
}

func (h *handler) hostAllowed(host string) bool {
	host = strings.ToLower(host)
	if h.hosts[host] {
		return true
	}
	name, _, err := net.SplitHostPort(host)
	if err != nil {
		name = host
	}
	return h.hosts[name] || h.hosts[strings.Trim(name, "[]")]
}

func (h *handler) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	// Equal-length digests, and every token compared: the time taken says
	// nothing about how close a guess came, or which token matched.
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	match := 0
	for _, want := range h.tokens {
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return match == 1
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The Host first: a page whose DNS name was rebound to this address
	// sends its own name, and learns nothing else.
	if !h.hostAllowed(r.Host) {
		h.refuse(w, r, http.StatusMisdirectedRequest, fmt.Sprintf(
			"Host %q is not a name of this codec server; if clients reach it so (a proxy, a DNS name), start it with --allowed-host %s",
			r.Host, r.Host))
		return
	}
	if r.URL.Path != "/encode" && r.URL.Path != "/decode" {
		h.refuse(w, r, http.StatusNotFound, fmt.Sprintf("%s is not served: only POST /encode and POST /decode "+
			"(point the web UI's or CLI's codec endpoint at the server's root, without a path)", r.URL.Path))
		return
	}
	w.Header().Add("Vary", "Origin")
	if origin := r.Header.Get("Origin"); origin != "" {
		if !h.origins[strings.ToLower(origin)] {
			h.refuse(w, r, http.StatusForbidden, fmt.Sprintf(
				"origin %s may not call this codec server; if that is your Temporal web UI, start the server with --ui-origin %s", origin, origin))
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		// The UI can send cookies (codec.includeCredentials) for a proxy.
		w.Header().Set("Access-Control-Allow-Credentials", "true")
	}
	switch r.Method {
	case http.MethodOptions:
		// A preflight carries no credentials by design; the POST that
		// follows must.
		w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Namespace")
		w.Header().Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "POST, OPTIONS")
		h.refuse(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use POST", r.Method, r.URL.Path))
		return
	}
	if !h.noAuth && !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="courier codec"`)
		reason := "missing credential: send Authorization: Bearer TOKEN (temporal --codec-auth \"Bearer TOKEN\"), or call through the authenticating proxy"
		if r.Header.Get("Authorization") != "" {
			reason = "the Authorization header holds no token this codec server accepts (want Bearer TOKEN, a token of its --token-file or " + EnvServerToken + ")"
		}
		h.refuse(w, r, http.StatusUnauthorized, reason)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		h.refuse(w, r, http.StatusUnsupportedMediaType, fmt.Sprintf(
			"Content-Type %q: send Content-Type: application/json (Payloads as protobuf JSON)", r.Header.Get("Content-Type")))
		return
	}
	tooBig := fmt.Sprintf("body over %d bytes; raise the server's --max-body if such payloads are real", h.maxBody)
	if r.ContentLength > h.maxBody {
		h.refuse(w, r, http.StatusRequestEntityTooLarge, tooBig)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		h.refuse(w, r, http.StatusRequestEntityTooLarge, tooBig)
		return
	}
	if err != nil {
		h.refuse(w, r, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	var in commonpb.Payloads
	if err := protojson.Unmarshal(body, &in); err != nil {
		h.refuse(w, r, http.StatusBadRequest, "the body is not Payloads in protobuf JSON: "+err.Error())
		return
	}
	var out []*commonpb.Payload
	if r.URL.Path == "/encode" {
		out, err = h.c.Encode(in.Payloads)
	} else {
		out, err = h.c.Decode(in.Payloads)
	}
	if err != nil {
		h.refuse(w, r, http.StatusBadRequest, err.Error())
		return
	}
	resp, err := protojson.Marshal(&commonpb.Payloads{Payloads: out})
	if err != nil {
		h.refuse(w, r, http.StatusInternalServerError, "encoding the answer: "+err.Error())
		return
	}
	// Who used the keys, on what: the audit trail, without the data.
	h.log.Info("codec request", "op", strings.TrimPrefix(r.URL.Path, "/"), "payloads", len(out),
		"namespace", r.Header.Get("X-Namespace"), "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(resp)
}
