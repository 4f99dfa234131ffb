// Package devserver finds, builds and starts the pinned Temporal dev server
// (the Temporal CLI's start-dev) with the search attributes its caller names,
// for tests, `courier-lab dev`, the benchmark and the soak; lab and tests
// only.
package devserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// CLIVersion is the pinned Temporal CLI (server 1.29.1, UI 2.42.1).
const CLIVersion = "v1.5.1"

// EnvBinary names an explicit Temporal CLI binary.
const EnvBinary = "COURIER_TEMPORAL_CLI"

const modulePath = "github.com/abde64c9/courier"

// BuildHint says how to get the binary.
const BuildHint = "build it with `make temporal` (GOBIN=$PWD/bin go install github.com/temporalio/cli/cmd/temporal@" + CLIVersion + "), or set " + EnvBinary

// ErrNoBinary: the Temporal CLI was not found.
var ErrNoBinary = errors.New("Temporal CLI not found; " + BuildHint)

// Binary finds the Temporal CLI: $COURIER_TEMPORAL_CLI, bin/temporal in the
// Courier checkout around the working directory, or temporal on PATH.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	if root, err := RepoRoot(); err == nil {
		p := filepath.Join(root, "bin", "temporal")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	return "", ErrNoBinary
}

// Ensure finds the Temporal CLI, building it into the checkout's bin/ when
// it is missing (a few minutes, once). Progress goes to log.
func Ensure(ctx context.Context, log io.Writer) (string, error) {
	return ensure(ctx, log, Binary, "the Temporal CLI", "github.com/temporalio/cli/cmd/temporal@"+CLIVersion, "bin",
		"a few minutes", fmt.Errorf("%w (not inside a Courier checkout, so not building it here)", ErrNoBinary))
}

// ensure returns find's binary, first building pkg into the checkout's dir
// when it is missing; outside is the error when there is no checkout.
func ensure(ctx context.Context, log io.Writer, find func() (string, error), what, pkg, dir, takes string, outside error) (string, error) {
	if p, err := find(); err == nil {
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", outside
	}
	if err := goInstall(ctx, log, what, pkg, filepath.Join(root, dir), takes); err != nil {
		return "", err
	}
	return find()
}

// goInstall builds a pinned command from the Go module proxy into dir.
func goInstall(ctx context.Context, log io.Writer, what, pkg, dir, takes string) error {
	fmt.Fprintf(log, "building %s %s into %s (once; %s)...\n", what, pkg, dir, takes)
	cmd := exec.CommandContext(ctx, "go", "install", pkg)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s: %w", what, err)
	}
	return nil
}

// RepoRoot is the Courier checkout around the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isCourierModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside a Courier checkout")
		}
		dir = parent
	}
}

func isCourierModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath
		}
	}
	return false
}

// Options for a dev server.
type Options struct {
	// DBFile persists the server in a SQLite file; empty is in memory.
	DBFile string
	// HostPort to bind, e.g. 127.0.0.1:7233; empty picks a free port.
	HostPort string
	// UI enables the web UI, on UIPort (empty: a free port).
	UI     bool
	UIPort string
	// MetricsPort serves the server's Prometheus metrics at /metrics on
	// loopback; 0 leaves the port to the server.
	MetricsPort int
	// Log receives the server's output; nil discards it.
	Log io.Writer
	// ClientOptions for the returned client (logger, data converter).
	ClientOptions client.Options
	// ExtraArgs are more flags for the dev server, after Courier's own
	// (DynamicConfigArgs).
	ExtraArgs []string
	// KeywordAttributes are the search attributes (type Keyword) the server
	// registers before its services start: Courier's, which the caller
	// names, so that this package stays below the workflows.
	KeywordAttributes []string
}

// Start starts a dev server with the Courier search attributes registered.
func Start(ctx context.Context, o Options) (*testsuite.DevServer, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	co := o.ClientOptions
	co.HostPort = o.HostPort
	if co.Namespace == "" {
		co.Namespace = "default"
	}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	if o.DBFile != "" {
		if err := os.MkdirAll(filepath.Dir(o.DBFile), 0o755); err != nil {
			return nil, err
		}
	}
	args := append(DynamicConfigArgs(), o.ExtraArgs...)
	if o.MetricsPort != 0 {
		args = append(args, "--metrics-port", strconv.Itoa(o.MetricsPort))
	}
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath:     bin,
		ClientOptions:    &co,
		DBFilename:       o.DBFile,
		EnableUI:         o.UI,
		UIPort:           o.UIPort,
		LogLevel:         "error",
		SearchAttributes: keywordAttributes(o.KeywordAttributes),
		ExtraArgs:        args,
		Stdout:           log,
		Stderr:           log,
	})
	if err != nil {
		return nil, fmt.Errorf("start the Temporal dev server (%s): %w", bin, err)
	}
	return srv, nil
}

// DynamicConfigArgs are the dev server flags that make it behave like a
// production server where it matters to Courier, and as fast as Temporal
// allows without weakening durability.
//
// The CLI's dev server re-reads the search attribute definitions from its
// database on every use of a search attribute, so that attributes created
// while it runs show at once (a setting Temporal documents as never for
// production). Courier's attributes are registered when the server starts
// (Start's SearchAttributes are written before its services start), so the
// server's usual 60 s cache is always right for them, and it spares each
// delivery about ten SQLite reads.
//
// Eager activity execution hands an attempt scheduled on the workflow's own
// task queue straight to the worker that completed the workflow task, when
// it has a free slot, instead of through a poll: the activity's events are
// recorded as before. docker-compose's dynamic config sets it too (EagerActivities).
//
// Courier runs batch jobs of its own (a destination's gate releases its held
// deliveries with one) beside operators' bulk reviews (courier review
// --all); Temporal's default of one running job per namespace would make
// each wait for the others. docker-compose's dynamic config sets the same
// (MaxConcurrentBatchJobs).
func DynamicConfigArgs() []string {
	return []string{
		"--dynamic-config-value", "system.forceSearchAttributesCacheRefreshOnRead=false",
		"--dynamic-config-value", EagerActivities + "=true",
		"--dynamic-config-value", fmt.Sprintf("%s=%d", MaxConcurrentBatchJobsSetting, MaxConcurrentBatchJobs),
	}
}

// EagerActivities is the server setting for eager activity execution.
const EagerActivities = "system.enableActivityEagerExecution"

// MaxConcurrentBatchJobsSetting is the server setting for how many batch jobs
// a namespace runs at once; MaxConcurrentBatchJobs Courier's value.
const (
	MaxConcurrentBatchJobsSetting = "frontend.MaxConcurrentBatchOperationPerNamespace"
	MaxConcurrentBatchJobs        = 10
)

// keywordAttributes are names as keyword attributes, for registration (the
// values are placeholders: only the names and types are used).
func keywordAttributes(names []string) temporal.SearchAttributes {
	var updates []temporal.SearchAttributeUpdate
	for _, name := range names {
		updates = append(updates, temporal.NewSearchAttributeKeyKeyword(name).ValueSet(""))
	}
	return temporal.NewSearchAttributes(updates...)
}
