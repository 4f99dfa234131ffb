package workflows_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdktest "go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/wftest"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// The determinism guard. testdata/histories holds sets of histories, one
// per workflow version that changed what histories hold; each set has the
// history of every Delivery workflow each seed fault case ran on a real dev
// server, or (a gate set) of each destination gate scenario's Destination
// workflow, or (a trust set) of a few Delivery scenarios off the happy path. Record a new set (when the workflow changes) from the repository
// root with
//
//	go run ./lab/testsuite/record -set NAME [-gate | -trust | -verified]
//
// A change to the workflow that alters its command sequence must keep every
// set replaying, which means putting it behind workflow.GetVersion.

// historiesDir is wftest.HistoriesDir seen from this package's folder, where
// go test runs.
const historiesDir = "testdata/histories"

// Sets of recorded histories: deliveries that decided from the worker's
// destinations file; deliveries that decide from the contract recorded with
// their first attempt; deliveries their callers waited on with the deliver
// update; deliveries that notify when they park, close their review timer
// on a decision and fail when nothing was delivered; deliveries that
// publish retry_wait while they wait for their next attempt; deliveries
// that record a review's outcome in the outcome ledger before they end;
// deliveries that wait a lookup destination's settle time before the
// lookup after an unknown outcome; deliveries started with the operation's
// attributes and no state, created at their first try with no state
// published, answering brief callers briefly, their attempts carrying no
// key and a created one naming its terms by digest.
const (
	setConfigContract   = "config-contract"
	setRecordedContract = "recorded-contract"
	setDeliverUpdate    = "deliver-update"
	setReviewDesk       = "review-desk"
	setRetryState       = "retry-state"
	setOutcomeLedger    = "outcome-ledger"
	setSettle           = "settle"
	setLeanHappyPath    = "lean-happy-path"
)

// Sets of recorded gate histories: gates whose breaker came from reports;
// gates that take their breaker and reviewers from the destinations file;
// gates that publish their memo on every change; gates that verify signed
// pauses and resumes where the reviewers have keys; gates whose state is
// their own (recovered from their earlier runs, refused under another name).
const (
	setGateReportedBreaker = "gate-reported-breaker"
	setGateTerms           = "gate-terms"
	setGateMemo            = "gate-memo"
	setGateProof           = "gate-proof"
	setGateOwn             = "gate-own"
)

// Sets of recorded Delivery scenarios off the happy path: deliveries that
// replace the search attributes a caller set at start, and that end a
// cancel request canceled (parked, or with an attempt in flight); and
// those that also ignore a review command pasted with its placeholders;
// deliveries whose reviewers have keys, deciding only on a verified proof;
// and those that also take a signed batch job's decision, verifying the
// job's proof against themselves; and those that also refuse a signer
// whose key the workers' current file no longer lists; deliveries that
// park an uncertain outcome when the retry would reach a key destination
// after its key retention; and those that park any send past it once an
// attempt may have applied (a retry held past it by a pause); and those
// started with the operation's attributes and no state.
const (
	setTrust           = "trust"
	setPlaceholders    = "placeholders"
	setVerifiedReviews = "verified-reviews"
	setVerifiedJobs    = "verified-jobs"
	setRevocation      = "revocation"
	setRetentionAtSend = "retention-at-send"
	setRetentionHold   = "retention-after-hold"
	setTrustLean       = "trust-lean-happy-path"
)

var (
	deliverySets = []string{setConfigContract, setRecordedContract, setDeliverUpdate, setReviewDesk, setRetryState, setOutcomeLedger, setSettle, setLeanHappyPath}
	gateSets     = []string{setGateReportedBreaker, setGateTerms, setGateMemo, setGateProof, setGateOwn}
	trustSets    = []string{setTrust, setPlaceholders, setVerifiedReviews, setVerifiedJobs, setRevocation, setRetentionAtSend, setRetentionHold, setTrustLean}
)

// recordedHistories reads every Delivery set's index (the fault cases' and
// the trust scenarios') and checks that each set names every history in
// its folder. That each fault case set covers every fault case is checked
// where the cases are: testsuite's TestHistoriesRecordEveryCase.
func recordedHistories(t *testing.T) []wftest.RecordedHistory {
	t.Helper()
	indexes, err := filepath.Glob(filepath.Join(historiesDir, "*", wftest.HistoryIndexFile))
	require.NoError(t, err)
	var sets []string
	for _, idx := range indexes {
		sets = append(sets, filepath.Base(filepath.Dir(idx)))
	}
	require.ElementsMatch(t, slices.Concat(deliverySets, gateSets, trustSets), sets)
	var hs []wftest.RecordedHistory
	for _, set := range slices.Concat(deliverySets, trustSets) {
		hs = append(hs, recordedSet(t, set)...)
	}
	return hs
}

// gateHistories reads every gate set's index.
func gateHistories(t *testing.T) []wftest.RecordedHistory {
	t.Helper()
	var hs []wftest.RecordedHistory
	for _, set := range gateSets {
		hs = append(hs, recordedSet(t, set)...)
	}
	return hs
}

func recordedSet(t *testing.T, set string) []wftest.RecordedHistory {
	t.Helper()
	dir := filepath.Join(historiesDir, set)
	b, err := os.ReadFile(filepath.Join(dir, wftest.HistoryIndexFile))
	require.NoError(t, err, "record with: go run ./lab/testsuite/record -set %s", set)
	var index []wftest.RecordedCase
	require.NoError(t, json.Unmarshal(b, &index))
	var hs []wftest.RecordedHistory
	var files []string
	for _, rc := range index {
		require.NotEmpty(t, rc.Histories, "%s: case %q has no history", set, rc.Case)
		for _, h := range rc.Histories {
			h.File = filepath.Join(dir, h.File)
			hs = append(hs, h)
			files = append(files, h.File)
		}
	}
	onDisk, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	onDisk = slices.DeleteFunc(onDisk, func(f string) bool { return filepath.Base(f) == wftest.HistoryIndexFile })
	slices.Sort(onDisk)
	slices.Sort(files)
	require.Equal(t, onDisk, files, "%s: index.json and the histories on disk disagree", set)
	return hs
}

// replay replays one recorded history under its real workflow ID: the
// replayer's default ID would trip the workflow's own ID check.
func replay(t *testing.T, r sdkworker.WorkflowReplayer, h wftest.RecordedHistory, logger sdklog.Logger) error {
	t.Helper()
	f, err := os.Open(h.File)
	require.NoError(t, err)
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	return r.ReplayWorkflowHistoryWithOptions(logger, hist, sdkworker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: h.WorkflowID, RunID: h.RunID},
	})
}

// replayDestinations are the fault cases' contracts. Replay runs no
// activity, so the URLs and the ledger file do not matter.
var replayDestinations = lab.Destinations("http://127.0.0.1:1", "unused-ledger.db", lab.CaseBudget)

// replayLogger keeps the SDK's logs off stdout and down to warnings.
var replayLogger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))

// labWorker is a worker's destinations and activities for the lab's
// destinations with nothing behind the HTTP ones: for runs whose attempts
// are scripted, or go to the ledger, a SQLite file of the test's own.
func labWorker(t *testing.T) (destinations.Config, *activities.Activities) {
	t.Helper()
	cfg := lab.Destinations("http://127.0.0.1:1", filepath.Join(t.TempDir(), lab.LedgerDB), lab.CaseBudget)
	ads, err := worker.OpenAdapters(cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ads.Close() })
	// No client: the ledger deduplicates for ever, so an attempt there
	// reads no earlier runs.
	return cfg, worker.NewActivities(nil, cfg, ads)
}

// TestReplayRecordedHistories replays every recorded history against the
// current Delivery and Destination workflows.
func TestReplayRecordedHistories(t *testing.T) {
	hs := append(recordedHistories(t), gateHistories(t)...)
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflow(replayer, replayDestinations)
	for _, h := range hs {
		t.Run(filepath.Base(filepath.Dir(h.File))+"/"+filepath.Base(h.File), func(t *testing.T) {
			require.NoError(t, replay(t, replayer, h, replayLogger))
		})
	}
}

// TestReplayWithoutDestinations: a delivery that recorded its contract
// replays on a worker whose destinations file has none of its destinations
// (they were edited or removed since): its decisions come from history.
func TestReplayWithoutDestinations(t *testing.T) {
	hs := append(recordedSet(t, setRecordedContract), recordedSet(t, setDeliverUpdate)...)
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflow(replayer, destinations.Config{})
	for _, h := range hs {
		t.Run(filepath.Base(h.File), func(t *testing.T) {
			require.NoError(t, replay(t, replayer, h, replayLogger))
		})
	}
}

// deliveryFunc is the Delivery workflow's signature.
type deliveryFunc func(workflow.Context, workflows.DeliveryInput) (workflows.DeliveryResult, error)

// sleepFirst is the Delivery workflow with one timer added before it starts:
// a change to the command sequence made without versioning.
func sleepFirst(delivery deliveryFunc) deliveryFunc {
	return func(ctx workflow.Context, in workflows.DeliveryInput) (workflows.DeliveryResult, error) {
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return workflows.DeliveryResult{}, err
		}
		return delivery(ctx, in)
	}
}

// sleepFirstVersioned is the same change behind workflow.GetVersion: runs
// that started before it keep the old command sequence.
func sleepFirstVersioned(delivery deliveryFunc) deliveryFunc {
	return func(ctx workflow.Context, in workflows.DeliveryInput) (workflows.DeliveryResult, error) {
		if workflow.GetVersion(ctx, "sleep-before-delivery", workflow.DefaultVersion, 1) == 1 {
			if err := workflow.Sleep(ctx, time.Second); err != nil {
				return workflows.DeliveryResult{}, err
			}
		}
		return delivery(ctx, in)
	}
}

func replayerWith(wf deliveryFunc) sdkworker.WorkflowReplayer {
	r := sdkworker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: workflows.WorkflowType})
	return r
}

// TestReplayCatchesUnversionedChange: the unversioned change fails the
// replay of every recorded history with a non-determinism error.
func TestReplayCatchesUnversionedChange(t *testing.T) {
	hs := recordedHistories(t)
	replayer := replayerWith(sleepFirst(worker.Deliveries(replayDestinations).Delivery))
	for _, h := range hs {
		t.Run(filepath.Base(h.File), func(t *testing.T) {
			// The expected panic would log a stack trace per history.
			err := replay(t, replayer, h, sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
			require.Error(t, err, "an extra timer before the first command must not replay")
			// TMPRL1100 is the SDK's code for a non-determinism error.
			require.ErrorContains(t, err, "[TMPRL1100]")
		})
	}
}

// TestReplayAcceptsVersionedChange: the same change behind GetVersion
// replays every recorded history, and new runs do take the new path.
func TestReplayAcceptsVersionedChange(t *testing.T) {
	hs := recordedHistories(t)
	versioned := sleepFirstVersioned(worker.Deliveries(replayDestinations).Delivery)
	replayer := replayerWith(versioned)
	for _, h := range hs {
		t.Run(filepath.Base(h.File), func(t *testing.T) {
			require.NoError(t, replay(t, replayer, h, replayLogger))
		})
	}

	// A new run sleeps first: the change is real, not skipped everywhere.
	cfg, acts := labWorker(t)
	var ts sdktest.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(sleepFirstVersioned(worker.Deliveries(cfg).Delivery),
		workflow.RegisterOptions{Name: workflows.WorkflowType})
	env.RegisterActivity(acts)
	in := lab.Input(lab.DestLedger, "versioned", lab.Ticket("versioned", "ledger row"))
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(opkey.Key(in.Operation))})
	began := env.Now()
	env.ExecuteWorkflow(workflows.WorkflowType, in)
	var res workflows.DeliveryResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, workflows.StatusCreated, res.Status)
	require.Len(t, res.Attempts, 1)
	require.GreaterOrEqual(t, res.Attempts[0].Started.Sub(began), time.Second, "a new run must take the versioned sleep")
}
