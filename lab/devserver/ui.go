package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// UIServerVersion is the Temporal web UI server: the UI the pinned CLI
// bundles, served on its own so that it takes settings.
const UIServerVersion = "v2.42.1"

// UIBuildHint says how to get the web UI server.
const UIBuildHint = "build it with `make ui-server` (GOBIN=$PWD/bin/ui-server go install github.com/temporalio/ui-server/v2/cmd/server@" + UIServerVersion + ")"

// UISetting is one of the web UI's action switches: the ui-server's
// config key and the environment variable its container image reads.
type UISetting struct {
	Key, Env string
	Value    bool
}

// UISettings are the actions Courier's web UI offers. Starting a workflow
// ("Start Workflow Like This One") and resetting one would run a delivery
// again from the UI: both are off (and a second run parks anyway, see the
// workflow). Terminate and Request Cancellation, one by one or as batch
// actions, stop a delivery where nothing can decide it but delivering it
// again: off (and a stopped delivery is still read right and may run
// again, see the starter). Signals and updates are how an operator decides
// a review: on.
// `courier-lab dev` serves its UI with these, and docker-compose.yml must set
// the same (deploy's tests check it).
var UISettings = []UISetting{
	{Key: "startWorkflowDisabled", Env: "TEMPORAL_START_WORKFLOW_DISABLED", Value: true},
	{Key: "workflowResetDisabled", Env: "TEMPORAL_WORKFLOW_RESET_DISABLED", Value: true},
	{Key: "workflowTerminateDisabled", Env: "TEMPORAL_WORKFLOW_TERMINATE_DISABLED", Value: true},
	{Key: "workflowCancelDisabled", Env: "TEMPORAL_WORKFLOW_CANCEL_DISABLED", Value: true},
	{Key: "batchActionsDisabled", Env: "TEMPORAL_BATCH_ACTIONS_DISABLED", Value: true},
	{Key: "workflowSignalDisabled", Env: "TEMPORAL_WORKFLOW_SIGNAL_DISABLED", Value: false},
	{Key: "workflowUpdateDisabled", Env: "TEMPORAL_WORKFLOW_UPDATE_DISABLED", Value: false},
}

// UIBinary finds the web UI server in the checkout's bin/ui-server (its
// command is named server, like the Temporal server's).
func UIBinary() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("web UI server not found: %w; %s", err, UIBuildHint)
	}
	p := filepath.Join(root, "bin", "ui-server", "server")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("web UI server not found at %s; %s", p, UIBuildHint)
	}
	return p, nil
}

// EnsureUI finds the web UI server, building it into the checkout's bin/
// when it is missing (under a minute, once). Progress goes to log.
func EnsureUI(ctx context.Context, log io.Writer) (string, error) {
	return ensure(ctx, log, UIBinary, "the web UI server", "github.com/temporalio/ui-server/v2/cmd/server@"+UIServerVersion,
		filepath.Join("bin", "ui-server"), "under a minute",
		fmt.Errorf("web UI server not found (not inside a Courier checkout, so not building it here); %s", UIBuildHint))
}

// UIOptions for a web UI server.
type UIOptions struct {
	// Dir holds its config file.
	Dir string
	// Temporal is the frontend's gRPC address; Port the UI's HTTP port on
	// loopback.
	Temporal string
	Port     int
	// Log receives its output; nil discards it.
	Log io.Writer
}

// UI is a running web UI server.
type UI struct {
	cmd  *exec.Cmd
	done chan struct{}
	URL  string
}

// uiEnv names the config file ui-server reads (<env>.yaml in its config dir).
const uiEnv = "courier"

// StartUI serves the web UI with UISettings and waits until it answers.
func StartUI(ctx context.Context, o UIOptions) (*UI, error) {
	bin, err := EnsureUI(ctx, o.Log)
	if err != nil {
		return nil, err
	}
	cfg := []string{
		"temporalGrpcAddress: " + o.Temporal,
		"host: 127.0.0.1",
		"port: " + strconv.Itoa(o.Port),
		"enableUi: true",
		"defaultNamespace: default",
		"notifyOnNewVersion: false",
		"cors:",
		"  cookieInsecure: true",
	}
	for _, s := range UISettings {
		cfg = append(cfg, fmt.Sprintf("%s: %t", s.Key, s.Value))
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Dir, uiEnv+".yaml"), []byte(strings.Join(cfg, "\n")+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("web UI config: %w", err)
	}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	cmd := exec.Command(bin, "--root", o.Dir, "--config", ".", "--env", uiEnv, "start")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the web UI server: %w", err)
	}
	u := &UI{cmd: cmd, done: make(chan struct{}), URL: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port))}
	go func() { _ = cmd.Wait(); close(u.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(u.URL + "/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return u, nil
			}
		}
		select {
		case <-u.done:
			return nil, errors.New("the web UI server exited at start (see the server log)")
		case <-ctx.Done():
			_ = u.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = u.Stop()
			return nil, fmt.Errorf("the web UI server did not answer on %s within 30 s", u.URL)
		}
	}
}

// Stop ends the web UI server.
func (u *UI) Stop() error {
	_ = u.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-u.done:
	case <-time.After(5 * time.Second):
		_ = u.cmd.Process.Kill()
		<-u.done
	}
	return nil
}
