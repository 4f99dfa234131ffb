package testsuite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// tsClientDir is the Node project of the TypeScript client test.
const tsClientDir = "tsclient"

// TestTypeScriptClient follows docs/protocol.md from a second language: the
// official TypeScript SDK's client (tsclient/courier.js, which computes keys
// and fingerprints itself) drives a real `courier worker` on the dev server,
// and the sandbox's own store counts the effects. The deliver update carries
// the payload, so numbers the SDK re-encodes (1e2 sent as 100) are never the
// caller's own conflict, while the fingerprint of the caller's source text
// is; a payload Courier cannot take settles rejected, never as a conflict;
// a parked delivery is decided by the review update, whose validator
// refuses a bad decision.
func TestTypeScriptClient(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the TypeScript client test needs %s on PATH (.ci/run installs Node.js and npm)", tool)
		}
	}
	npmInstall(t, tsClientDir)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv := sharedServer(t)
	courier := courierPath(t)
	dir := t.TempDir()
	sb, err := lab.StartSandbox(filepath.Join(dir, lab.SandboxDB), "", nil)
	require.NoError(t, err)
	defer sb.Close()
	all := lab.Destinations(sb.URL, filepath.Join(dir, lab.LedgerDB), lab.CaseBudget)
	cfg := destinations.Config{
		Destinations: map[string]destinations.Destination{
			lab.DestHelpdesk: all.Destinations[lab.DestHelpdesk],
			lab.DestLegacy:   all.Destinations[lab.DestLegacy],
		},
		Reviewers: destinations.Plain("alice"), // so that a reviewer off the list is refused
	}
	cfgPath := filepath.Join(dir, lab.DestinationsFile)
	require.NoError(t, lab.WriteDestinations(cfgPath, cfg))
	effects, err := lab.OpenEffects(sb.Server, cfg)
	require.NoError(t, err)
	defer effects.Close()

	runID := uuid.NewString()[:8]
	tc, err := lab.StartTemporal(ctx, lab.TemporalOptions{Address: srv.HostPort, Namespace: "tsclient-" + runID, Logger: testLogger})
	require.NoError(t, err)
	defer tc.Close()
	w, err := lab.StartWorker(ctx, lab.WorkerOptions{Courier: courier, Destinations: cfgPath, Temporal: tc})
	require.NoError(t, err)
	defer func() { _, _ = w.Stop(30 * time.Second) }()

	js := startNode(t, tsClientDir, tc.Env(os.Environ()))
	count := func(dest, id string) int {
		t.Helper()
		n, err := effects.Count(ctx, dest, id)
		require.NoError(t, err)
		return n
	}
	stored := func(id string) []lab.Effect {
		t.Helper()
		byID, err := effects.All(ctx)
		require.NoError(t, err)
		return byID[id]
	}
	total := func() int {
		t.Helper()
		byID, err := effects.All(ctx)
		require.NoError(t, err)
		n := 0
		for _, effs := range byID {
			n += len(effs)
		}
		return n
	}
	op := func(dest, id string) opkey.Operation {
		return opkey.Operation{Tenant: "acme", Destination: dest, Operation: "create-ticket", BusinessID: id + "-" + runID}
	}
	deliver := func(o opkey.Operation, payload string, extra map[string]any) jsAnswer {
		t.Helper()
		step := map[string]any{"op": "deliver", "operation": o, "payload": payload}
		for k, v := range extra {
			step[k] = v
		}
		return js.call(t, step)
	}

	t.Run("conformance", func(t *testing.T) {
		// The JavaScript key and canonical form reproduce the spec's vectors,
		// and the key of an operation the test delivers is Go's.
		v := js.call(t, map[string]any{"op": "vectors", "path": filepath.Join("..", "..", "..", "opkey", "testdata", "key_vectors.json")})
		require.Empty(t, v.Failures)
		require.Greater(t, v.Checked, 50)
		o := op(lab.DestHelpdesk, "ts-created")
		require.Equal(t, opkey.Key(o), js.call(t, map[string]any{"op": "key", "operation": o}).Key)
	})

	created := op(lab.DestHelpdesk, "ts-created")
	var first jsAnswer
	createdOK := t.Run("created", func(t *testing.T) {
		first = deliver(created, "ticket", nil)
		require.Nil(t, first.Refused, "%+v", first.Refused)
		require.Equal(t, opkey.Key(created), first.Key)
		require.Equal(t, workflows.StatusCreated, first.Answer.Status, "%+v", first.Answer.Attempts)
		require.True(t, first.Started, "this caller's request started the delivery")
		require.Equal(t, first.Fingerprint, first.Answer.Fingerprint, "the fingerprint of what the SDK sent is the workflow's")
		require.Equal(t, "deliver-"+first.Answer.Fingerprint, first.UpdateID)
		effs := stored(created.BusinessID)
		require.Len(t, effs, 1)
		require.NotNil(t, first.Answer.Receipt)
		require.Equal(t, effs[0].ID, first.Answer.Receipt.ResourceID)
	})

	t.Run("duplicate", func(t *testing.T) {
		if !createdOK {
			t.Skip("needs the created delivery")
		}
		again := deliver(created, "ticket", nil)
		require.Nil(t, again.Refused, "%+v", again.Refused)
		require.False(t, again.Started, "another caller started it")
		require.NotEqual(t, again.Caller, again.Answer.Starter)
		require.Equal(t, first.Caller, again.Answer.Starter)
		require.Equal(t, "duplicate", again.Reported)
		require.NotNil(t, again.Answer.Receipt)
		require.Equal(t, first.Answer.Receipt.ResourceID, again.Answer.Receipt.ResourceID, "the same receipt")
		require.Equal(t, 1, count(lab.DestHelpdesk, created.BusinessID))
	})

	t.Run("conflict", func(t *testing.T) {
		if !createdOK {
			t.Skip("needs the created delivery")
		}
		// The delivery has finished, so the server answers the start
		// "already started" and the client reads its result, as the
		// protocol says; a running delivery's validator refuses another
		// payload itself (see the pitfall and the parked delivery below).
		other := deliver(created, "other", nil)
		require.NotNil(t, other.Refused, "%+v", other.Answer)
		require.Equal(t, workflows.ErrConflict, other.Refused.Type, other.Refused.Message)
		require.Equal(t, "result", other.Refused.Via)
		require.Equal(t, first.Answer.Fingerprint, other.Refused.Details[0])
		require.Equal(t, 1, count(lab.DestHelpdesk, created.BusinessID), "nothing sent for the other payload")
	})

	t.Run("numbers", func(t *testing.T) {
		// The payload form: the SDK sends 1e2 as 100 and 1.0 as 1, and the
		// workflow fingerprints the update's payload as it does its input.
		o := op(lab.DestHelpdesk, "ts-numbers")
		res := deliver(o, "numbers", nil)
		require.Nil(t, res.Refused, "%+v", res.Refused)
		require.Contains(t, res.Sent, `"seats":100`)
		require.Contains(t, res.Sent, `"ratio":1}`)
		require.Equal(t, workflows.StatusCreated, res.Answer.Status, "%+v", res.Answer.Attempts)
		require.True(t, res.Started)
		sentFP, err := opkey.Fingerprint(json.RawMessage(res.Sent))
		require.NoError(t, err)
		require.Equal(t, sentFP, res.Answer.Fingerprint)
		require.Equal(t, 1, count(lab.DestHelpdesk, o.BusinessID))

		// The pitfall: the fingerprint of the caller's own text, numbers as
		// written there, is not the fingerprint of what its SDK sent. Its
		// start still starts the delivery, and its own update is refused.
		o = op(lab.DestHelpdesk, "ts-numbers-text")
		res = deliver(o, "numbers", map[string]any{"fingerprint_of_text": true})
		require.Contains(t, res.Text, `"seats": 1e2`)
		require.NotNil(t, res.Refused, "%+v", res.Answer)
		require.Equal(t, workflows.ErrConflict, res.Refused.Type, res.Refused.Message)
		require.Equal(t, "update", res.Refused.Via, "refused by the deliver update's validator")
		sentFP, err = opkey.Fingerprint(json.RawMessage(res.Sent))
		require.NoError(t, err)
		textFP, err := opkey.Fingerprint(json.RawMessage(res.Text))
		require.NoError(t, err)
		require.NotEqual(t, sentFP, textFP)
		require.Equal(t, []any{sentFP, textFP}, res.Refused.Details, "the delivery's fingerprint, then the request's (computed in JavaScript)")
		done := js.call(t, map[string]any{"op": "result", "key": opkey.Key(o)})
		require.Equal(t, workflows.StatusCreated, done.Result.Status, "the start created the delivery")
		require.Equal(t, 1, count(lab.DestHelpdesk, o.BusinessID))
	})

	t.Run("invalid payload", func(t *testing.T) {
		before := total()
		for payload, reason := range map[string]string{
			"array":    "must be a JSON object",
			"oversize": fmt.Sprintf("the limit is %d", opkey.MaxPayloadBytes),
		} {
			o := op(lab.DestHelpdesk, "ts-"+payload)
			res := deliver(o, payload, map[string]any{"unchecked": true})
			require.Nil(t, res.Refused, "%s: not a conflict: %+v", payload, res.Refused)
			require.True(t, res.Started, "%s: the update answered", payload)
			require.Equal(t, workflows.StatusRejected, res.Answer.Status, payload)
			require.Contains(t, res.Answer.Error, reason, payload)
			require.Empty(t, res.Answer.Attempts, "%s: nothing sent", payload)
			// Its run failed (NotDelivered), the result its first detail.
			done := js.call(t, map[string]any{"op": "result", "key": res.Key}).Result
			require.Equal(t, workflows.StatusRejected, done.Status, payload)
		}
		require.Equal(t, before, total(), "nothing stored")
	})

	parked := op(lab.DestLegacy, "ts-parked")
	var ticket string
	parkedOK := t.Run("awaiting review", func(t *testing.T) {
		require.NoError(t, sb.Inject(lab.DestLegacy, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
		res := deliver(parked, "ticket", nil)
		require.Nil(t, res.Refused, "%+v", res.Refused)
		require.Equal(t, workflows.StateAwaitingReview, res.Answer.State, "%+v", res.Answer.Attempts)
		require.Empty(t, res.Answer.Status)
		require.True(t, res.Started)
		effs := stored(parked.BusinessID)
		require.Len(t, effs, 1)
		ticket = effs[0].ID

		// While it runs, the deliver update's validator is the join check:
		// another payload is a conflict, an unreadable one an invalid request.
		other := deliver(parked, "other", nil)
		require.NotNil(t, other.Refused)
		require.Equal(t, workflows.ErrConflict, other.Refused.Type, other.Refused.Message)
		require.Equal(t, "update", other.Refused.Via)
		bad := deliver(parked, "array", map[string]any{"unchecked": true})
		require.NotNil(t, bad.Refused)
		require.Equal(t, workflows.ErrInvalidRequest, bad.Refused.Type, bad.Refused.Message)
		require.Equal(t, 1, count(lab.DestLegacy, parked.BusinessID))
	})

	t.Run("review by update", func(t *testing.T) {
		if !parkedOK {
			t.Skip("needs the parked delivery")
		}
		k := opkey.Key(parked)
		for _, d := range []workflows.ReviewDecision{
			{Decision: "maybe", Reviewer: "alice", Note: "not sure"},
			{Decision: workflows.DecisionDelivered, Reviewer: "mallory", Note: "found it", ResourceID: ticket},
		} {
			res := js.call(t, map[string]any{"op": "review", "key": k, "decision": d})
			require.NotNil(t, res.Refused, "%+v", d)
			require.Equal(t, workflows.ErrInvalidReview, res.Refused.Type, res.Refused.Message)
		}
		st := js.call(t, map[string]any{"op": "status", "key": k}).Status
		require.Equal(t, workflows.StateAwaitingReview, st.State, "refusals change nothing")
		require.NotNil(t, st.Review)
		require.Empty(t, st.Review.Decisions)

		rec := js.call(t, map[string]any{"op": "review", "key": k, "decision": workflows.ReviewDecision{
			Decision: workflows.DecisionDelivered, Reviewer: "alice", Note: "found it", ResourceID: ticket,
		}})
		require.Nil(t, rec.Refused, "%+v", rec.Refused)
		require.True(t, rec.Record.Accepted)
		require.Equal(t, "update", rec.Record.Via)
		done := js.call(t, map[string]any{"op": "result", "key": k}).Result
		require.Equal(t, workflows.StatusDeliveredByReview, done.Status)
		require.NotNil(t, done.Receipt)
		require.Equal(t, ticket, done.Receipt.ResourceID)
		require.Equal(t, 1, count(lab.DestLegacy, parked.BusinessID))
	})
}

// jsAnswer is one answer of tsclient/steps.js.
type jsAnswer struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	// deliver
	Key         string            `json:"key"`
	Fingerprint string            `json:"fingerprint"`
	UpdateID    string            `json:"update_id"`
	Caller      string            `json:"caller"`
	Started     bool              `json:"started"`
	Reported    string            `json:"reported"`
	Answer      workflows.Settled `json:"answer"`
	Sent        string            `json:"sent"`
	Text        string            `json:"text"`
	Refused     *jsRefusal        `json:"refused"`
	// vectors
	Checked  int      `json:"checked"`
	Failures []string `json:"failures"`
	// status, result, review
	Status workflows.DeliveryStatus `json:"status"`
	Result workflows.DeliveryResult `json:"result"`
	Record workflows.ReviewRecord   `json:"record"`
}

// jsRefusal is an application error the client met: its type, and whether
// the update's validator ("update") or the finished delivery's result
// ("result") said it.
type jsRefusal struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Details []any  `json:"details"`
	Via     string `json:"via"`
}

// nodeSteps is a running steps.js: one JSON step a line in, one answer out.
type nodeSteps struct {
	in      io.WriteCloser
	answers chan []byte
	stderr  *lab.SyncBuffer
	// lost is set when a step went unanswered: a late answer would be
	// taken for the next step's.
	lost bool
}

func startNode(t *testing.T, dir string, env []string) *nodeSteps {
	t.Helper()
	cmd := exec.Command("node", "steps.js")
	cmd.Dir, cmd.Env = dir, env
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	n := &nodeSteps{in: in, answers: make(chan []byte), stderr: &lab.SyncBuffer{}}
	cmd.Stderr = n.stderr
	require.NoError(t, cmd.Start())
	go func() {
		defer close(n.answers)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			n.answers <- bytes.Clone(sc.Bytes())
		}
	}()
	t.Cleanup(func() {
		_ = in.Close() // steps.js ends at the end of its input
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("steps.js stderr:\n%s", n.stderr.String())
		}
	})
	return n
}

// stepTimeout bounds one step; the slowest waits for a delivery to settle.
const stepTimeout = 90 * time.Second

func (n *nodeSteps) call(t *testing.T, step any) jsAnswer {
	t.Helper()
	require.False(t, n.lost, "an earlier step went unanswered")
	b, err := json.Marshal(step)
	require.NoError(t, err)
	_, err = n.in.Write(append(b, '\n'))
	require.NoError(t, err, "steps.js stderr:\n%s", n.stderr.String())
	var line []byte
	select {
	case l, ok := <-n.answers:
		require.True(t, ok, "steps.js ended; stderr:\n%s", n.stderr.String())
		line = l
	case <-time.After(stepTimeout):
		n.lost = true
		t.Fatalf("steps.js did not answer %s in %s; stderr:\n%s", b, stepTimeout, n.stderr.String())
	}
	var a jsAnswer
	require.NoError(t, json.Unmarshal(line, &a), "%s", line)
	require.True(t, a.OK, "step %s: %s", b, a.Error)
	return a
}

// npmInstall installs the project's locked dependencies into its
// node_modules when they are missing or older than its lock file.
func npmInstall(t *testing.T, dir string) {
	t.Helper()
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	require.NoError(t, err)
	if installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil && !installed.ModTime().Before(lock.ModTime()) {
		return
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm ci in %s:\n%s", dir, out)
}
