package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/abde64c9/courier/activities/probe"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/lab/testsuite"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// cliRun runs the built courier binary against a real dev server, with a
// Courier worker in this process and the sandbox destinations on loopback.
type cliRun struct {
	t         *testing.T
	bin       string
	addr      string
	env       *testsuite.Env
	destsFile string
	temporal  client.Client
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs courier with args and TEMPORAL_ADDRESS at the test server
// (extra env entries override it).
func (c *cliRun) run(extraEnv []string, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+c.addr, "TEMPORAL_NAMESPACE=default")
	cmd.Env = append(cmd.Env, extraEnv...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(c.t, err)
	}
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}

func (c *cliRun) courier(args ...string) result {
	c.t.Helper()
	return c.run(nil, args...)
}

// status decodes stdout as one delivery status: stdout carries only JSON.
func status(t *testing.T, r result) workflows.DeliveryStatus {
	t.Helper()
	var st workflows.DeliveryStatus
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&st), "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.False(t, dec.More(), "stdout holds more than one JSON value: %s", r.stdout)
	return st
}

func (c *cliRun) deliver(dest, id, payload string, more ...string) result {
	c.t.Helper()
	args := append([]string{"deliver", "--tenant", "acme", "--destination", dest, "--operation", "create-ticket",
		"--id", id, "--payload", payload}, more...)
	return c.courier(args...)
}

// parkedAt is when the delivery parked: its state upsert's event time.
func (c *cliRun) parkedAt(key string) time.Time {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	it := c.temporal.GetWorkflowHistory(ctx, workflows.WorkflowID(key), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var at time.Time
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(c.t, err)
		if ev.GetEventType() == enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES {
			at = ev.GetEventTime().AsTime()
		}
	}
	require.False(c.t, at.IsZero(), "delivery %s never parked", key)
	return at
}

func ticket(id, subject string) string { return string(lab.Ticket(id, subject)) }

func (c *cliRun) effects(dest, id string) int {
	c.t.Helper()
	n, err := c.env.Effects(dest, id)
	require.NoError(c.t, err)
	return n
}

// keyOf is the key of an (acme, dest, create-ticket, id) delivery.
func keyOf(dest, id string) string {
	return opkey.Key(opkey.Operation{Tenant: "acme", Destination: dest, Operation: "create-ticket", BusinessID: id})
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func setup(t *testing.T) *cliRun {
	dir := t.TempDir()
	bin := filepath.Join(dir, "courier")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run(), "build the courier binary")

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{
		ClientOptions:     client.Options{Logger: sdklog.NewStructuredLogger(logger)},
		KeywordAttributes: workflows.SearchAttributeNames,
	})
	require.NoError(t, err, "the CLI tests need the Temporal CLI: %s", devserver.BuildHint)
	t.Cleanup(func() { _ = srv.Stop() })

	env, err := testsuite.NewEnv(dir)
	require.NoError(t, err)
	t.Cleanup(env.Close)
	// Only these may decide reviews: the workflow checks, the CLI reports.
	env.Config.Reviewers = destinations.Plain("alice", "bob")

	workers := worker.New(srv.Client(), env.Config, env.WorkerActivities(srv.Client()), sdkworker.Options{})
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(wctx, workers) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})

	destsFile := filepath.Join(dir, "destinations.json")
	b, err := json.MarshalIndent(env.Config, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(destsFile, b, 0o600))
	_, err = destinations.Load(destsFile)
	require.NoError(t, err, "the test's destinations file must be one the worker would accept")

	return &cliRun{t: t, bin: bin, addr: srv.FrontendHostPort(), env: env, destsFile: destsFile, temporal: srv.Client()}
}

// TestCLI runs every delivery command through the built binary, with one
// dev server for all of them.
func TestCLI(t *testing.T) {
	c := setup(t)
	for _, tc := range []struct {
		name string
		test func(*testing.T, *cliRun)
	}{
		{"created then duplicate", testCreatedThenDuplicate},
		{"conflict", testConflict},
		{"rejected", testRejected},
		{"no wait", testNoWait},
		{"not delivered, interrupted", testNotDelivered},
		{"awaiting review, list, review", testReview},
		{"unknown destination", testUnknownDestination},
		{"malformed JSON", testMalformedJSON},
		{"identifiers not plain text", testIdentifiersNotPlain},
		{"missing flags", testMissingFlags},
		{"unknown and bad keys", testKeys},
		{"Temporal unreachable", testUnreachable},
		{"probe", testProbe},
		{"destination refusals", testDestinationRefused},
		{"help", testHelp},
	} {
		t.Run(tc.name, func(t *testing.T) { c.t = t; tc.test(t, c) })
	}
}

func testCreatedThenDuplicate(t *testing.T, c *cliRun) {
	payload := ticket("cli-001", "Move the workshop booking")
	first := c.deliver("helpdesk", "cli-001", payload, "--destinations", c.destsFile)
	require.Equal(t, cli.CodeOK, first.code, first.stderr)
	st := status(t, first)
	require.Equal(t, workflows.StatusCreated, st.Status)
	require.Equal(t, keyOf("helpdesk", "cli-001"), st.Key)
	require.Equal(t, "cli-001", st.Operation.BusinessID)
	require.NotNil(t, st.Receipt)

	again := c.deliver("helpdesk", "cli-001", payload)
	require.Equal(t, cli.CodeOK, again.code, again.stderr)
	dup := status(t, again)
	require.Equal(t, workflows.StatusDuplicate, dup.Status)
	require.Equal(t, st.Receipt.ResourceID, dup.Receipt.ResourceID, "a duplicate carries the first receipt")
	require.Equal(t, 1, c.effects("helpdesk", "cli-001"))
}

func testConflict(t *testing.T, c *cliRun) {
	r := c.deliver("helpdesk", "cli-001", ticket("cli-001", "Another subject"))
	require.Equal(t, cli.CodeConflict, r.code, r.stderr)
	require.Contains(t, r.stderr, "conflict: delivery "+keyOf("helpdesk", "cli-001")+" was started with another payload")
	require.Contains(t, r.stderr, "nothing was sent")
	require.Equal(t, workflows.StatusConflict, status(t, r).Status)
	require.Equal(t, 1, c.effects("helpdesk", "cli-001"))
}

func testRejected(t *testing.T, c *cliRun) {
	// The sandbox requires a subject.
	r := c.deliver("helpdesk", "cli-rejected", `{"request_id": "cli-rejected"}`)
	require.Equal(t, cli.CodeRejected, r.code, r.stderr)
	require.Contains(t, r.stderr, "rejected: HTTP 422")
	require.Equal(t, workflows.StatusRejected, status(t, r).Status)
	require.Equal(t, 0, c.effects("helpdesk", "cli-rejected"))
}

func testNoWait(t *testing.T, c *cliRun) {
	r := c.deliver("helpdesk", "cli-nowait", ticket("cli-nowait", "Book the room"), "--no-wait")
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	var h starter.Handle
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &h), r.stdout)
	key := keyOf("helpdesk", "cli-nowait")
	require.Equal(t, key, h.Key)
	require.Equal(t, "delivery-"+key, h.WorkflowID)
	require.NotEmpty(t, h.RunID)
	require.False(t, h.Joined)

	require.Eventually(t, func() bool {
		s := c.courier("status", key)
		return s.code == cli.CodeOK && status(t, s).State == workflows.State(workflows.StatusCreated)
	}, 30*time.Second, 200*time.Millisecond)
	// The workflow ID works as well as the key.
	require.Equal(t, cli.CodeOK, c.courier("status", "delivery-"+key).code)
}

func testNotDelivered(t *testing.T, c *cliRun) {
	// Three 503s spend helpdesk's budget of three attempts.
	require.NoError(t, c.env.Inject("helpdesk", sandbox.Fault{Kind: sandbox.FaultFail503, Count: 3}))
	r := c.deliver("helpdesk", "cli-limit", ticket("cli-limit", "s"))
	require.Equal(t, cli.CodeNotDelivered, r.code, r.stderr)
	require.Contains(t, r.stderr, "not delivered (attempt_limit): retry budget spent after 3 attempts")
	require.Contains(t, r.stderr, "nothing it sent can have applied", "three 503s: the destination applied none")
	require.Equal(t, workflows.StatusAttemptLimit, status(t, r).Status)
	require.Equal(t, 0, c.effects("helpdesk", "cli-limit"))

	// Ctrl-C while waiting stops the wait, not the delivery.
	require.NoError(t, c.env.Inject("helpdesk", sandbox.Fault{Kind: sandbox.FaultFail503, Count: 3}))
	cmd := exec.Command(c.bin, "deliver", "--destination", "helpdesk", "--operation", "create-ticket",
		"--id", "cli-interrupted", "--payload", ticket("cli-interrupted", "s"))
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+c.addr)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	key := opkey.Key(opkey.Operation{Destination: "helpdesk", Operation: "create-ticket", BusinessID: "cli-interrupted"})
	require.Eventually(t, func() bool {
		s := c.courier("status", key)
		return s.code == cli.CodeOK && len(status(t, s).Attempts) > 0
	}, 30*time.Second, 100*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	var exit *exec.ExitError
	require.ErrorAs(t, cmd.Wait(), &exit)
	require.Equal(t, cli.CodeError, exit.ExitCode(), errOut.String())
	require.Contains(t, errOut.String(), "stopped waiting; the delivery goes on in Temporal: follow it with `courier status "+key+"`")
	require.Empty(t, out.String())
	require.Eventually(t, func() bool {
		return status(t, c.courier("status", key)).Status == workflows.StatusAttemptLimit
	}, 30*time.Second, 200*time.Millisecond)
}

func testReview(t *testing.T, c *cliRun) {
	const id = "cli-review"
	key := keyOf("legacy", id)
	// legacy has no dedup: a response lost after the commit must stop for review.
	require.NoError(t, c.env.Inject("legacy", sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
	r := c.deliver("legacy", id, ticket(id, "Call back the customer"))
	exited := time.Now()
	require.Equal(t, cli.CodeAwaiting, r.code, r.stderr)
	st := status(t, r)
	require.Equal(t, workflows.StateAwaitingReview, st.State)
	// The command answers as the delivery parks, not at a poll.
	parkedAt := c.parkedAt(key)
	require.Less(t, exited.Sub(parkedAt), time.Second, "courier deliver exited %s after the park", exited.Sub(parkedAt))
	require.Contains(t, r.stderr, "delivery "+key+" is awaiting review")
	require.Contains(t, r.stderr, `destination "legacy" (dedup none) cannot deduplicate a retry`)
	require.Contains(t, r.stderr, "courier review "+key+" \\\n  --decision delivered")
	require.Equal(t, 1, c.effects("legacy", id), "the lost response's ticket exists")

	s := c.courier("status", key)
	require.Equal(t, cli.CodeOK, s.code, s.stderr)
	require.Equal(t, workflows.StateAwaitingReview, status(t, s).State)

	// Visibility lags the workflow: poll, bounded.
	var listed []starter.Delivery
	require.Eventually(t, func() bool {
		l := c.courier("list", "--state", "awaiting_review", "--json")
		require.Equal(t, cli.CodeOK, l.code, l.stderr)
		require.NoError(t, json.Unmarshal([]byte(l.stdout), &listed), l.stdout)
		return len(listed) == 1
	}, 30*time.Second, 300*time.Millisecond)
	require.Equal(t, key, listed[0].Key)
	require.Equal(t, "legacy", listed[0].Destination)
	table := c.courier("list", "--state", "awaiting_review")
	require.Equal(t, cli.CodeOK, table.code)
	require.Contains(t, table.stdout, "KEY")
	require.Contains(t, table.stdout, key)
	require.Contains(t, table.stderr, `CourierState = "awaiting_review"`)

	// Refused before anything is sent: malformed decisions.
	bad := c.courier("review", key, "--decision", "maybe", "--reviewer", "alice", "--note", "n")
	require.Equal(t, cli.CodeUsage, bad.code)
	require.Contains(t, bad.stderr, `decision: "maybe" unknown; use retry, delivered or abandon`)
	noID := c.courier("review", key, "--decision", "delivered", "--reviewer", "alice", "--note", "found it")
	require.Equal(t, cli.CodeUsage, noID.code)
	require.Contains(t, noID.stderr, "resource_id: required with decision delivered")
	// Refused by the workflow's validator: not an allowed reviewer.
	mallory := c.courier("review", key, "--decision", "abandon", "--reviewer", "mallory", "--note", "n")
	require.Equal(t, cli.CodeRefused, mallory.code, mallory.stderr)
	require.Contains(t, mallory.stderr, `reviewer: "mallory" may not review deliveries; allowed: alice, bob`)
	require.Equal(t, workflows.StateAwaitingReview, status(t, c.courier("status", key)).State, "a refused decision changes nothing")

	// The shown command, its lines pasted unchanged into a shell: its
	// placeholders are redirections the shell refuses before courier runs.
	var shown string
	for _, cmd := range strings.Split(r.stderr, "\n\n") {
		if strings.Contains(cmd, "--decision delivered") {
			shown = strings.TrimSpace(cmd)
		}
	}
	require.Contains(t, shown, "--resource-id <ID-YOU-FOUND> \\\n  --reviewer <YOUR-NAME> \\\n")
	dir := t.TempDir()
	paste := exec.Command("bash", "-c", c.bin+strings.TrimPrefix(shown, "courier"))
	paste.Dir, paste.Env = dir, append(os.Environ(), "TEMPORAL_ADDRESS="+c.addr, "LC_ALL=C")
	out, err := paste.CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "ID-YOU-FOUND: No such file or directory")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "the refused paste wrote nothing")
	// Quoted, or the bare placeholders shown before: refused by name.
	quoted := c.courier("review", key, "--decision", "delivered", "--resource-id", "<ID-YOU-FOUND>",
		"--reviewer", "<YOUR-NAME>", "--note", "found it")
	require.Equal(t, cli.CodeUsage, quoted.code, quoted.stderr)
	require.Contains(t, quoted.stderr, `resource_id: "<ID-YOU-FOUND>" is the review command's placeholder`)
	require.Contains(t, quoted.stderr, `reviewer: "<YOUR-NAME>" is the review command's placeholder`)
	bare := c.courier("review", key, "--decision", "delivered", "--resource-id", "ID", "--reviewer", "alice", "--note", "found it")
	require.Equal(t, cli.CodeUsage, bare.code, bare.stderr)
	require.Contains(t, bare.stderr, `resource_id: "ID" is the review command's placeholder`)
	require.Equal(t, workflows.StateAwaitingReview, status(t, c.courier("status", key)).State, "a pasted placeholder decides nothing")

	recs, err := c.env.Sandbox.Records("legacy")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	ok := c.courier("review", key, "--decision", "delivered", "--resource-id", recs[0].TicketID,
		"--reviewer", "alice", "--note", "found the ticket in the helpdesk", "--wait")
	require.Equal(t, cli.CodeOK, ok.code, ok.stderr)
	final := status(t, ok)
	require.Equal(t, workflows.StatusDeliveredByReview, final.Status)
	require.Equal(t, recs[0].TicketID, final.Receipt.ResourceID)
	require.Equal(t, id, final.Operation.BusinessID)
	v, err := c.temporal.QueryWorkflow(context.Background(), workflows.WorkflowID(key), "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var meta sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&meta))
	require.Contains(t, meta.GetCurrentDetails(), "decided by `alice`, resource `"+recs[0].TicketID+"`",
		"the details name the effect the reviewer found")
	require.Equal(t, 1, c.effects("legacy", id))

	// The delivery no longer waits: a second decision is refused, and says why.
	again := c.courier("review", key, "--decision", "retry", "--reviewer", "alice", "--note", "n")
	require.Equal(t, cli.CodeRefused, again.code, again.stderr)
	require.Contains(t, again.stderr, "delivery "+key+" is not awaiting review (state delivered_by_review)")
	created := c.courier("review", keyOf("helpdesk", "cli-001"), "--decision", "retry", "--reviewer", "alice", "--note", "n")
	require.Equal(t, cli.CodeRefused, created.code, created.stderr)
	require.Contains(t, created.stderr, "is not awaiting review (state created)")

	require.Eventually(t, func() bool {
		l := c.courier("list", "--state", "delivered_by_review", "--json")
		return l.code == cli.CodeOK && strings.Contains(l.stdout, key)
	}, 30*time.Second, 300*time.Millisecond)
}

func testUnknownDestination(t *testing.T, c *cliRun) {
	r := c.deliver("nowhere", "cli-x", ticket("cli-x", "s"), "--destinations", c.destsFile)
	require.Equal(t, cli.CodeUsage, r.code)
	require.Contains(t, r.stderr, `unknown destination "nowhere": `+c.destsFile+" defines crm, helpdesk, helpdesk-once, ignoring, ledger, legacy")
	require.Empty(t, r.stdout)

	// Without the file the workers are the judge: rejected, nothing sent.
	w := c.deliver("nowhere", "cli-x", ticket("cli-x", "s"))
	require.Equal(t, cli.CodeRejected, w.code, w.stderr)
	require.Contains(t, w.stderr, `destination "nowhere" is not configured on the workers`)

	l := c.courier("list", "--destination", "nowhere", "--destinations", c.destsFile)
	require.Equal(t, cli.CodeUsage, l.code)
	require.Contains(t, l.stderr, `unknown destination "nowhere"`)

	p := c.courier("probe", "nowhere", "--destinations", c.destsFile)
	require.Equal(t, cli.CodeUsage, p.code)
	require.Contains(t, p.stderr, `unknown destination "nowhere": `+c.destsFile+" defines crm, helpdesk")

	missing := c.deliver("helpdesk", "cli-x", ticket("cli-x", "s"), "--destinations", "/nonexistent/destinations.json")
	require.Equal(t, cli.CodeUsage, missing.code)
	require.Contains(t, missing.stderr, "destinations file: open /nonexistent/destinations.json: no such file or directory")
}

func testMalformedJSON(t *testing.T, c *cliRun) {
	r := c.deliver("helpdesk", "cli-json", `{"subject": }`)
	require.Equal(t, cli.CodeUsage, r.code)
	require.Contains(t, r.stderr, "--payload: malformed JSON at line 1, column 13: invalid character '}' looking for beginning of value")

	file := filepath.Join(t.TempDir(), "payload.json")
	require.NoError(t, os.WriteFile(file, []byte("{\n  \"subject\": \"a\",\n  \"body\": 'single quotes'\n}\n"), 0o600))
	f := c.deliver("helpdesk", "cli-json", "@"+file)
	require.Equal(t, cli.CodeUsage, f.code)
	require.Contains(t, f.stderr, "--payload @"+file+": malformed JSON at line 3, column 11")

	arr := c.deliver("helpdesk", "cli-json", `["not", "an", "object"]`)
	require.Equal(t, cli.CodeUsage, arr.code)
	require.Contains(t, arr.stderr, "--payload: must be a JSON object")

	dupName := c.deliver("helpdesk", "cli-json", `{"subject": "a", "subject": "b"}`)
	require.Equal(t, cli.CodeUsage, dupName.code)
	require.Contains(t, dupName.stderr, `duplicate member name "subject"`)

	nofile := c.deliver("helpdesk", "cli-json", "@/nonexistent/payload.json")
	require.Equal(t, cli.CodeUsage, nofile.code)
	require.Contains(t, nofile.stderr, "--payload @/nonexistent/payload.json: open /nonexistent/payload.json: no such file or directory")
	require.Equal(t, 0, c.effects("helpdesk", "cli-json"))
}

// testIdentifiersNotPlain: an identifier with a control or bidirectional
// formatting character is a usage error, and nothing starts.
func testIdentifiersNotPlain(t *testing.T, c *cliRun) {
	id := "cli-\u202eexe.pdf"
	r := c.deliver("helpdesk", id, ticket(id, "s"))
	require.Equal(t, cli.CodeUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "business_id: bidirectional formatting character U+202E at offset 4: identifiers are plain text; remove it")
	require.Empty(t, r.stdout)
	require.Equal(t, cli.CodeUnknownKey, c.courier("status", keyOf("helpdesk", id)).code, "nothing started")

	tenant := c.courier("deliver", "--tenant", "acme\r\n", "--destination", "helpdesk", "--operation", "create-ticket",
		"--id", "cli-crlf", "--payload", ticket("cli-crlf", "s"))
	require.Equal(t, cli.CodeUsage, tenant.code, tenant.stderr)
	require.Contains(t, tenant.stderr, "tenant: control character U+000D at offset 4: identifiers are plain text; remove it")
	require.Equal(t, 0, c.effects("helpdesk", id)+c.effects("helpdesk", "cli-crlf"))
}

func testMissingFlags(t *testing.T, c *cliRun) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"deliver"}, "missing flags --destination, --operation, --id, --payload"},
		{[]string{"deliver", "--destination", "helpdesk", "--operation", "o", "--id", "x"}, "missing flag --payload"},
		{[]string{"review"}, "missing KEY: courier review KEY"},
		{[]string{"review", keyOf("legacy", "cli-review")}, "missing flags --decision, --reviewer, --note"},
		{[]string{"review", keyOf("legacy", "cli-review"), "--decision", "retry", "--note", "n"}, "missing flag --reviewer"},
		{[]string{"status"}, "missing KEY: courier status KEY"},
		{[]string{"probe"}, "missing DESTINATION"},
		{[]string{"probe", "helpdesk"}, "missing flag --destinations"},
		{[]string{"deliver", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"list", "--state", "waiting"}, `--state "waiting" unknown; use one of delivering, retry_wait, paused, circuit_open, awaiting_review, created`},
	} {
		r := c.courier(tc.args...)
		require.Equal(t, cli.CodeUsage, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
		require.Empty(t, r.stdout, "%v", tc.args)
	}
}

func testKeys(t *testing.T, c *cliRun) {
	unknown := uuid.NewString()
	s := c.courier("status", unknown)
	require.Equal(t, cli.CodeUnknownKey, s.code, s.stderr)
	require.Contains(t, s.stderr, "no delivery with this key: "+unknown)

	r := c.courier("review", unknown, "--decision", "abandon", "--reviewer", "alice", "--note", "n")
	require.Equal(t, cli.CodeUnknownKey, r.code, r.stderr)
	require.Contains(t, r.stderr, "no delivery with this key: "+unknown)

	bad := c.courier("status", "ticket-1")
	require.Equal(t, cli.CodeUsage, bad.code)
	require.Contains(t, bad.stderr, `"ticket-1" is not a delivery key`)
}

func testUnreachable(t *testing.T, c *cliRun) {
	addr := closedPort(t)
	key := keyOf("helpdesk", "cli-001")
	for _, args := range [][]string{
		{"deliver", "--destination", "helpdesk", "--operation", "o", "--id", "cli-down", "--payload", `{"subject": "s"}`},
		{"status", key},
		{"review", key, "--decision", "retry", "--reviewer", "alice", "--note", "n"},
		{"list", "--state", "awaiting_review"},
	} {
		r := c.run([]string{"TEMPORAL_ADDRESS=" + addr}, args...)
		require.Equal(t, cli.CodeError, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "cannot reach Temporal at "+addr, "%v", args)
		require.Contains(t, r.stderr, "courier-lab dev", "%v", args)
		require.Empty(t, r.stdout)
	}
}

func testProbe(t *testing.T, c *cliRun) {
	honours := c.courier("probe", "helpdesk", "--destinations", c.destsFile)
	require.Equal(t, cli.CodeOK, honours.code, honours.stdout+honours.stderr)
	require.Contains(t, honours.stdout, "verdict      passed")
	require.Contains(t, honours.stdout, "replays: the second send with the same key returned the first receipt")

	// The seed's "ignored" case: found before production, not after.
	ignoring := c.courier("probe", "ignoring", "--destinations", c.destsFile, "--json")
	require.Equal(t, cli.CodeViolation, ignoring.code, ignoring.stderr)
	var rep probe.Report
	require.NoError(t, json.Unmarshal([]byte(ignoring.stdout), &rep))
	require.Equal(t, probe.Violation, rep.Verdict)
	require.Contains(t, rep.Finding, "CONTRACT VIOLATION: the destination ignores the key")
	require.Len(t, rep.Effects, 2)
	require.Equal(t, 2, c.effects("ignoring", rep.BusinessID))
	require.Contains(t, ignoring.stderr, `destination "ignoring" breaks its contract (dedup key)`)

	none := c.courier("probe", "legacy", "--destinations", c.destsFile)
	require.Equal(t, cli.CodeOK, none.code, none.stderr)
	require.Contains(t, none.stdout, "not sent twice")

	lookup := c.courier("probe", "crm", "--destinations", c.destsFile)
	require.Equal(t, cli.CodeOK, lookup.code, lookup.stderr)
	require.Contains(t, lookup.stdout, "lookup works")
	require.Regexp(t, `settle       declared \S+; appeared to the lookup \S+ after the send was answered`, lookup.stdout)

	rejected := c.courier("probe", "helpdesk", "--destinations", c.destsFile, "--payload", `{"title": "no subject"}`)
	require.Equal(t, cli.CodeRejected, rejected.code, rejected.stderr)
	require.Contains(t, rejected.stdout, "refused the probe payload (HTTP 422")

	// No Temporal needed: the probe talks to the destination directly.
	offline := c.run([]string{"TEMPORAL_ADDRESS=" + closedPort(t)}, "probe", "ledger", "--destinations", c.destsFile)
	require.Equal(t, cli.CodeOK, offline.code, offline.stderr)
}

// testDestinationRefused: a pause or resume by a name the reviewers do not
// list, and a resume with nothing to resume, are refused with their reason
// and change nothing.
func testDestinationRefused(t *testing.T, c *cliRun) {
	mallory := c.courier("destination", "pause", "helpdesk", "--reason", "mine now", "--by", "mallory")
	require.Equal(t, cli.CodeRefused, mallory.code, mallory.stderr)
	require.Contains(t, mallory.stderr, `destination helpdesk: by: "mallory" may not pause destinations; allowed: alice, bob`)
	resume := c.courier("destination", "resume", "helpdesk", "--by", "alice")
	require.Equal(t, cli.CodeRefused, resume.code, resume.stderr)
	require.Contains(t, resume.stderr, "destination helpdesk is not paused and its breaker is closed")
	st := c.courier("destination", "status", "helpdesk", "--json")
	require.Equal(t, cli.CodeOK, st.code, st.stderr)
	var gates []gateclient.Status
	require.NoError(t, json.Unmarshal([]byte(st.stdout), &gates))
	require.Len(t, gates, 1)
	require.Equal(t, gate.Closed, gates[0].State, "a refused pause changes nothing")
	require.Nil(t, gates[0].Paused)
}

func testHelp(t *testing.T, c *cliRun) {
	// Each command's help lists the exit statuses it can end with.
	for name, code := range map[string]int{
		"deliver": cli.CodeAwaiting, "review": cli.CodeRefused, "status": cli.CodeUnknownKey, "list": cli.CodeUsage, "probe": cli.CodeViolation,
	} {
		r := c.courier(name, "-h")
		require.Equal(t, cli.CodeOK, r.code, name)
		require.Contains(t, r.stderr, "usage: courier "+name, name)
		require.Contains(t, r.stderr, fmt.Sprintf("%d  %s", code, cli.ExitStatuses[code]), name)
	}
	require.Contains(t, c.courier("deliver", "-h").stderr, fmt.Sprintf("%d  awaiting review", cli.CodeAwaiting))
}
