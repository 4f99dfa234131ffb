package testsuite

// The bad-input matrix: every kind of bad input, where it is stopped, and the
// error that says so. Each row also checks that nothing was sent twice (the
// destination's own store and request log) and that no delivery is lost or
// ended by bad input. Rows already covered elsewhere are named, not repeated.
//
//	row                                         where it is stopped                        test
//	payload not JSON, trailing data             starter, before anything is sent           TestBadStarts
//	payload not an object (string, array,       starter; and the workflow when started     TestBadStarts
//	  null), duplicate member, lone surrogate     by hand (rejected, no attempt)
//	payload over 256 KiB                        starter; workflow by hand                  TestBadStarts
//	field over 255 bytes, field missing         starter; workflow by hand                  TestBadStarts
//	identifier with a control or bidirectional  starter, CLI; workflow by hand (rejected,  TestRealPlainIdentifiers;
//	  formatting character                        no attempt)                                test env: TestIdentifiers
//	a value that makes a URL path segment       the attempt, which sends nothing           TestRealPlainIdentifiers
//	  . or ..                                     (rejected)
//	unknown destination                         the worker, at the first attempt, which    TestBadStarts
//	                                              sends nothing (the starter cannot know
//	                                              the workers' config)
//	workflow input that is not a delivery       the workflow fails (it cannot decode its   TestBadStarts
//	                                              input), no attempt
//	hand-made workflow ID                       workflow, before any attempt               TestHandMadeWorkflowID
//	destinations file: unbounded retries,       destinations.Load, before the worker starts    TestBadDestinationsFiles
//	  no deadline, unknown field, unknown dedup   (more variants: destinations.TestParseBad)
//	destinations file: missing secret (env,     worker.OpenAdapters, before any task       TestBadDestinationsFiles
//	  file, empty file), SQL table without key
//	review: unknown decision, delivered         real update: refused, nothing recorded;    TestBadReviews; test env:
//	  without resource_id, empty reviewer,        real signal: recorded and ignored,         TestUpdateValidator,
//	  not a decision at all (signal)              the delivery still waits                   TestInvalidSignalsAreIgnored
//	review by a reviewer not allowed            update refused, signal ignored             TestReviewerAllowList
//	review for a closed delivery                signal: refused by the server;             TestBadReviews;
//	                                              update: NotAwaitingReviewError             starter TestReviewErrors
//	the same review signal twice                acts once                                  TestBadReviews; test env:
//	                                                                                         TestDuplicateSignal

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// TestBadStarts: each bad request is refused by the starter before anything
// is sent, and the same input started by hand (another SDK, the temporal
// CLI) is rejected by the workflow before any attempt. A refusal consumes
// nothing: the same operation delivers afterwards with a good payload.
func TestBadStarts(t *testing.T) {
	ctx, rl, env := realTest(t, 3*time.Minute)
	rl.withWorker(t, env)
	st := starter.New(rl.Temporal.Client())

	long := strings.Repeat("x", opkey.MaxFieldBytes+1)
	withPayload := func(p string) func(in *workflows.DeliveryInput) {
		return func(in *workflows.DeliveryInput) { in.Payload = json.RawMessage(p) }
	}
	rows := []struct {
		name   string
		change func(in *workflows.DeliveryInput)
		want   string
		// starts: the starter cannot tell, so the workflow decides.
		starts bool
		// byHand: the input survives the Go SDK's JSON encoding, so another
		// client can send it straight to the workflow.
		byHand bool
	}{
		{name: "payload not JSON", change: withPayload(`{"subject": }`), want: "payload: invalid JSON at offset 12"},
		{name: "payload with trailing data", change: withPayload(`{"subject": "a"} {}`), want: "payload: trailing data at offset"},
		{name: "payload a string", change: withPayload(`"call me"`), want: "payload: must be a JSON object", byHand: true},
		{name: "payload an array", change: withPayload(`[{"subject": "a"}]`), want: "payload: must be a JSON object", byHand: true},
		{name: "payload null", change: withPayload(`null`), want: "payload: must be a JSON object", byHand: true},
		{name: "payload with a duplicate member", change: withPayload(`{"subject": "a", "subject": "b"}`),
			want: `payload: duplicate member name "subject"`, byHand: true},
		{name: "payload with a lone surrogate", change: withPayload(`{"subject": "\ud800"}`),
			want: `is a lone UTF-16 surrogate`, byHand: true},
		{name: "payload over the limit", change: func(in *workflows.DeliveryInput) {
			in.Payload = lab.Ticket(in.BusinessID, strings.Repeat("y", opkey.MaxPayloadBytes))
		}, want: fmt.Sprintf("bytes, the limit is %d", opkey.MaxPayloadBytes), byHand: true},
		{name: "business_id over 255 bytes", change: func(in *workflows.DeliveryInput) { in.BusinessID += long },
			want: "business_id: ", byHand: true},
		{name: "tenant over 255 bytes", change: func(in *workflows.DeliveryInput) { in.Tenant = long },
			want: "tenant: 256 bytes, the limit is 255", byHand: true},
		{name: "operation over 255 bytes", change: func(in *workflows.DeliveryInput) { in.Operation.Operation = long },
			want: "operation: 256 bytes, the limit is 255", byHand: true},
		{name: "destination over 255 bytes", change: func(in *workflows.DeliveryInput) { in.Destination = long },
			want: "destination: 256 bytes, the limit is 255", byHand: true},
		{name: "business_id missing", change: func(in *workflows.DeliveryInput) { in.BusinessID = "" },
			want: "business_id: required", byHand: true},
		{name: "unknown destination", change: func(in *workflows.DeliveryInput) { in.Destination = "nowhere" },
			want: `destination "nowhere" is not configured on the workers`, starts: true, byHand: true},
	}
	sentBefore := len(env.Sandbox.Requests("helpdesk"))
	followUps := 0 // good deliveries after a refusal or rejection, one request each
	for i, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			id := fmt.Sprintf("bad-start-%d-%s", i, rl.RunID)
			in := lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, "Move the workshop booking"))
			row.change(&in)

			_, err := st.Start(ctx, in)
			if row.starts {
				require.NoError(t, err)
				res := waitResult(ctx, t, rl.Temporal.Client(), in)
				requireRejected(t, res, row.want)
			} else {
				var invalid *starter.InvalidRequestError
				require.ErrorAs(t, err, &invalid)
				require.ErrorContains(t, err, row.want)
				_, err = rl.Temporal.Client().DescribeWorkflowExecution(ctx, workflows.WorkflowID(opkey.Key(in.Operation)), "")
				var nf *serviceerror.NotFound
				require.ErrorAs(t, err, &nf, "a refused request must start nothing")
			}

			if row.byHand {
				hand := in
				hand.BusinessID = strings.Replace(in.BusinessID, "bad-start-", "bad-hand-", 1)
				if in.BusinessID == "" {
					hand.BusinessID = ""
					hand.Tenant = "by-hand" // its own operation, so its own workflow ID
				}
				run, err := rl.Temporal.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{
					ID: workflows.WorkflowID(opkey.Key(hand.Operation)), TaskQueue: workflows.TaskQueue,
				}, workflows.WorkflowType, hand)
				require.NoError(t, err)
				res, ok := workflows.UndeliveredResult(run.Get(ctx, nil))
				require.True(t, ok, "a rejected run fails with its result")
				requireRejected(t, res, row.want)

				// The rejection did not consume the operation: corrected, it
				// runs again through the starter.
				if hand.Operation.Validate() == nil && hand.Destination == lab.DestHelpdesk {
					fixed := hand
					fixed.Payload = lab.Ticket(hand.BusinessID, "Move the workshop booking")
					res, err := st.Deliver(ctx, fixed)
					require.NoError(t, err)
					require.Equal(t, workflows.StatusCreated, res.Status)
					followUps++
				}
			}

			// Refused, not consumed: the operation still delivers, once.
			if in.Operation.Validate() == nil && in.Destination == lab.DestHelpdesk {
				good := in
				good.Payload = lab.Ticket(id, "Move the workshop booking")
				res, err := st.Deliver(ctx, good)
				require.NoError(t, err)
				followUps++
				require.Equal(t, workflows.StatusCreated, res.Status)
				n, err := env.Effects(lab.DestHelpdesk, id)
				require.NoError(t, err)
				require.Equal(t, 1, n)
			}
		})
	}
	require.Len(t, env.Sandbox.Requests("helpdesk"), sentBefore+followUps,
		"the bad inputs must send nothing to the destination")

	// An input that is not a delivery at all (the CLI's --input '"hello"'):
	// the workflow cannot decode it and fails; it never attempts anything.
	run, err := rl.Temporal.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: "delivery-not-a-delivery-" + rl.RunID, TaskQueue: workflows.TaskQueue,
	}, workflows.WorkflowType, "hello")
	require.NoError(t, err)
	err = run.Get(ctx, nil)
	require.Error(t, err, "a workflow given a string for its input must not run")
	t.Logf("input that is not a delivery: %v", err)
	desc, err := rl.Temporal.Client().DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, desc.GetWorkflowExecutionInfo().GetStatus())
	require.Len(t, env.Sandbox.Requests("helpdesk"), sentBefore+followUps)
}

func waitResult(ctx context.Context, t *testing.T, c client.Client, in workflows.DeliveryInput) workflows.DeliveryResult {
	t.Helper()
	res, err := starter.New(c).Result(ctx, opkey.Key(in.Operation), "")
	require.NoError(t, err)
	return res
}

// requireRejected: the delivery ended rejected, saying why, before any
// attempt or at one that sent nothing (a destination the worker lacks).
func requireRejected(t *testing.T, res workflows.DeliveryResult, want string) {
	t.Helper()
	require.Equal(t, workflows.StatusRejected, res.Status)
	require.Contains(t, res.Error, want)
	for _, at := range res.Attempts {
		require.Equal(t, contract.ClassUnconfigured, at.Class, "rejected before anything was sent")
	}
}

// TestBadDestinationsFiles: each broken destinations file stops the worker
// before it takes a task, with an error naming the file, the destination
// and the field, through the worker's own path: destinations.Load, then
// worker.OpenAdapters.
func TestBadDestinationsFiles(t *testing.T) {
	dir := t.TempDir()
	retry := `"retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}`
	http := func(extra, contractBody string) string {
		return `{
  "destinations": {
    "helpdesk": {
      "adapter": "http", "url": "http://127.0.0.1:1/helpdesk/tickets",` + extra + `
      "contract": {` + contractBody + `}
    }
  }
}`
	}
	unkeyedLedger := filepath.Join(dir, "unkeyed.db")
	db, err := sql.Open("sqlite", unkeyedLedger)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE ledger_entries (key TEXT NOT NULL, fingerprint TEXT NOT NULL, tenant TEXT NOT NULL,
		destination TEXT NOT NULL, operation TEXT NOT NULL, business_id TEXT NOT NULL, payload TEXT NOT NULL,
		resource_id TEXT NOT NULL, created_at TEXT NOT NULL)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	emptySecret := filepath.Join(dir, "empty-token")
	require.NoError(t, os.WriteFile(emptySecret, []byte("\n"), 0o600))
	t.Setenv("COURIER_TEST_BADINPUT_UNSET", "")

	rows := []struct {
		name, file string
		load       string // the error from destinations.Load, or "" if it loads
		open       string // the error from worker.OpenAdapters
	}{
		{"unbounded retries", http("", `"dedup": "key", "retry": {"max_attempts": 0, "attempt_timeout": "1s", "deadline": "1m"}`),
			`destination "helpdesk" (line 3): contract.retry.max_attempts: must be between 1 and 100 (unbounded retries are not allowed)`, ""},
		{"no deadline", http("", `"dedup": "key", "retry": {"max_attempts": 3, "attempt_timeout": "1s"}`),
			`destination "helpdesk" (line 3): contract.retry.deadline: required, positive and at most`, ""},
		{"unknown field", http(`
      "retries": 3,`, `"dedup": "key", `+retry),
			`line 5: json: unknown field "retries"`, ""},
		{"unknown dedup kind", http("", `"dedup": "exactly-once", `+retry),
			`destination "helpdesk" (line 3): contract.dedup: unknown kind "exactly-once"; use one of key, unique-commit, lookup, none`, ""},
		{"missing secret in env", http(`
      "auth": {"header": "Authorization", "scheme": "Bearer", "secret_env": "COURIER_TEST_BADINPUT_UNSET"},`, `"dedup": "key", `+retry),
			"", `destination "helpdesk": auth: auth.secret_env: environment variable COURIER_TEST_BADINPUT_UNSET is not set`},
		{"missing secret file", http(`
      "auth": {"header": "Authorization", "secret_file": "`+filepath.Join(dir, "no-such-token")+`"},`, `"dedup": "key", `+retry),
			"", `destination "helpdesk": auth: auth.secret_file: open `},
		{"empty secret file", http(`
      "auth": {"header": "Authorization", "secret_file": "`+emptySecret+`"},`, `"dedup": "key", `+retry),
			"", `destination "helpdesk": auth: auth.secret_file: ` + emptySecret + ` is empty`},
		{"ledger table without a unique key", `{"destinations": {"ledger": {"adapter": "sql", "driver": "sqlite",
  "dsn": "` + unkeyedLedger + `", "table": "ledger_entries", "contract": {"dedup": "unique-commit", ` + retry + `}}}}`,
			"", `table ledger_entries has no UNIQUE constraint on column key: a retried delivery would store a second effect`},
	}
	for i, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("destinations-%d.json", i))
			require.NoError(t, os.WriteFile(path, []byte(row.file), 0o600))
			cfg, err := destinations.Load(path)
			if row.load != "" {
				require.ErrorContains(t, err, path+": ", "the error names the file")
				require.ErrorContains(t, err, row.load)
				return
			}
			require.NoError(t, err)
			ads, err := worker.OpenAdapters(cfg, nil)
			if err == nil {
				_ = ads.Close()
			}
			require.ErrorContains(t, err, row.open)
		})
	}
}

// TestBadReviews: invalid review decisions against a delivery parked on a
// real server. The update refuses each and records nothing; the signal
// records each and ignores it; the delivery keeps waiting. Then the same
// good signal twice acts once, and a review of the closed delivery is
// refused. The destination holds one effect throughout.
func TestBadReviews(t *testing.T) {
	ctx, rl, env := realTest(t, 2*time.Minute)
	rl.withWorker(t, env)
	st := starter.New(rl.Temporal.Client())

	id := "bad-review-" + rl.RunID
	in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Move the workshop booking"))
	require.NoError(t, env.Inject(lab.DestLegacy, closeAfterCommit(1)))
	h, err := st.Start(ctx, in)
	require.NoError(t, err)
	parked, err := st.Wait(ctx, h.Key)
	require.NoError(t, err)
	require.Equal(t, workflows.StateAwaitingReview, parked.State)
	wid := workflows.WorkflowID(h.Key)
	effects := func() int {
		n, err := env.Effects(lab.DestLegacy, id)
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 1, effects())

	bad := []struct {
		name     string
		decision any
		want     string
	}{
		{"unknown decision", workflows.ReviewDecision{Decision: "maybe", Reviewer: "ops"}, `decision: "maybe" unknown; use retry, delivered or abandon`},
		{"delivered without resource id", workflows.ReviewDecision{Decision: workflows.DecisionDelivered, Reviewer: "ops"},
			"resource_id: required with decision delivered"},
		{"empty reviewer", workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: " "}, "reviewer: required, who is deciding"},
		{"not a decision", "abandon it", "not a review decision"},
	}
	for _, b := range bad {
		if _, ok := b.decision.(workflows.ReviewDecision); !ok {
			continue // the update's typed argument cannot even carry it
		}
		// Straight to the workflow's validator, past the starter's own check.
		uh, err := rl.Temporal.Client().UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: wid, UpdateName: workflows.UpdateReview, Args: []any{b.decision},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = uh.Get(ctx, nil)
		}
		require.ErrorContains(t, err, b.want, "update %s", b.name)
	}
	for _, b := range bad {
		require.NoError(t, rl.Temporal.Client().SignalWorkflow(ctx, wid, "", workflows.SignalReview, b.decision), b.name)
	}
	var now workflows.DeliveryStatus
	require.Eventually(t, func() bool {
		now, err = st.Status(ctx, h.Key)
		return err == nil && now.Review != nil && len(now.Review.Decisions) == len(bad)
	}, 30*time.Second, 100*time.Millisecond, "the signals were not all recorded")
	require.Equal(t, workflows.StateAwaitingReview, now.State, "bad input must not end the delivery")
	for i, b := range bad {
		rec := now.Review.Decisions[i]
		require.False(t, rec.Accepted, b.name)
		require.Equal(t, "signal", rec.Via, "the refused updates left no record: %s", b.name)
		require.Contains(t, rec.Reason, b.want, b.name)
	}

	// The reviewer looked: the ticket is there. The same signal, twice.
	recs, err := env.Sandbox.Records("legacy")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	good := workflows.ReviewDecision{Decision: workflows.DecisionDelivered, Reviewer: "ops",
		Note: "found it", ResourceID: recs[0].TicketID}
	require.NoError(t, rl.Temporal.Client().SignalWorkflow(ctx, wid, "", workflows.SignalReview, good))
	second := rl.Temporal.Client().SignalWorkflow(ctx, wid, "", workflows.SignalReview, good)
	res := waitResult(ctx, t, rl.Temporal.Client(), in)
	require.Equal(t, workflows.StatusDeliveredByReview, res.Status)
	require.Equal(t, recs[0].TicketID, res.Receipt.ResourceID)
	accepted := 0
	for _, rec := range res.Review.Decisions {
		if rec.Accepted {
			accepted++
		}
	}
	require.Equal(t, 1, accepted, "the same decision twice acts once")
	if second == nil {
		// It reached the workflow before it closed: recorded, ignored.
		last := res.Review.Decisions[len(res.Review.Decisions)-1]
		require.False(t, last.Accepted)
		require.Contains(t, last.Reason, "not awaiting review")
	} else {
		requireClosed(t, second)
	}

	// A review for the closed delivery: the server refuses the signal; the
	// update is covered by the starter's TestReviewErrors.
	requireClosed(t, rl.Temporal.Client().SignalWorkflow(ctx, wid, "", workflows.SignalReview, good))
	require.Equal(t, 1, effects(), "one effect from start to end")
	require.Len(t, res.Attempts, 1, "no second attempt")
}

func requireClosed(t *testing.T, err error) {
	t.Helper()
	var nf *serviceerror.NotFound
	require.True(t, errors.As(err, &nf), "want the server's refusal for a closed workflow, got %v", err)
	require.ErrorContains(t, err, "workflow execution already completed")
}
