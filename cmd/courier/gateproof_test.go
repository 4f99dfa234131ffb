package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/reviewproof"
)

// TestDestinationSignedPauseResume: at a destination whose reviewers have
// keys, a pause or resume that is unsigned, forged, altered, expired, for
// another destination, by a reviewer not allowed it, or replayed after the
// gate moved on is refused with its reason and changes nothing; one signed
// with the CLI changes the gate and records the verified principal. A
// destination of plain names pauses by name as before.
func TestDestinationSignedPauseResume(t *testing.T) {
	keys := map[string]ed25519.PrivateKey{}
	for _, name := range []string{"alice", "bob", "mallory"} {
		_, keys[name], _ = ed25519.GenerateKey(rand.Reader)
	}
	pub := func(name string) string { return reviewproof.FormatPublicKey(keys[name].Public().(ed25519.PublicKey)) }
	b := startLab(t, 10*time.Minute, func(cfg *destinations.Config) {
		cfg.Reviewers = destinations.Plain("ops")
		legacy := cfg.Destinations[lab.DestLegacy]
		legacy.Reviewers = destinations.Reviewers{
			{Name: "alice", Key: pub("alice"), Decisions: []string{"abandon", "pause", "resume"}},
			{Name: "bob", Key: pub("bob"), Decisions: reviewproof.Decisions},
		}
		cfg.Destinations[lab.DestLegacy] = legacy
	})
	ctx, st := b.ctx, b.st
	dir := t.TempDir()
	keyFile := func(name string) string { return writeKeyFile(t, dir, name, keys[name]) }
	status := func(dest string) gate.DestinationState {
		t.Helper()
		s, err := st.Starter.Destination(ctx, dest)
		require.NoError(t, err)
		return s.DestinationState
	}
	sign := func(signer, kid string, c reviewproof.GateChange, at time.Time) string {
		t.Helper()
		if c.Destination == "" {
			c.Destination = lab.DestLegacy
		}
		c.State, c.Since = gate.SignedState(status(lab.DestLegacy))
		p, err := reviewproof.SignGate(keys[signer], kid, c, at, 15*time.Minute)
		require.NoError(t, err)
		return p
	}
	refused := func(name string, send func() error, says string) {
		t.Helper()
		before := status(lab.DestLegacy)
		var r *gateclient.RefusedError
		err := send()
		require.True(t, errors.As(err, &r), "%s: %v", name, err)
		require.Contains(t, r.Reason, says, name)
		after := status(lab.DestLegacy)
		require.Equal(t, before.State, after.State, "%s changed nothing", name)
		require.Equal(t, before.Transitions, after.Transitions, "%s changed nothing", name)
	}
	pauseWith := func(r gate.PauseRequest) func() error {
		return func() error { _, err := st.Starter.Pause(ctx, lab.DestLegacy, r); return err }
	}
	resumeWith := func(r gate.ResumeRequest) func() error {
		return func() error { _, err := st.Starter.Resume(ctx, lab.DestLegacy, r); return err }
	}

	// The gate has no run yet: each bad pause starts it, and is refused.
	pause := reviewproof.GateChange{Action: "pause", Reason: "maintenance"}
	now := time.Now()
	other := pause
	other.Destination = lab.DestCRM
	for _, c := range []struct {
		name string
		r    gate.PauseRequest
		says string
	}{
		{"unsigned", gate.PauseRequest{Reason: "maintenance", By: "alice"}, "pause refused: proof required: legacy's reviewers sign pauses and resumes"},
		{"forged", gate.PauseRequest{Reason: "maintenance", By: "alice", Proof: sign("mallory", "alice", pause, now)}, "bad signature"},
		{"unknown key id", gate.PauseRequest{Reason: "maintenance", By: "alice", Proof: sign("mallory", "mallory", pause, now)}, `"mallory" is not among legacy's reviewers`},
		{"altered", gate.PauseRequest{Reason: "mine now", By: "alice", Proof: sign("alice", "alice", pause, now)}, "altered after signing: reason or note"},
		{"expired", gate.PauseRequest{Reason: "maintenance", By: "alice", Proof: sign("alice", "alice", pause, now.Add(-time.Hour))}, "proof expired"},
		{"another destination's", gate.PauseRequest{Reason: "maintenance", By: "alice", Proof: sign("alice", "alice", other, now)}, `signed for "crm", this gate is "legacy"'s`},
		{"not allowed", gate.PauseRequest{Reason: "maintenance", By: "bob", Proof: sign("bob", "bob", pause, now)}, "decision not allowed: legacy's reviewers: bob may retry, delivered, abandon"},
	} {
		refused(c.name, pauseWith(c.r), c.says)
	}
	require.Equal(t, gate.Closed, status(lab.DestLegacy).State)
	require.True(t, status(lab.DestLegacy).Signed, "the gate knows its changes are signed")

	// alice pauses with the CLI: signed over the gate's state, recorded as hers.
	r := b.run("destination", "pause", lab.DestLegacy, "--reason", "maintenance", "--key", keyFile("alice"))
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	s := status(lab.DestLegacy)
	require.Equal(t, gate.Paused, s.State)
	require.Equal(t, "alice", s.Paused.By)
	last := s.Transitions[len(s.Transitions)-1]
	require.Equal(t, "alice", last.Principal)
	require.Equal(t, "legacy's reviewers: alice may abandon, pause, resume", last.Policy)

	// bob may review but not resume; alice's printed resume is good once.
	resume := reviewproof.GateChange{Action: "resume", Reason: "done"}
	refused("resume not allowed", resumeWith(gate.ResumeRequest{By: "bob", Note: "done", Proof: sign("bob", "bob", resume, time.Now())}), "decision not allowed")
	printed := b.runWith([]string{envReviewerKey + "=" + keyFile("alice")}, "destination", "resume", lab.DestLegacy, "--note", "done", "--print")
	require.Equal(t, cli.CodeOK, printed.code, printed.stderr)
	require.Contains(t, printed.stderr, "temporal workflow update execute -w destination-legacy --name resume")
	var signed gate.ResumeRequest
	require.NoError(t, json.Unmarshal([]byte(printed.stdout), &signed), printed.stdout)
	require.Equal(t, "alice", signed.By)
	require.Equal(t, gate.Paused, status(lab.DestLegacy).State, "--print sends nothing")
	require.NoError(t, resumeWith(signed)())
	require.Equal(t, gate.Closed, status(lab.DestLegacy).State)

	// Paused again: the earlier resume's proof answers a state that is gone.
	r = b.run("destination", "pause", lab.DestLegacy, "--reason", "second window", "--key", keyFile("alice"))
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	refused("replayed resume", resumeWith(signed), "signed for another state of the gate")
	require.Equal(t, gate.Paused, status(lab.DestLegacy).State)
	r = b.run("destination", "resume", lab.DestLegacy, "--by", "alice", "--note", "done")
	require.Equal(t, cli.CodeRefused, r.code, "a name without a key: %s", r.stderr)
	require.Contains(t, r.stderr, "proof required")
	r = b.run("destination", "resume", lab.DestLegacy, "--note", "over", "--key", keyFile("alice"))
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	s = status(lab.DestLegacy)
	require.Equal(t, gate.Closed, s.State)
	var path []string
	for _, tr := range s.Transitions {
		path = append(path, tr.To+" by "+tr.Principal)
	}
	require.Equal(t, []string{"paused by alice", "closed by alice", "paused by alice", "closed by alice"}, path)

	// crm's reviewers are the file's plain names: by name, as before.
	r = b.run("destination", "pause", lab.DestCRM, "--reason", "x", "--by", "mallory")
	require.Equal(t, cli.CodeRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, `by: "mallory" may not pause destinations; allowed: ops`)
	r = b.run("destination", "pause", lab.DestCRM, "--reason", "x", "--by", "ops")
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	crm := status(lab.DestCRM)
	require.Equal(t, gate.Paused, crm.State)
	require.False(t, crm.Signed)
	require.Empty(t, crm.Transitions[0].Principal)
	r = b.run("destination", "resume", lab.DestCRM, "--by", "ops")
	require.Equal(t, cli.CodeOK, r.code, r.stderr)

	// What --print prints is the update's input, as the temporal CLI sends it.
	r = b.run("destination", "pause", lab.DestLegacy, "--reason", "third window", "--key", keyFile("alice"))
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	printed = b.run("destination", "resume", lab.DestLegacy, "--note", "by hand", "--key", keyFile("alice"), "--print")
	require.Equal(t, cli.CodeOK, printed.code, printed.stderr)
	temporalCLI, err := devserver.Binary()
	require.NoError(t, err)
	out, err := exec.CommandContext(ctx, temporalCLI, "workflow", "update", "execute", "--address", st.Temporal.HostPort,
		"--namespace", st.Temporal.Namespace, "-w", gate.WorkflowID(lab.DestLegacy), "--name", gate.UpdateResume,
		"--input", printed.stdout).CombinedOutput()
	require.NoError(t, err, "%s", out)
	s = status(lab.DestLegacy)
	require.Equal(t, gate.Closed, s.State)
	require.Equal(t, "alice", s.Transitions[len(s.Transitions)-1].Principal)

	// A gate terminated while paused still holds; the resume that starts it
	// again (Update-with-Start) verifies as the running gate would.
	r = b.run("destination", "pause", lab.DestLegacy, "--reason", "fourth window", "--key", keyFile("alice"))
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	terminate := func() {
		t.Helper()
		require.NoError(t, st.Temporal.Client().TerminateWorkflow(ctx, gate.WorkflowID(lab.DestLegacy), "", "by hand"))
		require.Eventually(t, func() bool { return status(lab.DestLegacy).Stopped == "terminated" }, time.Minute, 100*time.Millisecond)
	}
	terminate()
	r = b.run("destination", "resume", lab.DestLegacy, "--by", "alice", "--note", "unsigned")
	require.Equal(t, cli.CodeRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, "proof required")
	require.Equal(t, gate.Paused, status(lab.DestLegacy).State)
	terminate() // the refused resume started it again, paused
	r = b.run("destination", "resume", lab.DestLegacy, "--note", "gate back", "--key", keyFile("alice"))
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	s = status(lab.DestLegacy)
	require.Equal(t, gate.Closed, s.State)
	require.Empty(t, s.Stopped)
	require.Equal(t, "alice", s.Transitions[len(s.Transitions)-1].Principal)
}

// TestDestinationSignFlags: --key signs as its reviewer (--by, if given,
// must name it); a key in the environment for another name than --by is
// left unused; with neither, who is changing the gate is asked for.
func TestDestinationSignFlags(t *testing.T) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	file := writeKeyFile(t, t.TempDir(), "alice", k)
	t.Setenv(envReviewerKey, "")
	ttl := 15 * time.Minute

	sg, err := (&signFlags{key: file, ttl: ttl}).signer("")
	require.NoError(t, err)
	require.Equal(t, "alice", sg.Name)
	_, err = (&signFlags{key: file, ttl: ttl}).signer("bob")
	require.ErrorContains(t, err, "--by bob: the key is alice's")
	_, err = (&signFlags{ttl: ttl}).signer("")
	require.ErrorContains(t, err, "--by NAME, or --key FILE")
	_, err = (&signFlags{key: file, ttl: 25 * time.Hour}).signer("")
	require.ErrorContains(t, err, "at most 24h")

	t.Setenv(envReviewerKey, file)
	sg, err = (&signFlags{ttl: ttl}).signer("bob")
	require.NoError(t, err)
	require.Nil(t, sg, "alice's exported key does not sign bob's change")
	sg, err = (&signFlags{ttl: ttl}).signer("alice")
	require.NoError(t, err)
	require.Equal(t, "alice", sg.Name)
}

// writeKeyFile writes name's key file into dir, as keygen does.
func writeKeyFile(t *testing.T, dir, name string, k ed25519.PrivateKey) string {
	t.Helper()
	p := filepath.Join(dir, name+".key")
	kb, err := json.Marshal(reviewproof.NewKeyFile(name, k))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, kb, 0o600))
	return p
}
