package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchpb "go.temporal.io/api/batch/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// bulkLab is a lab stack (dev server, sandbox, one `courier worker`
// process) and the courier binary the test runs against it.
type bulkLab struct {
	t       *testing.T
	ctx     context.Context
	courier string
	st      *lab.Stack
}

// startLab starts a lab stack with one `courier worker` process over the
// lab's destinations, changed by edit, and builds the courier binary the
// test runs against it; the stack stops when the test ends. Attempts are
// long enough (OutageBudget) that a loaded machine still reaches the
// sandbox: a first attempt meets only the fault a test staged.
func startLab(t *testing.T, timeout time.Duration, edit func(*destinations.Config)) *bulkLab {
	t.Helper()
	ctx, courier := lab.RealTest(t, timeout)
	st, err := lab.Start(ctx, lab.Options{
		Courier: courier, Workers: 1, WorkerArgs: []string{"--log-level", "error"},
		Destinations: func(url, dir string) (destinations.Config, error) {
			cfg := lab.Destinations(url, filepath.Join(dir, lab.LedgerDB), lab.OutageBudget)
			edit(&cfg)
			return cfg, nil
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return &bulkLab{t: t, ctx: ctx, courier: courier, st: st}
}

func (b *bulkLab) run(args ...string) result {
	b.t.Helper()
	return b.runWith(nil, args...)
}

// runWith runs courier with env added to the stack's (a later entry wins).
func (b *bulkLab) runWith(env []string, args ...string) result {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.courier, args...)
	cmd.Env = append(b.st.Temporal.Env(os.Environ()), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(b.t, err)
	}
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}

// retryAll is the operator's command of the brief, with more flags.
func retryAll(more ...string) []string {
	return append([]string{"review", "--all", "--decision", "retry", "--reviewer", "ops", "--note", "outage over"}, more...)
}

// park delivers n operations to legacy, whose service commits each and
// hangs up, so each stops for review; it returns their keys by business id.
func (b *bulkLab) park(operation string, n int) map[string]string {
	b.t.Helper()
	svc := lab.SandboxService(b.st.Config.Destinations[lab.DestLegacy])
	require.NoError(b.t, b.st.Sandbox.Inject(svc, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit, Count: n}))
	keys := make(map[string]string, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		id := fmt.Sprintf("%s-%03d", operation, i)
		op := opkey.Operation{Tenant: "acme", Destination: lab.DestLegacy, Operation: operation, BusinessID: id}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			h, err := b.st.Starter.Start(b.ctx, workflows.DeliveryInput{Operation: op, Payload: lab.Ticket(id, "Call back the customer")})
			require.NoError(b.t, err)
			mu.Lock()
			keys[id] = h.Key
			mu.Unlock()
		})
	}
	wg.Wait()
	b.awaitCount(fmt.Sprintf("CourierOperation = %q AND CourierState = %q", operation, workflows.StateAwaitingReview), n)
	return keys
}

// awaitCount waits until the visibility store counts n deliveries for query.
func (b *bulkLab) awaitCount(query string, n int) {
	b.t.Helper()
	var last int64
	require.Eventually(b.t, func() bool {
		resp, err := b.st.Temporal.Client().CountWorkflow(b.ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		require.NoError(b.t, err)
		last = resp.GetCount()
		return last == int64(n)
	}, 3*time.Minute, 250*time.Millisecond, "%s: %d, want %d", query, last, n)
}

// effects counts the tickets legacy stored per business id, and the id of
// the last one.
func (b *bulkLab) effects() (map[string]int, map[string]string) {
	b.t.Helper()
	all, err := b.st.Effects.All(b.ctx)
	require.NoError(b.t, err)
	n, last := map[string]int{}, map[string]string{}
	for id, es := range all {
		for _, e := range es {
			if e.Dest == lab.DestLegacy {
				n[id]++
				last[id] = e.ID
			}
		}
	}
	return n, last
}

// records are the review records of batch job job a delivery holds.
func (b *bulkLab) records(key, job string) (workflows.DeliveryStatus, []workflows.ReviewRecord) {
	b.t.Helper()
	st, err := b.st.Starter.Status(b.ctx, key)
	require.NoError(b.t, err)
	var recs []workflows.ReviewRecord
	if st.Review != nil {
		for _, r := range st.Review.Decisions {
			if r.BatchJob == job {
				recs = append(recs, r)
			}
		}
	}
	return st, recs
}

func batchJobs(t *testing.T, b *bulkLab) int {
	t.Helper()
	resp, err := b.st.Temporal.Client().WorkflowService().ListBatchOperations(b.ctx,
		&workflowservice.ListBatchOperationsRequest{Namespace: b.st.Temporal.Namespace})
	require.NoError(t, err)
	return len(resp.GetOperationInfo())
}

func bulkReport(t *testing.T, r result) starter.BulkReport {
	t.Helper()
	var rep starter.BulkReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	return rep
}

// TestReviewAll decides 200 parked deliveries with one `courier review
// --all` batch job, through the built binary against a real dev server and
// a real worker process, and counts each delivery's decision from its own
// status and each effect from the destination's store.
func TestReviewAll(t *testing.T) {
	b := startLab(t, 15*time.Minute, func(cfg *destinations.Config) { cfg.Reviewers = destinations.Plain("ops", "bob") })
	ctx, st := b.ctx, b.st

	const n = 200
	keys := b.park("bulk", n)
	svc := lab.SandboxService(st.Config.Destinations[lab.DestLegacy])
	require.Len(t, st.Sandbox.Requests(svc), n, "one request per delivery, each hung up after its commit")
	before, _ := b.effects()
	for id := range keys {
		require.Equal(t, 1, before[id], "%s: the lost response's ticket", id)
	}

	t.Run("dry run sends nothing", func(t *testing.T) {
		b.t = t
		r := b.run(retryAll("--destination", "legacy", "--dry-run")...)
		require.Equal(t, cli.CodeOK, r.code, r.stderr)
		require.Contains(t, r.stderr, fmt.Sprintf("%d deliveries awaiting review match", n))
		require.Contains(t, r.stderr, `CourierDestination = "legacy"`)
		require.Contains(t, r.stderr, "dry run: nothing was sent")
		require.Contains(t, r.stderr, "... and 195 more")
		var p starter.BulkPreview
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &p), r.stdout)
		require.Equal(t, n, p.Matched)
		require.Len(t, p.Keys, n)
		require.Len(t, p.Sample, 5)
		for _, m := range p.Sample {
			require.Contains(t, m.Summary, "bulk → legacy · bulk-")
			require.Contains(t, m.Evidence, `destination "legacy" (dedup none) cannot deduplicate a retry`)
		}
	})
	t.Run("no --yes sends nothing", func(t *testing.T) {
		b.t = t
		r := b.run(retryAll("--destination", "legacy")...)
		require.Equal(t, cli.CodeUsage, r.code, r.stderr)
		require.Contains(t, r.stderr, fmt.Sprintf("nothing was sent: add --yes to send decision retry by ops (\"outage over\") as one batch job signalling review to these %d deliveries", n))
		require.Empty(t, r.stdout)
	})
	t.Run("filters read from the status", func(t *testing.T) {
		b.t = t
		for _, tc := range []struct {
			args []string
			want int
		}{
			{[]string{"--tenant", "other"}, 0},
			{[]string{"--tenant", "acme", "--operation", "bulk"}, n},
			{[]string{"--parked-before", "2000-01-01T00:00:00Z"}, 0},
			{[]string{"--parked-before", time.Now().Add(time.Minute).UTC().Format(time.RFC3339)}, n},
			{[]string{"--query", `CourierBusinessID = "bulk-007"`}, 1},
		} {
			r := b.run(retryAll(append(tc.args, "--destination", "legacy", "--dry-run")...)...)
			require.Equal(t, cli.CodeOK, r.code, "%v: %s", tc.args, r.stderr)
			var p starter.BulkPreview
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &p), r.stdout)
			require.Equal(t, tc.want, p.Matched, "%v", tc.args)
		}
	})
	t.Run("refused before anything is sent", func(t *testing.T) {
		b.t = t
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"review", "--all", "--destination", "legacy", "--decision", "delivered", "--reviewer", "ops", "--note", "n", "--yes"},
				"--decision delivered with --all needs --resource-ids FILE"},
			{retryAll(keys["bulk-000"]), "--all decides the deliveries the filters select: give no KEY"},
			{[]string{"review", keys["bulk-000"], "--decision", "retry", "--reviewer", "ops", "--note", "n", "--destination", "legacy"},
				"--destination selects or paces deliveries for --all"},
			{retryAll("--yes", "--dry-run"), "give one of them"},
			{retryAll("--rps", "0", "--yes"), "--rps must be positive"},
			{retryAll("--parked-before", "yesterday", "--yes"), `--parked-before "yesterday": give an RFC 3339 time`},
			{retryAll("--query", `CourierState = "created") OR (CourierState = "created"`, "--yes"), "query: a ')' closes more than the query opened"},
			{retryAll("--resource-ids", "ids.csv", "--yes"), "--resource-ids goes with --decision delivered, not retry"},
			{retryAll("--query", "NoSuchAttribute = 1", "--yes"), "query: Temporal refused"},
			{[]string{"review", "--all", "--decision", "retry", "--reviewer", "ops", "--yes"}, "missing flag --note"},
		} {
			r := b.run(tc.args...)
			require.Equal(t, cli.CodeUsage, r.code, "%v: %s", tc.args, r.stderr)
			require.Contains(t, r.stderr, tc.want, "%v", tc.args)
			require.Empty(t, r.stdout, "%v", tc.args)
		}
		require.Zero(t, batchJobs(t, b), "no batch job was started")
		for _, key := range keys {
			st, recs := b.records(key, "")
			require.Equal(t, workflows.StateAwaitingReview, st.State)
			require.Empty(t, recs)
			require.Empty(t, st.Review.Decisions, "nothing reached %s", key)
		}
	})

	var job string
	t.Run("one batch job decides all 200", func(t *testing.T) {
		b.t = t
		r := b.run(retryAll("--destination", "legacy", "--yes")...)
		require.Equal(t, cli.CodeOK, r.code, r.stderr)
		rep := bulkReport(t, r)
		job = rep.JobID
		require.Equal(t, "batch signal", rep.Via)
		require.Contains(t, rep.Query, `CourierState = "awaiting_review"`)
		require.Equal(t, n, rep.Matched)
		require.Equal(t, n, rep.Sent)
		require.Zero(t, rep.Failed)
		require.Equal(t, n, rep.Accepted)
		require.Zero(t, rep.Ignored)
		require.Zero(t, rep.Unaccounted)
		require.Contains(t, r.stderr, fmt.Sprintf("%d accepted, 0 ignored", n))
		require.Positive(t, rep.SentPerSecond)
		t.Logf("courier %s\n%s", strings.Join(retryAll("--destination", "legacy", "--yes"), " "), r.stderr)
		require.Equal(t, 1, batchJobs(t, b), "one batch job")

		// Counted here from each delivery's own status, not the report.
		b.awaitCount(`CourierOperation = "bulk" AND CourierState = "created"`, n)
		accepted := 0
		for _, key := range keys {
			st, recs := b.records(key, job)
			require.Equal(t, workflows.State(workflows.StatusCreated), st.State)
			require.Len(t, st.Attempts, 2, "%s: the lost one and the retry", key)
			require.Len(t, recs, 1, key)
			require.True(t, recs[0].Accepted)
			require.Equal(t, "ops", recs[0].Reviewer)
			require.Equal(t, "outage over", recs[0].Note)
			require.Equal(t, "signal", recs[0].Via)
			accepted++
			found := false
			for _, e := range st.Events {
				found = found || (e.Event == "review_decision" && strings.Contains(e.Detail, "(batch job "+job+")"))
			}
			require.True(t, found, "%s: its events name the batch job", key)
		}
		require.Equal(t, n, accepted)
		// Each retried delivery holds its lost response's ticket and its
		// retry's: two, never a third.
		after, _ := b.effects()
		for id := range keys {
			require.Equal(t, 2, after[id], id)
		}
	})

	t.Run("a repeated job decides once", func(t *testing.T) {
		b.t = t
		// The retries lose their responses too, so these park again.
		const m = 5
		require.NoError(t, st.Sandbox.Inject(svc, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit, Count: m}))
		again := b.park("repark", m)
		// By tenant: the job names the executions the statuses chose.
		r := b.run(retryAll("--tenant", "acme", "--operation", "repark", "--yes")...)
		require.Equal(t, cli.CodeOK, r.code, r.stderr)
		rep := bulkReport(t, r)
		require.Empty(t, rep.Query)
		require.Equal(t, m, rep.Accepted)
		b.awaitCount(`CourierOperation = "repark" AND CourierState = "awaiting_review"`, m)
		for _, key := range again {
			require.Eventually(t, func() bool {
				st, _ := b.records(key, rep.JobID)
				return st.State == workflows.StateAwaitingReview && len(st.Attempts) == 2
			}, time.Minute, 100*time.Millisecond, "%s parks again after the retry", key)
			// What a batch job's retried activity does: the same signal again.
			d := workflows.ReviewDecision{Decision: "retry", Reviewer: "ops", Note: "outage over", BatchJob: rep.JobID}
			require.NoError(t, st.Temporal.Client().SignalWorkflow(ctx, workflows.WorkflowID(key), "", workflows.SignalReview, d))
			status, recs := b.records(key, rep.JobID)
			require.Equal(t, workflows.StateAwaitingReview, status.State, "%s: the repeat did not retry", key)
			require.Len(t, status.Attempts, 2)
			require.Len(t, recs, 1)
			require.Equal(t, 1, recs[0].Repeats)
			require.Zero(t, status.Review.Ignored, "a repeat is not an ignored decision")
		}
		count, err := st.Starter.CountBatchJob(ctx, rep.JobID, slices.Collect(maps.Values(again)))
		require.NoError(t, err)
		require.Equal(t, starter.BulkCount{Accepted: m, Repeats: m, IgnoredDeliveries: []starter.BulkIgnored{}}, count)
		effects, tickets := b.effects()
		for id := range again {
			require.Equal(t, 2, effects[id], id)
		}

		// Delivered needs each one's resource id; a bad file is refused
		// with its line, and sends nothing.
		dir := t.TempDir()
		write := func(name string, lines ...string) string {
			p := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
			return p
		}
		var good []string
		for id, key := range again {
			good = append(good, key+","+tickets[id])
		}
		k0 := again["repark-000"]
		delivered := func(file string) []string {
			return []string{"review", "--all", "--operation", "repark", "--decision", "delivered", "--resource-ids", file,
				"--reviewer", "ops", "--note", "found them", "--yes"}
		}
		for _, tc := range []struct {
			file, want string
		}{
			{write("short.csv", "# found", k0), `line 2: "` + k0 + `" is not key,resource-id`},
			{write("badkey.csv", "ticket-1,ticket-1"), `line 1: "ticket-1" is not a delivery key`},
			{write("dup.csv", good[0], good[0]), "line 2: key " + strings.Split(good[0], ",")[0] + " is on line 1 already"},
			{write("empty.csv", k0+", "), "line 1: resource id: empty"},
			{write("unknown.csv", good[0], "6ba7b810-9dad-51d1-80b4-00c04fd430c8,t"), "line 2: no delivery has key 6ba7b810-9dad-51d1-80b4-00c04fd430c8"},
			{write("unmatched.csv", keys["bulk-001"]+",t"), "line 1: delivery " + keys["bulk-001"] + " (bulk → legacy · bulk-001 (acme), state created) is not among the 5 deliveries the filter matched"},
		} {
			r := b.run(delivered(tc.file)...)
			require.Equal(t, cli.CodeUsage, r.code, "%s: %s", tc.file, r.stderr)
			require.Contains(t, r.stderr, tc.want, tc.file)
			require.Empty(t, r.stdout)
		}
		for _, key := range again {
			status, _ := b.records(key, "")
			require.Equal(t, workflows.StateAwaitingReview, status.State, "a refused file sends nothing")
		}

		r = b.run(delivered(write("good.csv", good...))...)
		require.Equal(t, cli.CodeOK, r.code, r.stderr)
		rep = bulkReport(t, r)
		require.Equal(t, "updates", rep.Via)
		require.Equal(t, m, rep.Sent)
		require.Equal(t, m, rep.Accepted)
		for id, key := range again {
			status, recs := b.records(key, rep.JobID)
			require.Equal(t, workflows.State(workflows.StatusDeliveredByReview), status.State)
			require.Equal(t, tickets[id], status.Receipt.ResourceID)
			require.Len(t, recs, 1)
			require.Equal(t, "update", recs[0].Via)
		}
		after, _ := b.effects()
		for id := range again {
			require.Equal(t, 2, after[id], id)
		}
	})

	t.Run("decided in between", func(t *testing.T) {
		b.t = t
		race := b.park("race", 6)
		_, tickets := b.effects()
		abandon := func(id string) {
			_, err := st.Starter.Review(ctx, race[id], workflows.ReviewDecision{Decision: "abandon", Reviewer: "bob", Note: "by hand"})
			require.NoError(t, err)
			// Decided, then recorded in the outcome ledger, then ended:
			// "decided since" here means ended.
			s, err := st.Starter.Wait(ctx, race[id])
			require.NoError(t, err)
			require.Equal(t, workflows.StatusAbandoned, s.Status)
		}
		first3 := `CourierBusinessID IN ("race-000", "race-001", "race-002")`
		// The deliveries themselves check the reviewer: each records the
		// batch job's decision as ignored, and says why.
		r := b.run("review", "--all", "--operation", "race", "--query", first3, "--decision", "retry",
			"--reviewer", "mallory", "--note", "n", "--yes")
		require.Equal(t, cli.CodeRefused, r.code, r.stderr)
		rep := bulkReport(t, r)
		require.Equal(t, 3, rep.Ignored)
		require.Zero(t, rep.Accepted)
		for _, ig := range rep.IgnoredDeliveries {
			require.Contains(t, ig.Reason, `reviewer: "mallory" may not review deliveries; allowed: ops, bob`)
			require.Contains(t, r.stderr, "ignored by "+ig.Key+": reviewer:")
		}
		require.Contains(t, r.stderr, "3 deliveries ignored the decision")

		// One decided and finished since the preview holds no record of
		// the job: the report names it.
		p, err := st.Starter.PreviewBulk(ctx, starter.BulkFilter{Tenant: "acme", Operation: "race", Query: first3}, 0)
		require.NoError(t, err)
		require.Equal(t, 3, p.Matched)
		abandon("race-000")
		rep, err = st.Starter.ReviewBulk(ctx, p, starter.BulkDecision{Decision: "retry", Reviewer: "ops", Note: "outage over"})
		require.NoError(t, err)
		require.Equal(t, 2, rep.Accepted)
		require.Zero(t, rep.Ignored)
		require.Equal(t, []string{race["race-000"]}, rep.UnaccountedKeys)

		// An update to one decided since is refused, and says why.
		p, err = st.Starter.PreviewBulk(ctx, starter.BulkFilter{Operation: "race",
			Query: `CourierBusinessID IN ("race-003", "race-004", "race-005")`}, 0)
		require.NoError(t, err)
		require.Equal(t, 3, p.Matched)
		abandon("race-003")
		ids := map[string]string{}
		for _, id := range []string{"race-003", "race-004", "race-005"} {
			ids[race[id]] = tickets[id]
		}
		rep, err = st.Starter.ReviewBulk(ctx, p, starter.BulkDecision{Decision: "delivered", Reviewer: "ops", Note: "found them", ResourceIDs: ids})
		require.NoError(t, err)
		require.Equal(t, 2, rep.Sent)
		require.Equal(t, 1, rep.Failed)
		require.Equal(t, 2, rep.Accepted)
		require.Equal(t, 1, rep.Ignored)
		require.Zero(t, rep.Unaccounted)
		require.Equal(t, race["race-003"], rep.IgnoredDeliveries[0].Key)
		require.Contains(t, rep.IgnoredDeliveries[0].Reason, "is not awaiting review (state abandoned)")
	})

	t.Run("beside another batch job", func(t *testing.T) {
		b.t = t
		queued := b.park("queued", 2)
		// Another batch job runs, as a destination's gate releasing its
		// held deliveries would: the dev server runs several at once, as
		// compose's server does. This one signals the finished deliveries,
		// five times over, which keeps the batcher busy for a while and
		// reaches none.
		other := &workflowservice.StartBatchOperationRequest{
			Namespace: st.Temporal.Namespace, JobId: "other-job", Reason: "another job",
			Operation: &workflowservice.StartBatchOperationRequest_SignalOperation{
				SignalOperation: &batchpb.BatchOperationSignal{Signal: "unrelated"}},
		}
		for range 5 {
			for _, key := range keys {
				other.Executions = append(other.Executions, &commonpb.WorkflowExecution{WorkflowId: workflows.WorkflowID(key)})
			}
		}
		svc := st.Temporal.Client().WorkflowService()
		_, err := svc.StartBatchOperation(ctx, other)
		require.NoError(t, err)
		describe := func(job string) *workflowservice.DescribeBatchOperationResponse {
			d, err := svc.DescribeBatchOperation(ctx, &workflowservice.DescribeBatchOperationRequest{Namespace: st.Temporal.Namespace, JobId: job})
			require.NoError(t, err)
			return d
		}
		r := b.run(retryAll("--operation", "queued", "--yes")...)
		require.Equal(t, cli.CodeOK, r.code, r.stderr)
		rep := bulkReport(t, r)
		require.Equal(t, len(queued), rep.Accepted)
		require.Equal(t, enumspb.BATCH_OPERATION_STATE_RUNNING, describe("other-job").GetState(), "the jobs ran side by side")
		_, err = svc.StopBatchOperation(ctx, &workflowservice.StopBatchOperationRequest{
			Namespace: st.Temporal.Namespace, JobId: "other-job", Reason: "test over"})
		require.NoError(t, err)
	})
}
