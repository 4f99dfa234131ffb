package lab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/workflows"
)

// TemporalOptions choose the lab's Temporal server.
type TemporalOptions struct {
	// UseEnvironment takes the server TEMPORAL_ADDRESS (and the rest of
	// Temporal's client environment) names, when it names one, instead of
	// starting a dev server.
	UseEnvironment bool
	// Address, when set, is an external server to use instead, in
	// Namespace (empty: default), with the rest of the client environment.
	Address, Namespace string
	// APIKey, with Address, is the token the lab's client and processes
	// send (authorization: Bearer), over plaintext: a server that checks
	// its callers (the topology's).
	APIKey string
	// DBFile keeps the dev server in a SQLite file; empty is in memory.
	DBFile string
	// HostPort the dev server binds; empty picks a free loopback port.
	HostPort string
	// MetricsPort serves the dev server's Prometheus metrics; 0: a free one.
	MetricsPort int
	// Log receives the dev server's output; nil discards it.
	Log io.Writer
	// Logger receives the lab client's SDK logs; nil discards them.
	Logger *slog.Logger
	// ServerArgs are more flags for a dev server the lab starts.
	ServerArgs []string
}

// Temporal is the lab's server and a client of its namespace.
type Temporal struct {
	o TemporalOptions
	// HostPort and Namespace are where the lab's processes connect.
	HostPort, Namespace string
	// Own is true when the lab started the server (a dev server).
	Own    bool
	client client.Client

	mu  sync.Mutex
	srv *sdktest.DevServer
}

// StartTemporal starts a dev server with Courier's search attributes, or
// connects to the one the environment names (see UseEnvironment).
func StartTemporal(ctx context.Context, o TemporalOptions) (*Temporal, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	copts, err := connect.ClientOptions(o.Logger)
	if err != nil {
		return nil, err
	}
	if o.Address != "" {
		copts.HostPort, copts.Namespace = o.Address, o.Namespace
		if o.APIKey != "" {
			copts.Credentials = client.NewAPIKeyStaticCredentials(o.APIKey)
			copts.ConnectionOptions.TLS, copts.ConnectionOptions.TLSDisabled = nil, true
		}
	}
	t := &Temporal{o: o, HostPort: copts.HostPort, Namespace: cmp.Or(copts.Namespace, client.DefaultNamespace)}
	if o.Address == "" && (!o.UseEnvironment || os.Getenv("TEMPORAL_ADDRESS") == "") {
		t.Own, t.Namespace = true, client.DefaultNamespace
		if t.o.HostPort == "" {
			if t.o.HostPort, err = FreeAddr(); err != nil {
				return nil, err
			}
		}
		if t.o.MetricsPort == 0 {
			if t.o.MetricsPort, err = FreePort(); err != nil {
				return nil, err
			}
		}
		t.HostPort = t.o.HostPort
		if err := t.Start(ctx); err != nil {
			return nil, err
		}
		copts.HostPort, copts.Namespace = t.HostPort, t.Namespace
		copts.Credentials, copts.ConnectionOptions.TLS = nil, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if t.client, err = client.DialContext(dctx, copts); err != nil {
		t.stopServer()
		return nil, fmt.Errorf("connect to Temporal at %s: %w", copts.HostPort, err)
	}
	// A dev server of the lab's own has the attributes from its start.
	if !t.Own {
		if err := EnsureNamespace(ctx, t.client, t.Namespace); err != nil {
			t.client.Close()
			return nil, err
		}
	}
	return t, nil
}

// ServerInfo names the Temporal server a lab run used, for its report.
type ServerInfo struct {
	Address   string `json:"address"`
	Namespace string `json:"namespace"`
	// Own is true for the lab's own dev server, false for the one
	// TEMPORAL_ADDRESS named.
	Own bool `json:"own_dev_server"`
}

// Info names the server and namespace the lab's processes use.
func (t *Temporal) Info() ServerInfo {
	return ServerInfo{Address: t.HostPort, Namespace: t.Namespace, Own: t.Own}
}

// Kind says whose server it is, in words.
func (s ServerInfo) Kind() string {
	if s.Own {
		return "the lab's own dev server"
	}
	return "an external server (TEMPORAL_ADDRESS)"
}

// String is the server in words, for a report's line.
func (s ServerInfo) String() string {
	return fmt.Sprintf("%s at %s, namespace %s", s.Kind(), s.Address, s.Namespace)
}

// Client is the lab's client; it reconnects across a Restart.
func (t *Temporal) Client() client.Client { return t.client }

// Env is the environment a lab process needs to reach this server. For a
// server of the lab's own, every other TEMPORAL_ setting of this process
// (TLS, API key, profile) is dropped: it would point elsewhere.
func (t *Temporal) Env(base []string) []string {
	env := slices.Clone(base)
	if t.Own {
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TEMPORAL_") })
	}
	env = append(env, "TEMPORAL_ADDRESS="+t.HostPort, "TEMPORAL_NAMESPACE="+t.Namespace)
	if t.o.APIKey != "" {
		env = append(env, ClientEnv(t.o.APIKey)...)
	}
	return env
}

// MetricsURL is the dev server's Prometheus endpoint; empty when the
// server is not the lab's.
func (t *Temporal) MetricsURL() string {
	if !t.Own {
		return ""
	}
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", t.o.MetricsPort)
}

// Start starts the dev server (again: on the same port and SQLite file).
func (t *Temporal) Start(ctx context.Context) error {
	if !t.Own {
		return errors.New("lab: the Temporal server is not the lab's to start")
	}
	srv, err := devserver.Start(ctx, devserver.Options{
		DBFile: t.o.DBFile, HostPort: t.o.HostPort, MetricsPort: t.o.MetricsPort, Log: t.o.Log,
		ClientOptions:     client.Options{Logger: sdklog.NewStructuredLogger(t.o.Logger)},
		KeywordAttributes: workflows.SearchAttributeNames,
		ExtraArgs:         t.o.ServerArgs,
	})
	if err != nil {
		return err
	}
	srv.Client().Close() // the lab dials its own, like any other process
	t.mu.Lock()
	t.srv = srv
	t.mu.Unlock()
	return nil
}

// StopServer stops the dev server, keeping its SQLite file; Start brings it
// back. The lab's client keeps reconnecting meanwhile.
func (t *Temporal) StopServer() { t.stopServer() }

func (t *Temporal) stopServer() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.srv != nil {
		_ = t.srv.Stop()
		t.srv = nil
	}
}

// PID is the dev server process's id, 0 when it is not running or not the
// lab's.
func (t *Temporal) PID() int {
	if !t.Own {
		return 0
	}
	return childPID("temporal")
}

// Close closes the client and stops a server of the lab's own.
func (t *Temporal) Close() {
	if t.client != nil {
		t.client.Close()
	}
	t.stopServer()
}

// FreeAddr is a loopback address with a port free at the time of asking.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// FreePort is a loopback port free at the time of asking.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
