package testsuite

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// TestMain stops the shared dev server and removes the courier binary at
// the end.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.temporal != nil {
		shared.temporal.Close()
	}
	if shared.binDir != "" {
		_ = os.RemoveAll(shared.binDir)
	}
	os.Exit(code)
}

// testLogger keeps the SDK's logs off stdout and down to warnings.
var testLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// replayLogger is testLogger for the SDK's replayer.
var replayLogger = sdklog.NewStructuredLogger(testLogger)

// One dev server and one courier binary per test binary run, shared by the
// real tests.
var shared struct {
	once     sync.Once
	temporal *lab.Temporal
	err      error

	binOnce sync.Once
	binDir  string
	courier string
	binErr  error
}

func sharedServer(t *testing.T) *lab.Temporal {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.temporal, shared.err = lab.StartTemporal(ctx, lab.TemporalOptions{Logger: testLogger})
	})
	require.NoError(t, shared.err, "the real tests need the Temporal CLI: %s", devserver.BuildHint)
	return shared.temporal
}

// courierPath is cmd/courier, built once per test binary run.
func courierPath(t *testing.T) string {
	t.Helper()
	shared.binOnce.Do(func() {
		if shared.binDir, shared.binErr = os.MkdirTemp("", "courier-bin-"); shared.binErr == nil {
			shared.courier, shared.binErr = lab.BuildCourier(shared.binDir)
		}
	})
	require.NoError(t, shared.binErr)
	return shared.courier
}

func newLab(t *testing.T) *RealLab {
	return &RealLab{Temporal: sharedServer(t), Courier: courierPath(t), Dir: t.TempDir(), RunID: uuid.NewString()[:8]}
}

// realTest is one real-server test's fixture: the shared dev server, fresh
// destinations, and a bound on the test's time.
func realTest(t *testing.T, timeout time.Duration) (context.Context, *RealLab, *Env) {
	t.Helper()
	rl := newLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	env, err := NewEnv(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(env.Close)
	return ctx, rl, env
}

// withWorker runs an in-process Courier worker for env until the test ends.
func (l *RealLab) withWorker(t *testing.T, env *Env) {
	t.Helper()
	stop, err := l.startWorker(env)
	require.NoError(t, err)
	t.Cleanup(stop)
}

// TestRealSeeds runs every seed case, the real-only ones included, against
// the real dev server, real destinations and real processes.
func TestRealSeeds(t *testing.T) {
	rl := newLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cases := RealCases()
	require.Len(t, cases, 20)
	for _, c := range cases {
		t.Run(c.Seed+"/"+c.Name, func(t *testing.T) {
			rep, err := rl.Execute(ctx, c)
			require.NoError(t, err)
			b, _ := json.MarshalIndent(rep, "", "  ")
			t.Logf("%s", b)
			require.True(t, rep.Passed, "%s", b)
		})
	}
}

// TestRealReviewByUpdate: a delivery parked for review is resolved through
// the validated update; a malformed decision is refused and changes nothing.
func TestRealReviewByUpdate(t *testing.T) {
	ctx, rl, env := realTest(t, 2*time.Minute)
	rl.withWorker(t, env)

	rd := &Real{Starter: starter.New(rl.Temporal.Client()), Temporal: rl.Temporal.Client(), rl: rl}
	id := "review-update-" + rl.RunID
	in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Move the workshop booking"))
	require.NoError(t, env.Inject(lab.DestLegacy, closeAfterCommit(1)))
	var refusal error
	o, err := rd.Deliver(ctx, in, func(s workflows.DeliveryStatus) *workflows.ReviewDecision {
		// Past the starter's own check, straight to the workflow's validator.
		h, err := rl.Temporal.Client().UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: workflows.WorkflowID(s.Key), UpdateName: workflows.UpdateReview,
			Args:         []any{workflows.ReviewDecision{Decision: workflows.DecisionDelivered, Reviewer: "ops"}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		refusal = err
		recs, err := env.Sandbox.Records("legacy")
		if err != nil || len(recs) != 1 {
			return nil
		}
		return &workflows.ReviewDecision{Decision: workflows.DecisionDelivered, Reviewer: "ops", ResourceID: recs[0].TicketID}
	})
	require.NoError(t, err)
	require.ErrorContains(t, refusal, "resource_id: required")
	require.Nil(t, o.Parked, "the decider found the ticket: the delivery must not stay parked")
	require.Equal(t, workflows.StatusDeliveredByReview, o.Result.Status)
	require.Len(t, o.Result.Review.Decisions, 1, "the refused update must leave no record")
	require.Equal(t, "update", o.Result.Review.Decisions[0].Via)
	n, err := env.Effects(lab.DestLegacy, id)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// TestRealServerRestart stops the dev server in the middle of a delivery and
// starts it again on the same SQLite file: the delivery resumes and the
// destination holds one effect.
func TestRealServerRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	tmp := restartableServer(ctx, t, dir)
	rl := &RealLab{Temporal: tmp}
	env, err := NewEnv(dir)
	require.NoError(t, err)
	defer env.Close()
	// A retry wait the restart falls into: the delivery is surely unfinished
	// when the server stops, its timer durable in the server's file.
	d := env.Config.Destinations[lab.DestHelpdesk]
	d.Contract.Retry.InitialInterval, d.Contract.Retry.MaxInterval = contract.Duration(restartRetryWait), contract.Duration(restartRetryWait)
	env.Config.Destinations[lab.DestHelpdesk] = d
	stop, err := rl.startWorker(env)
	require.NoError(t, err)
	defer stop()

	id := "restart-" + uuid.NewString()[:8]
	in := lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, "Move the workshop booking"))
	require.NoError(t, env.Inject(lab.DestHelpdesk, closeAfterCommit(1)))
	st := starter.New(tmp.Client())
	h, err := st.Start(ctx, in)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(env.Sandbox.Requests("helpdesk")) > 0 },
		30*time.Second, 20*time.Millisecond, "the first attempt never reached the destination")

	// The ticket is committed and its response lost: stop the server now.
	tmp.StopServer()
	stopped := time.Now()
	require.NoError(t, tmp.Start(ctx))
	t.Logf("server down for %s", time.Since(stopped).Round(time.Millisecond))

	// The first waits may fail while the client reconnects.
	var res workflows.DeliveryStatus
	for {
		res, err = st.Wait(ctx, h.Key)
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	require.NoError(t, err, "the delivery did not finish after the restart")
	require.Equal(t, workflows.StatusDuplicate, res.Status, "%+v", res.Attempts)
	require.Len(t, res.Attempts, 2)
	require.Equal(t, contract.ClassUnknown, res.Attempts[0].Class)
	require.True(t, res.Attempts[1].Started.After(stopped),
		"the retry ran at %s, before the server stopped at %s", res.Attempts[1].Started, stopped)
	n, err := env.Effects(lab.DestHelpdesk, id)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// restartableServer is a dev server of the test's own, kept in a file in
// dir so that it can be stopped and started again; its client outlives the
// first server process and reconnects to the second.
func restartableServer(ctx context.Context, t *testing.T, dir string) *lab.Temporal {
	t.Helper()
	tmp, err := lab.StartTemporal(ctx, lab.TemporalOptions{DBFile: filepath.Join(dir, lab.TemporalDB), Logger: testLogger})
	require.NoError(t, err, devserver.BuildHint)
	t.Cleanup(tmp.Close)
	return tmp
}

// restartRetryWait outlasts the server's stop, which drains gracefully
// for a few seconds on a busy machine.
const restartRetryWait = 6 * time.Second
