package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	batchpb "go.temporal.io/api/batch/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities/ledger/sqlstore"
	"github.com/abde64c9/courier/courierwf"
	"github.com/abde64c9/courier/deploy"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/workflows"
)

// authWithin bounds the callers phase.
const authWithin = 3 * time.Minute

// The probe is a workflow no worker runs, for the batch signal to reach:
// the batch job runs in Temporal's worker service, through the internal
// frontend, which is what this shows works under authorization.
const (
	probeType      = "CourierAuthProbe"
	probeTaskQueue = "courier-auth-probe"
	probeSignal    = "probe"
)

// auth: the server checks every caller, and only Courier's workers and
// operators hold the role that can poll Courier's task queues (the door the
// workers' own check, worker/genuine.go, cannot close: which process ran
// the scheduling task). Through node 1: a service's workflow in its own
// namespace delivers through Courier's Nexus endpoint with the service's
// token, created through the workers (the worker's token); the same token
// is refused every call that would let it act as a Courier worker or start
// Courier's runs (polling the courier and Nexus task queues, starting a
// Delivery or a Destination, signalling), and may read. The reader's token
// reads but is refused start, signal, update and a batch job; no token and
// a token signed by another key are refused; a batch signal the operator
// starts reaches its workflow (Temporal's own worker service runs it).
func (t *topo) auth(ctx context.Context) row {
	r := row{phase: "callers checked (tokens by role)", kills: "-", takeover: "-", duplicates: "-", lost: "-"}
	ctx, cancel := context.WithTimeout(ctx, authWithin)
	defer cancel()
	failed := 0
	check := func(what string, err error) {
		if err != nil {
			failed++
			r.notes = append(r.notes, fmt.Sprintf("auth: FAIL %s: %v", what, err))
			return
		}
		r.notes = append(r.notes, "auth: "+what)
	}

	tokens := map[string]string{"": ""}
	for _, role := range []string{"service", "operator", "reader"} {
		tok, err := lab.ReadToken(t.issuerDir(), role)
		if err != nil {
			check("the "+role+" token", err)
			return r
		}
		tokens[role] = tok
	}
	clients := map[string]client.Client{}
	for role, tok := range tokens {
		c, err := dialAs(ctx, "default", tok)
		if err != nil {
			check("dial as "+role, err)
			return r
		}
		defer c.Close()
		clients[role] = c
	}
	forged, err := forgedToken(t.dir)
	if err != nil {
		check("a token signed by another key", err)
		return r
	}

	callers, err := dialAs(ctx, lab.CallerNamespace, tokens["service"])
	if err != nil {
		check("dial as service in "+lab.CallerNamespace, err)
		return r
	}
	defer callers.Close()
	id, err := deliverThroughNexus(ctx, callers)
	check("service token: its workflow in namespace "+lab.CallerNamespace+" delivered through Nexus endpoint "+
		lab.NexusEndpoint(lab.NexusTenant)+", created through the workers (worker token)", err)
	if err != nil {
		return r
	}
	r.deliveries = "1"
	check("the outcome ledger (PostgreSQL, one for every worker on both nodes) holds the delivery's receipt", t.ledgerHolds(ctx, id))

	service := clients["service"]
	_, err = service.DescribeWorkflowExecution(ctx, id, "")
	check("service token: describe a delivery allowed (read)", err)
	for _, door := range courierDoors(id) {
		check("service token: "+door.what+" refused", refused(door.try(ctx, service, clients["operator"])))
	}
	check("service token: a start in "+lab.CallerNamespace+" with a completion callback to the internal frontend refused (it could complete another namespace's operation)",
		callbackRefused(attachCallback(ctx, callers)))
	// The same call with write on the namespace goes through: the
	// refusals above come from the service's role, and the server checks
	// roles, not queues, so an operator's token could poll Courier's.
	check("operator token: the same poll, on a queue no worker serves, is not refused (the server checks the role, not the queue)",
		notRefused(pollWorkflowTasks(ctx, clients["operator"], probeTaskQueue)))

	reader := clients["reader"]
	_, err = reader.DescribeWorkflowExecution(ctx, id, "")
	check("reader token: describe allowed", err)
	_, err = reader.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id + "-again", TaskQueue: workflows.TaskQueue}, workflows.WorkflowType)
	check("reader token: start refused", refused(err))
	err = reader.SignalWorkflow(ctx, id, "", workflows.SignalReview, workflows.ReviewDecision{})
	check("reader token: signal refused", refused(err))
	_, err = reader.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.UpdateReview,
		Args: []any{workflows.ReviewDecision{}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	check("reader token: update refused", refused(err))
	_, err = clients[""].DescribeWorkflowExecution(ctx, id, "")
	check("no token: describe refused", refused(err))
	// Its claims are read on the first call, the dial's.
	fc, err := dialAs(ctx, "default", forged)
	if err == nil {
		_, err = fc.DescribeWorkflowExecution(ctx, id, "")
		fc.Close()
	}
	check("an admin token signed by another key: refused", refused(err))

	check("operator token: a batch signal, run by Temporal's worker service, reached its workflow",
		batchSignal(ctx, clients["operator"], reader))
	r.pass = failed == 0
	return r
}

// refused is nil when the server refused the call err came from.
func refused(err error) error {
	if errors.As(err, new(*serviceerror.PermissionDenied)) {
		return nil
	}
	return fmt.Errorf("want PermissionDenied, got %v", err)
}

// notRefused is nil unless the server refused the call err came from.
func notRefused(err error) error {
	if errors.As(err, new(*serviceerror.PermissionDenied)) {
		return err
	}
	return nil
}

// A door is a call that lets its caller act as one of Courier's workers or
// start Courier's runs. try makes it with c; cleanup, with write on the
// namespace, ends whatever it started if the server let it through.
type door struct {
	what string
	try  func(ctx context.Context, c, cleanup client.Client) error
}

// courierDoors are the doors of Courier's namespace; delivery is a
// delivery's workflow ID.
func courierDoors(delivery string) []door {
	probe := fmt.Sprintf("auth-door-%d", time.Now().UnixNano())
	// start starts a run of wfType, with a signal first when signal is set
	// (a gate's start, as Courier's workers make it).
	start := func(id, wfType, signal string) func(context.Context, client.Client, client.Client) error {
		return func(ctx context.Context, c, cleanup client.Client) error {
			o := client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}
			var run client.WorkflowRun
			var err error
			if signal == "" {
				run, err = c.ExecuteWorkflow(ctx, o, wfType)
			} else {
				run, err = c.SignalWithStartWorkflow(ctx, id, signal, nil, o, wfType)
			}
			if err == nil {
				_ = cleanup.TerminateWorkflow(ctx, id, run.GetRunID(), "topology test: a start that should have been refused")
			}
			return err
		}
	}
	return []door{
		{"poll the " + workflows.TaskQueue + " task queue's workflow tasks", func(ctx context.Context, c, _ client.Client) error {
			return pollWorkflowTasks(ctx, c, workflows.TaskQueue)
		}},
		{"poll the " + workflows.TaskQueue + " task queue's activity tasks", func(ctx context.Context, c, _ client.Client) error {
			return pollOnce(ctx, func(pctx context.Context) error {
				_, err := c.WorkflowService().PollActivityTaskQueue(pctx, &workflowservice.PollActivityTaskQueueRequest{
					Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: workflows.TaskQueue}, Identity: pollIdentity})
				return err
			})
		}},
		{"poll the " + workflows.NexusTaskQueue(lab.NexusTenant) + " task queue's Nexus tasks", func(ctx context.Context, c, _ client.Client) error {
			return pollOnce(ctx, func(pctx context.Context) error {
				_, err := c.WorkflowService().PollNexusTaskQueue(pctx, &workflowservice.PollNexusTaskQueueRequest{
					Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: workflows.NexusTaskQueue(lab.NexusTenant)}, Identity: pollIdentity})
				return err
			})
		}},
		{"start a " + workflows.WorkflowType + " run", start(workflows.WorkflowIDPrefix+probe, workflows.WorkflowType, "")},
		{"start a " + gate.WorkflowType + " run (signal-with-start " + gate.SignalReport + ")", start(gate.WorkflowID(probe), gate.WorkflowType, gate.SignalReport)},
		{"signal a delivery (" + workflows.SignalReview + ")", func(ctx context.Context, c, _ client.Client) error {
			return c.SignalWorkflow(ctx, delivery, "", workflows.SignalReview, workflows.ReviewDecision{})
		}},
	}
}

// pollFor bounds a poll the server lets through: it waits for a task.
const pollFor = 3 * time.Second

// pollIdentity is the test's polls' identity, as the server records it.
const pollIdentity = "topology-auth"

// pollOnce makes one poll, bounded by pollFor: a poll let through and
// given no task in that time is not an error (the test wants a refusal,
// which is at once).
func pollOnce(ctx context.Context, poll func(context.Context) error) error {
	pctx, cancel := context.WithTimeout(ctx, pollFor)
	defer cancel()
	err := poll(pctx)
	if pctx.Err() != nil && ctx.Err() == nil {
		return nil
	}
	return err
}

// pollWorkflowTasks polls queue's workflow tasks in namespace default once.
func pollWorkflowTasks(ctx context.Context, c client.Client, queue string) error {
	return pollOnce(ctx, func(pctx context.Context) error {
		_, err := c.WorkflowService().PollWorkflowTaskQueue(pctx, &workflowservice.PollWorkflowTaskQueueRequest{
			Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: queue}, Identity: pollIdentity})
		return err
	})
}

// dialAs is a client of namespace ns through node 1, sending token (none
// when empty).
func dialAs(ctx context.Context, ns, token string) (client.Client, error) {
	n, _ := deploy.TopologyNode(1)
	o := client.Options{HostPort: n.FrontendAddr(), Namespace: ns, Logger: quiet()}
	if token != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(token)
		o.ConnectionOptions.TLSDisabled = true
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return client.DialContext(dctx, o)
}

// forgedToken is an admin token from an issuer whose key the server does
// not know.
func forgedToken(dir string) (string, error) {
	other, err := os.MkdirTemp(dir, "forger-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(other)
	is, err := lab.LoadIssuer(other)
	if err != nil {
		return "", err
	}
	admin, _ := lab.RoleNamed("admin")
	return is.Mint(admin, time.Hour)
}

// callbackRefused is nil when the server refused a callback's address.
func callbackRefused(err error) error {
	if errors.As(err, new(*serviceerror.InvalidArgument)) && strings.Contains(err.Error(), "callback address") {
		return nil
	}
	return fmt.Errorf("want the callback's address refused (InvalidArgument), got %v", err)
}

// attachCallback starts a probe in the caller namespace with c, asking the
// server to call the internal frontend when it completes (with an unsigned
// token there, a completion of another run's operation). If the server
// lets it start, it is ended.
func attachCallback(ctx context.Context, c client.Client) error {
	n, _ := deploy.TopologyNode(1)
	id := fmt.Sprintf("courier-auth-callback-%d", time.Now().UnixNano())
	url := fmt.Sprintf("http://127.0.0.1:%d/namespaces/%s/nexus/callback", n.InternalHTTP, lab.CallerNamespace)
	_, err := c.WorkflowService().StartWorkflowExecution(ctx, &workflowservice.StartWorkflowExecutionRequest{
		Namespace: lab.CallerNamespace, WorkflowId: id, RequestId: id, Identity: pollIdentity,
		WorkflowType: &commonpb.WorkflowType{Name: probeType}, TaskQueue: &taskqueuepb.TaskQueue{Name: probeTaskQueue},
		CompletionCallbacks: []*commonpb.Callback{{Variant: &commonpb.Callback_Nexus_{Nexus: &commonpb.Callback_Nexus{Url: url}}}},
	})
	if err == nil {
		_ = c.TerminateWorkflow(ctx, id, "", "topology test: a start that should have been refused")
	}
	return err
}

// deliverThroughNexus runs a service's workflow in the caller namespace
// with c, the service's client there (its worker in this process), which
// delivers through Courier's Nexus endpoint; it returns the delivery's
// workflow ID, which must be created.
func deliverThroughNexus(ctx context.Context, c client.Client) (string, error) {
	w := sdkworker.New(c, callerTaskQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(nexusCaller, workflow.RegisterOptions{Name: callerType})
	if err := w.Start(); err != nil {
		return "", fmt.Errorf("the service's worker in %s: %w", lab.CallerNamespace, err)
	}
	defer w.Stop()
	id := fmt.Sprintf("auth-%d", time.Now().UnixNano())
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "caller-" + id, TaskQueue: callerTaskQueue,
		WorkflowExecutionTimeout: authWithin}, callerType, courierwf.NexusInput{
		Destination: lab.DestHelpdesk, Operation: "create-ticket", BusinessID: id, Payload: []byte(`{"subject": "from the service, through Nexus"}`)})
	if err != nil {
		return "", err
	}
	var res workflows.DeliveryResult
	if err := run.Get(ctx, &res); err != nil {
		return "", err
	}
	if res.Status != workflows.StatusCreated {
		return "", fmt.Errorf("status %q, want %s", res.Status, workflows.StatusCreated)
	}
	return workflows.WorkflowID(res.Key), nil
}

// The service's workflow: its name and task queue in the caller namespace.
const (
	callerType      = "CourierAuthCaller"
	callerTaskQueue = "courier-auth-caller"
)

// nexusCaller delivers in through the lab tenant's endpoint.
func nexusCaller(ctx workflow.Context, in courierwf.NexusInput) (workflows.DeliveryResult, error) {
	return courierwf.NexusDeliver(ctx, lab.NexusEndpoint(lab.NexusTenant), in, workflow.NexusOperationOptions{ScheduleToCloseTimeout: authWithin})
}

// batchSignal starts a probe with the operator's token, has the operator
// signal it in a batch job (the reader may not start one), waits for the
// job and finds the signal in the probe's history, then ends the probe.
func batchSignal(ctx context.Context, operator, reader client.Client) error {
	probe := fmt.Sprintf("courier-auth-probe-%d", time.Now().UnixNano())
	run, err := operator.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: probe, TaskQueue: probeTaskQueue,
		WorkflowExecutionTimeout: 10 * time.Minute}, probeType)
	if err != nil {
		return fmt.Errorf("start the probe: %w", err)
	}
	defer func() {
		_ = operator.TerminateWorkflow(context.WithoutCancel(ctx), probe, run.GetRunID(), "topology test: probe done")
	}()
	req := func(job string) *workflowservice.StartBatchOperationRequest {
		return &workflowservice.StartBatchOperationRequest{
			Namespace: "default", JobId: job, Reason: "topology test: a batch signal under authorization",
			Executions: []*commonpb.WorkflowExecution{{WorkflowId: probe}},
			Operation: &workflowservice.StartBatchOperationRequest_SignalOperation{
				SignalOperation: &batchpb.BatchOperationSignal{Signal: probeSignal, Identity: "topology-test"}},
		}
	}
	if _, err := reader.WorkflowService().StartBatchOperation(ctx, req(probe+"-reader")); !errors.As(err, new(*serviceerror.PermissionDenied)) {
		return fmt.Errorf("the reader's batch job: want PermissionDenied, got %v", err)
	}
	job := probe + "-batch"
	if _, err := operator.WorkflowService().StartBatchOperation(ctx, req(job)); err != nil {
		return fmt.Errorf("start the batch job: %w", err)
	}
	for {
		d, err := operator.WorkflowService().DescribeBatchOperation(ctx, &workflowservice.DescribeBatchOperationRequest{Namespace: "default", JobId: job})
		if err == nil && d.GetState() != enumspb.BATCH_OPERATION_STATE_RUNNING {
			if d.GetState() != enumspb.BATCH_OPERATION_STATE_COMPLETED || d.GetCompleteOperationCount() != 1 || d.GetFailureOperationCount() != 0 {
				return fmt.Errorf("batch job %s: %s, %d done, %d failed", job, d.GetState(), d.GetCompleteOperationCount(), d.GetFailureOperationCount())
			}
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("batch job %s did not finish (%v): %w", job, err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	it := reader.GetWorkflowHistory(ctx, probe, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err
		}
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == probeSignal {
			return nil
		}
	}
	return fmt.Errorf("batch job %s completed, but the probe's history has no %q signal", job, probeSignal)
}

// ledgerHolds checks that the workers' shared outcome ledger recorded the
// delivery with workflow ID id, with its receipt.
func (t *topo) ledgerHolds(ctx context.Context, id string) error {
	l, err := sqlstore.Open(ctx, t.ledger)
	if err != nil {
		return err
	}
	defer l.Close()
	key := strings.TrimPrefix(id, workflows.WorkflowIDPrefix)
	e, ok, err := l.Get(ctx, key)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("no row for %s in %s", key, l.Where())
	case e.Status != string(workflows.StatusCreated) || len(e.Receipt) == 0 || e.WorkflowID != id:
		return fmt.Errorf("the row for %s is %+v, not its created receipt", key, e)
	}
	return nil
}
