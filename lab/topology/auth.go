package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	batchpb "go.temporal.io/api/batch/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/activities/ledger/sqlstore"
	"github.com/abde64c9/courier/deploy"
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

// auth: the server checks every caller. In namespace default, through node
// 1: a delivery started with the service's token completes through the
// workers (the worker's token); the reader's token reads but is refused
// start, signal, update and a batch job; no token and a token signed by
// another key are refused; a batch signal the reviewer starts reaches its
// workflow (Temporal's own worker service runs it).
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
	refused := func(err error) error {
		var denied *serviceerror.PermissionDenied
		if errors.As(err, &denied) {
			return nil
		}
		return fmt.Errorf("want PermissionDenied, got %v", err)
	}

	clients := map[string]client.Client{}
	for _, role := range []string{"service", "reviewer", "reader", ""} {
		tok := ""
		if role != "" {
			var err error
			if tok, err = lab.ReadToken(t.issuerDir(), role); err != nil {
				check("the "+role+" token", err)
				return r
			}
		}
		c, err := dialAs(ctx, tok)
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

	id, err := t.deliverAsService(ctx)
	check("service token: `courier deliver` started a delivery, created through the workers (worker token)", err)
	if err != nil {
		return r
	}
	r.deliveries = "1"
	check("the outcome ledger (PostgreSQL, one for every worker on both nodes) holds the delivery's receipt", t.ledgerHolds(ctx, id))
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
	fc, err := dialAs(ctx, forged)
	if err == nil {
		_, err = fc.DescribeWorkflowExecution(ctx, id, "")
		fc.Close()
	}
	check("an admin token signed by another key: refused", refused(err))

	check("reviewer token: a batch signal, run by Temporal's worker service, reached its workflow",
		batchSignal(ctx, clients["service"], clients["reviewer"], reader))
	r.pass = failed == 0
	return r
}

// dialAs is a client of namespace default through node 1, sending token
// (none when empty).
func dialAs(ctx context.Context, token string) (client.Client, error) {
	n, _ := deploy.TopologyNode(1)
	o := client.Options{HostPort: n.FrontendAddr(), Namespace: "default", Logger: quiet()}
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

// deliverAsService runs `courier deliver` with the service's token and
// returns the workflow ID of the delivery, which must be created.
func (t *topo) deliverAsService(ctx context.Context) (string, error) {
	tok, err := lab.ReadToken(t.issuerDir(), "service")
	if err != nil {
		return "", err
	}
	n, _ := deploy.TopologyNode(1)
	env := append(append(cleanEnv(), "TEMPORAL_ADDRESS="+n.FrontendAddr(), "TEMPORAL_NAMESPACE=default"), lab.ClientEnv(tok)...)
	out, err := t.runLab(ctx, "auth", env, filepath.Join(t.dir, "courier"), "deliver", "--destination", "helpdesk",
		"--operation", "create-ticket", "--id", fmt.Sprintf("auth-%d", time.Now().UnixNano()), "--payload", `{"subject": "from the service"}`)
	if err != nil {
		return "", fmt.Errorf("%w; see %s", err, t.procFile("auth", "log"))
	}
	var st workflows.DeliveryStatus
	if err := json.Unmarshal(out, &st); err != nil {
		return "", fmt.Errorf("courier deliver printed no status: %w", err)
	}
	if st.Status != workflows.StatusCreated {
		return "", fmt.Errorf("status %q, want %s", st.Status, workflows.StatusCreated)
	}
	return workflows.WorkflowIDPrefix + st.Key, nil
}

// batchSignal starts a probe with the service's token, has the reviewer
// signal it in a batch job (the reader may not start one), waits for the
// job and finds the signal in the probe's history, then ends the probe.
func batchSignal(ctx context.Context, service, reviewer, reader client.Client) error {
	probe := fmt.Sprintf("courier-auth-probe-%d", time.Now().UnixNano())
	run, err := service.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: probe, TaskQueue: probeTaskQueue,
		WorkflowExecutionTimeout: 10 * time.Minute}, probeType)
	if err != nil {
		return fmt.Errorf("start the probe: %w", err)
	}
	defer func() {
		_ = service.TerminateWorkflow(context.WithoutCancel(ctx), probe, run.GetRunID(), "topology test: probe done")
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
	if _, err := reviewer.WorkflowService().StartBatchOperation(ctx, req(job)); err != nil {
		return fmt.Errorf("start the batch job: %w", err)
	}
	for {
		d, err := reviewer.WorkflowService().DescribeBatchOperation(ctx, &workflowservice.DescribeBatchOperationRequest{Namespace: "default", JobId: job})
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
