package testsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/devserver"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// TestMain makes the test binary its own helper process (the worker that
// crashes, the second client), and stops the shared dev server at the end.
func TestMain(m *testing.M) {
	if RealProcessRole() != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := RealProcessMain(ctx)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	stopShared()
	removeCourierBinary()
	os.Exit(code)
}

// testLogger keeps the SDK's logs off stdout and down to warnings.
var testLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

func clientOptions() client.Options {
	return client.Options{Logger: sdklog.NewStructuredLogger(testLogger)}
}

// One dev server per test binary run, shared by the real tests.
var shared struct {
	once sync.Once
	srv  *sdktest.DevServer
	err  error
}

func sharedServer(t *testing.T) *sdktest.DevServer {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.srv, shared.err = devserver.Start(ctx, devserver.Options{ClientOptions: clientOptions()})
	})
	require.NoError(t, shared.err, "the real tests need the Temporal CLI: %s", devserver.BuildHint)
	return shared.srv
}

func stopShared() {
	if shared.srv != nil {
		shared.srv.Client().Close()
		_ = shared.srv.Stop()
	}
}

func newLab(t *testing.T) *RealLab {
	srv := sharedServer(t)
	return &RealLab{
		Client: srv.Client(), HostPort: srv.FrontendHostPort(), Namespace: "default",
		Process: []string{os.Args[0], "-test.run=^$"},
		Dir:     t.TempDir(), RunID: uuid.NewString()[:8],
	}
}

// realTest is one real-server test's fixture: the shared dev server, fresh
// destinations, and a bound on the test's time.
func realTest(t *testing.T, timeout time.Duration) (context.Context, *RealLab, *Env) {
	t.Helper()
	lab := newLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	env, err := NewEnv(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(env.Close)
	return ctx, lab, env
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
	lab := newLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cases := RealCases()
	require.Len(t, cases, 20)
	for _, c := range cases {
		t.Run(c.Seed+"/"+c.Name, func(t *testing.T) {
			rep, err := lab.Execute(ctx, c)
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
	ctx, lab, env := realTest(t, 2*time.Minute)
	lab.withWorker(t, env)

	rd := &Real{Starter: starter.New(lab.Client), Temporal: lab.Client, lab: lab}
	id := "review-update-" + lab.RunID
	in := Input(DestLegacy, id, Ticket(id, "Move the workshop booking"))
	require.NoError(t, env.Inject(DestLegacy, closeAfterCommit(1)))
	var refusal error
	o, err := rd.Deliver(ctx, in, func(s workflows.DeliveryStatus) *workflows.ReviewDecision {
		// Past the starter's own check, straight to the workflow's validator.
		h, err := lab.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
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
	n, err := env.Effects(DestLegacy, id)
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
	opts := devserver.Options{DBFile: filepath.Join(dir, "temporal.db"), HostPort: freeHostPort(t), ClientOptions: clientOptions()}
	srv, err := devserver.Start(ctx, opts)
	require.NoError(t, err, devserver.BuildHint)
	defer func() {
		srv.Client().Close()
		_ = srv.Stop()
	}()

	// This client outlives the first server: it reconnects to the second.
	co := clientOptions()
	co.HostPort = opts.HostPort
	c, err := client.DialContext(ctx, co)
	require.NoError(t, err)
	defer c.Close()
	lab := &RealLab{Client: c}
	env, err := NewEnv(dir)
	require.NoError(t, err)
	defer env.Close()
	// A retry wait the restart falls into: the delivery is surely unfinished
	// when the server stops, its timer durable in the server's file.
	d := env.Config.Destinations[DestHelpdesk]
	d.Contract.Retry.InitialInterval, d.Contract.Retry.MaxInterval = contract.Duration(restartRetryWait), contract.Duration(restartRetryWait)
	env.Config.Destinations[DestHelpdesk] = d
	stop, err := lab.startWorker(env)
	require.NoError(t, err)
	defer stop()

	id := "restart-" + uuid.NewString()[:8]
	in := Input(DestHelpdesk, id, Ticket(id, "Move the workshop booking"))
	require.NoError(t, env.Inject(DestHelpdesk, closeAfterCommit(1)))
	st := starter.New(c)
	h, err := st.Start(ctx, in)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(env.Sandbox.Requests("helpdesk")) > 0 },
		30*time.Second, 20*time.Millisecond, "the first attempt never reached the destination")

	// The ticket is committed and its response lost: stop the server now.
	srv.Client().Close()
	require.NoError(t, srv.Stop())
	stopped := time.Now()
	srv, err = devserver.Start(ctx, opts)
	require.NoError(t, err)
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
	n, err := env.Effects(DestHelpdesk, id)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// restartRetryWait outlasts the server's stop.
const restartRetryWait = 3 * time.Second

func freeHostPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
