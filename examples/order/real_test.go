package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/abde64c9/courier/courierwf"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// record rewrites testdata/histories from the real run (see replay_test.go).
var record = flag.Bool("record", false, "write the callers' histories into testdata/histories")

// otherTenant has an endpoint of its own on the same workers.
const otherTenant = "globex"

// callerStack is a lab stack whose courier worker serves both tenants'
// endpoints, and the order workers, real processes, of both namespaces.
type callerStack struct {
	t       *testing.T
	ctx     context.Context
	lab     *lab.Stack
	bin     string
	callers client.Client // namespace orders
	workers map[string]*exec.Cmd
}

func TestOrdersOnARealServer(t *testing.T) {
	ctx, courier := lab.RealTest(t, 6*time.Minute)
	ls, err := lab.Start(ctx, lab.Options{
		Courier: courier, Workers: 1,
		WorkerArgs: []string{"--nexus-tenant", lab.NexusTenant, "--nexus-tenant", otherTenant},
		// legacy serves acme alone: its credentials are not globex's.
		Destinations: func(url, dir string) (destinations.Config, error) {
			cfg := lab.Destinations(url, filepath.Join(dir, lab.LedgerDB), lab.CaseBudget)
			d := cfg.Destinations[lab.DestLegacy]
			d.Tenants = []string{lab.NexusTenant}
			cfg.Destinations[lab.DestLegacy] = d
			return cfg, nil
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ls.Close() })
	c := ls.Temporal.Client()
	for _, tenant := range []string{lab.NexusTenant, otherTenant} {
		_, err := lab.EnsureNexusEndpoint(ctx, c, ls.Temporal.Namespace, tenant)
		require.NoError(t, err)
	}
	require.NoError(t, lab.EnsureCallerNamespace(ctx, c, lab.CallerNamespace))
	callers, err := client.NewClientFromExisting(c, client.Options{Namespace: lab.CallerNamespace})
	require.NoError(t, err)
	s := &callerStack{t: t, ctx: ctx, lab: ls, callers: callers, workers: map[string]*exec.Cmd{},
		bin: filepath.Join(t.TempDir(), "order")}
	build := exec.CommandContext(ctx, "go", "build", "-o", s.bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	s.startWorker(lab.CallerNamespace)
	s.startWorker(ls.Temporal.Namespace)
	t.Cleanup(func() {
		for _, w := range s.workers {
			_ = w.Process.Kill()
			_ = w.Wait()
		}
	})
	// Workflows of the tests' own, in the callers' namespace.
	tw := sdkworker.New(callers, testCallers, sdkworker.Options{})
	tw.RegisterWorkflowWithOptions(claimTenant, workflow.RegisterOptions{Name: "ClaimTenant"})
	tw.RegisterWorkflowWithOptions(statusOf, workflow.RegisterOptions{Name: "StatusOf"})
	require.NoError(t, tw.Start())
	t.Cleanup(tw.Stop)
	histories := map[string]workflow.Execution{}

	t.Run("nexus: four callers, one effect, all get the result", func(t *testing.T) {
		runs := s.place(callers, "OrderViaNexus", Order{ID: "nx-both", Subject: "two callers", Destination: lab.DestHelpdesk, Endpoint: "courier-acme"}, 4)
		for _, r := range runs {
			p, err := s.result(r)
			require.NoError(t, err)
			require.Equal(t, workflows.StatusCreated, p.Delivery.Status)
		}
		s.requireEffects(lab.DestHelpdesk, "nx-both", 1)
		histories["nexus-created"] = workflow.Execution{ID: runs[0].GetID(), RunID: runs[0].GetRunID()}
	})

	t.Run("nexus: parked, caller's worker killed mid-call, decided by review", func(t *testing.T) {
		s.parkedCallers(callers, "OrderViaNexus", lab.CallerNamespace, "nx-parked", "courier-acme", histories, "nexus-parked", func() {
			// How the caller learns it parked: the status operation.
			in := courierwf.NexusStatusInput{Destination: lab.DestLegacy, Operation: operation, BusinessID: "nx-parked"}
			var st workflows.DeliveryStatus
			run, err := callers.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{TaskQueue: testCallers}, "StatusOf", "courier-acme", in)
			require.NoError(t, err)
			require.NoError(t, run.Get(s.ctx, &st))
			require.Equal(t, workflows.StateAwaitingReview, st.State)
			require.Contains(t, st.Review.Evidence, "unknown_outcome")
			// Another tenant's endpoint reads its own tenant's deliveries only.
			run, err = callers.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{TaskQueue: testCallers}, "StatusOf", "courier-"+otherTenant, in)
			require.NoError(t, err)
			requireType(t, run.Get(s.ctx, &st), workflows.ErrUnknownDelivery)
		})
	})

	t.Run("nexus: another payload is a conflict, nothing sent", func(t *testing.T) {
		runs := s.place(callers, "OrderViaNexus", Order{ID: "nx-parked", Subject: "another subject", Destination: lab.DestLegacy, Endpoint: "courier-acme"}, 1)
		_, err := s.result(runs[0])
		requireType(t, err, workflows.ErrConflict)
		s.requireEffects(lab.DestLegacy, "nx-parked", 1)
		histories["nexus-conflict"] = workflow.Execution{ID: runs[0].GetID(), RunID: runs[0].GetRunID()}
	})

	t.Run("nexus: another tenant's endpoint cannot deliver for this one", func(t *testing.T) {
		// Its own delivery of the same operation is its tenant's: another key.
		runs := s.place(callers, "OrderViaNexus", Order{ID: "nx-both", Subject: "two callers", Destination: lab.DestHelpdesk, Endpoint: "courier-" + otherTenant}, 1)
		p, err := s.result(runs[0])
		require.NoError(t, err)
		acme := opkey.Operation{Tenant: lab.NexusTenant, Destination: lab.DestHelpdesk, Operation: operation, BusinessID: "nx-both"}
		mine := acme
		mine.Tenant = otherTenant
		require.Equal(t, opkey.Key(mine), p.Delivery.Key)
		require.NotEqual(t, opkey.Key(acme), p.Delivery.Key)
		// Naming the tenant is refused: the endpoint decides it.
		run, err := callers.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{TaskQueue: testCallers}, "ClaimTenant", "courier-"+otherTenant)
		require.NoError(t, err)
		err = run.Get(s.ctx, nil)
		requireType(t, err, workflows.ErrInvalidRequest)
		require.ErrorContains(t, err, "set by the endpoint")
		s.requireEffects(lab.DestHelpdesk, "nx-claimed", 0)
	})

	t.Run("nexus: another tenant cannot use a destination that is not its", func(t *testing.T) {
		runs := s.place(callers, "OrderViaNexus", Order{ID: "nx-not-mine", Subject: "with acme's credentials",
			Destination: lab.DestLegacy, Endpoint: "courier-" + otherTenant}, 1)
		_, err := s.result(runs[0])
		requireType(t, err, workflows.ErrInvalidRequest)
		require.ErrorContains(t, err, `destination "legacy": tenant globex may not use it`)
		s.requireEffects(lab.DestLegacy, "nx-not-mine", 0)
	})

	t.Run("child: four callers, one effect, all get the result", func(t *testing.T) {
		runs := s.place(c, "Order", Order{ID: "ch-both", Subject: "two callers", Destination: lab.DestHelpdesk, Tenant: lab.NexusTenant}, 4)
		for _, r := range runs {
			p, err := s.result(r)
			require.NoError(t, err)
			require.Equal(t, workflows.StatusCreated, p.Delivery.Status)
		}
		s.requireEffects(lab.DestHelpdesk, "ch-both", 1)
		histories["child-created"] = workflow.Execution{ID: runs[0].GetID(), RunID: runs[0].GetRunID()}
		histories["child-joined"] = workflow.Execution{ID: runs[1].GetID(), RunID: runs[1].GetRunID()}
	})

	t.Run("child: parked, caller's worker killed mid-call, decided by review", func(t *testing.T) {
		s.parkedCallers(c, "Order", ls.Temporal.Namespace, "ch-parked", "", histories, "child-parked", func() {})
	})

	t.Run("child: another payload is a conflict, nothing sent", func(t *testing.T) {
		runs := s.place(c, "Order", Order{ID: "ch-parked", Subject: "another subject", Destination: lab.DestLegacy, Tenant: lab.NexusTenant}, 1)
		_, err := s.result(runs[0])
		requireType(t, err, workflows.ErrConflict)
		s.requireEffects(lab.DestLegacy, "ch-parked", 1)
		histories["child-conflict"] = workflow.Execution{ID: runs[0].GetID(), RunID: runs[0].GetRunID()}
	})

	if *record {
		s.record(histories)
	}
}

// parkedCallers: two callers of one operation at legacy, whose response
// is lost after the commit, so the delivery parks; while both wait, their
// worker is SIGKILLed and started again; a reviewer decides delivered, and
// both callers (replayed by the new worker) answer delivered_by_review,
// with one effect.
func (s *callerStack) parkedCallers(c client.Client, wf, ns, id, endpoint string, histories map[string]workflow.Execution, name string, whileParked func()) {
	t := s.t
	require.NoError(t, s.lab.Sandbox.Server.Inject(lab.DestLegacy, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
	o := Order{ID: id, Subject: "parked", Destination: lab.DestLegacy, Endpoint: endpoint, Tenant: lab.NexusTenant}
	key := opkey.Key(opkey.Operation{Tenant: lab.NexusTenant, Destination: lab.DestLegacy, Operation: operation, BusinessID: id})
	first := s.place(c, wf, o, 1)
	st := s.awaitParked(key)
	second := s.place(c, wf, o, 1)
	runs := append(first, second...)
	for _, r := range runs {
		s.awaitPending(c, r)
	}
	whileParked()
	s.restartWorker(ns)

	effects, err := s.lab.Effects.All(s.ctx)
	require.NoError(t, err)
	require.Len(t, effects[id], 1)
	_, err = s.lab.Starter.Review(s.ctx, st.Key, workflows.ReviewDecision{
		Decision: workflows.DecisionDelivered, Reviewer: "ops", ResourceID: effects[id][0].ID, Note: "found it in legacy",
	})
	require.NoError(t, err)
	for _, r := range runs {
		p, err := s.result(r)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusDeliveredByReview, p.Delivery.Status)
		require.Equal(t, effects[id][0].ID, p.Delivery.Receipt.ResourceID)
	}
	s.requireEffects(lab.DestLegacy, id, 1)
	histories[name] = workflow.Execution{ID: runs[1].GetID(), RunID: runs[1].GetRunID()}
}

// testCallers is the task queue of the tests' own caller workflows.
const testCallers = "test-callers"

// statusOf reads a delivery's status through endpoint.
func statusOf(ctx workflow.Context, endpoint string, in courierwf.NexusStatusInput) (workflows.DeliveryStatus, error) {
	return courierwf.NexusStatus(ctx, endpoint, in, workflow.NexusOperationOptions{})
}

// claimTenant names a tenant in its input, through endpoint.
func claimTenant(ctx workflow.Context, endpoint string) error {
	_, err := courierwf.NexusDeliver(ctx, endpoint, courierwf.NexusInput{
		Tenant: lab.NexusTenant, Destination: lab.DestHelpdesk, Operation: operation, BusinessID: "nx-claimed",
		Payload: []byte(`{"request_id": "nx-claimed", "subject": "not mine"}`),
	}, workflow.NexusOperationOptions{})
	return err
}

func (s *callerStack) startWorker(ns string) {
	cmd := exec.Command(s.bin, "worker")
	cmd.Env = append(s.lab.Temporal.Env(os.Environ()), "TEMPORAL_NAMESPACE="+ns)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(s.t, cmd.Start())
	s.workers[ns] = cmd
}

// restartWorker SIGKILLs ns's order worker and starts a new one, which
// has none of the callers in its cache: it replays them from history.
func (s *callerStack) restartWorker(ns string) {
	w := s.workers[ns]
	require.NoError(s.t, w.Process.Signal(syscall.SIGKILL))
	_ = w.Wait()
	s.startWorker(ns)
}

// place starts n order workflows for o, each under a workflow ID of its own.
func (s *callerStack) place(c client.Client, wf string, o Order, n int) []client.WorkflowRun {
	var runs []client.WorkflowRun
	for i := range n {
		id := fmt.Sprintf("%s-%s-%d-%d", wf, o.ID, time.Now().UnixNano(), i)
		run, err := c.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{ID: id, TaskQueue: TaskQueue}, wf, o)
		require.NoError(s.t, err)
		runs = append(runs, run)
	}
	return runs
}

func (s *callerStack) result(r client.WorkflowRun) (Placed, error) {
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	var p Placed
	err := r.Get(ctx, &p)
	return p, err
}

// awaitParked waits until the delivery with key is awaiting review.
func (s *callerStack) awaitParked(key string) workflows.DeliveryStatus {
	var st workflows.DeliveryStatus
	require.Eventually(s.t, func() bool {
		var err error
		st, err = s.lab.Starter.Status(s.ctx, key)
		return err == nil && st.State == workflows.StateAwaitingReview
	}, time.Minute, 100*time.Millisecond, "delivery %s did not park", key)
	return st
}

// awaitPending waits until r's call is under way: its Nexus operation
// started, or its child or join activity begun.
func (s *callerStack) awaitPending(c client.Client, r client.WorkflowRun) {
	require.Eventually(s.t, func() bool {
		it := c.GetWorkflowHistory(s.ctx, r.GetID(), r.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return false
			}
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_NEXUS_OPERATION_STARTED, enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED,
				enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "caller %s never called", r.GetID())
}

func (s *callerStack) requireEffects(dest, id string, want int) {
	n, err := s.lab.Effects.Count(s.ctx, dest, id)
	require.NoError(s.t, err)
	require.Equal(s.t, want, n, "effects of %s at %s", id, dest)
}

// record writes each caller's history for the replay test.
func (s *callerStack) record(executions map[string]workflow.Execution) {
	require.NoError(s.t, os.MkdirAll(historiesDir, 0o755))
	for name, e := range executions {
		c := s.callers
		if strings.HasPrefix(name, "child") {
			c = s.lab.Temporal.Client()
		}
		h := &historypb.History{}
		it := c.GetWorkflowHistory(s.ctx, e.ID, e.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(s.t, err)
			h.Events = append(h.Events, ev)
		}
		b, err := protojson.Marshal(h)
		require.NoError(s.t, err)
		require.NoError(s.t, os.WriteFile(filepath.Join(historiesDir, name+".json"), b, 0o644))
	}
}

// requireType checks err carries a typed failure of type want.
func requireType(t *testing.T, err error, want string) {
	t.Helper()
	_, ok := workflows.Failure(err, want)
	require.True(t, ok, "no %s failure in %v", want, err)
}
