package testsuite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/activities/ledger/sqlstore"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/workflows"
)

// The cases that need real processes or concurrent clients.
const (
	caseConcurrent = "20 concurrent requests"
	caseCrash      = "commit then process crash then new process retry"
	caseNewProcess = "new process existing request"
)

// realOnly runs the real-only cases, by name.
var realOnly = map[string]func(context.Context, *Run) error{
	caseConcurrent: concurrentRequests,
	caseCrash:      crashThenNewProcess,
	caseNewProcess: newProcessExistingRequest,
}

// ownWorkers are the cases that run their workers as processes of their
// own, so the lab starts none in this process.
var ownWorkers = map[string]bool{caseCrash: true}

const (
	// concurrency is how many requests the concurrent case sends at once.
	concurrency = 20
	// lockedAttemptTimeout bounds the crash case's attempts: far longer
	// than the case takes to see the attempt start and release the lock.
	lockedAttemptTimeout = 10 * time.Second
	// processTimeout bounds a case's processes.
	processTimeout = time.Minute
)

func realOf(r *Run) (*Real, error) {
	rd, ok := r.Deliverer.(*Real)
	if !ok || rd.rl == nil {
		return nil, errors.New("this case needs a real Temporal server: run it with a RealLab")
	}
	return rd, nil
}

// concurrentRequests: twenty clients ask for the same operation at once.
// One starts the delivery; the others join it and get its receipt.
func concurrentRequests(ctx context.Context, r *Run) error {
	rd, err := realOf(r)
	if err != nil {
		return err
	}
	in := r.ledgerRow("concurrent")
	sts := make([]workflows.DeliveryStatus, concurrency)
	errs := make([]error, concurrency)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			sts[i], errs[i] = rd.Starter.Deliver(ctx, in)
		}()
	}
	close(gate)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	counts := map[workflows.Status]int{}
	var first *workflows.DeliveryStatus
	for i := range sts {
		counts[sts[i].Status]++
		if sts[i].Status == workflows.StatusCreated {
			first = &sts[i]
		}
	}
	r.Report.Extra = map[string]any{"created": counts[workflows.StatusCreated], "duplicates": counts[workflows.StatusDuplicate]}
	if counts[workflows.StatusCreated] != 1 || counts[workflows.StatusDuplicate] != concurrency-1 {
		r.Report.Failures = append(r.Report.Failures, fmt.Sprintf("answers: got %v, want 1 created and %d duplicate",
			counts, concurrency-1))
	}
	if first == nil {
		first = &sts[0]
	}
	r.Report.Outcome, r.Report.Attempts, r.Report.Events = observe(Outcome{Result: first.DeliveryResult}, keyOf(in))
	for _, st := range sts {
		if resource(st.DeliveryResult) != resource(first.DeliveryResult) {
			r.Report.Failures = append(r.Report.Failures, fmt.Sprintf("receipts differ: %q and %q",
				resource(st.DeliveryResult), resource(first.DeliveryResult)))
			break
		}
	}
	return r.effects(lab.DestLedger, in.BusinessID)
}

// crashThenNewProcess: a `courier worker` process commits the ledger row
// and is SIGKILLed before its attempt can report. Temporal sees the attempt
// lost; a new worker process retries with the same key and the UNIQUE key
// replays it. The workers' outcome ledger holds the first process's mark
// (pending) after the crash and one final row after the retry.
//
// The kill lands between the commit and the report without a hook in the
// worker: the case holds the ledger's write lock until the attempt is
// under way, cuts the worker's link to Temporal, releases the lock, waits
// for the row, and kills the process.
func crashThenNewProcess(ctx context.Context, r *Run) error {
	rd, err := realOf(r)
	if err != nil {
		return err
	}
	in := r.ledgerRow("lost-response")
	id := in.BusinessID
	// The attempt must still be waiting on the lock when the case lets go:
	// past its timeout it would give up unsent.
	ledger := r.Env.Config.Destinations[lab.DestLedger]
	ledger.Contract.Retry.AttemptTimeout = contract.Duration(lockedAttemptTimeout)
	only := destinations.Config{Destinations: map[string]destinations.Destination{lab.DestLedger: ledger}}
	cfg := caseDir(r.Env, lab.DestinationsFile)
	if err := lab.WriteDestinations(cfg, only); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, processTimeout)
	defer cancel()
	link, err := lab.NewLink(rd.rl.Temporal.HostPort)
	if err != nil {
		return err
	}
	defer link.Close()
	first, err := rd.rl.worker(pctx, cfg, "TEMPORAL_ADDRESS="+link.Addr())
	if err != nil {
		return err
	}
	defer first.Kill()
	unlock, err := holdWriteLock(pctx, r.Env.LedgerPath)
	if err != nil {
		return err
	}
	h, err := rd.Starter.Start(ctx, in)
	if err != nil {
		unlock()
		return err
	}
	err = awaitAttemptStarted(pctx, rd.Temporal, workflows.WorkflowID(h.Key))
	link.Cut()
	unlock()
	if err != nil {
		return err
	}
	rows, err := awaitEffect(pctx, r.Env, lab.DestLedger, id)
	if err != nil {
		return fmt.Errorf("first worker: %w", err)
	}
	first.Kill()
	r.Report.Extra = map[string]any{"first_worker": "SIGKILL after its commit, before its report", "rows_after_crash": rows}
	outcomes, err := sqlstore.Open(ctx, "sqlite:"+caseDir(r.Env, lab.OutcomesDB))
	if err != nil {
		return err
	}
	defer outcomes.Close()
	// The kill lands after the commit: before the first worker's ledger
	// write (its pending mark stays) or after it (its receipt).
	if e, ok, err := outcomes.Get(ctx, h.Key); err != nil || !ok || e.RunID != h.RunID {
		return fmt.Errorf("outcome ledger after the crash: want the first worker's row, got %+v (found %t, %v)", e, ok, err)
	}

	second, err := rd.rl.worker(pctx, cfg)
	if err != nil {
		return err
	}
	defer second.Kill()
	st, err := rd.Starter.Wait(pctx, h.Key)
	if err != nil {
		return fmt.Errorf("wait for the new worker process: %w", err)
	}
	r.Report.Outcome, r.Report.Attempts, r.Report.Events = observe(Outcome{Result: st.DeliveryResult}, keyOf(in))
	r.Report.Extra["retry"] = seedResult(st.DeliveryResult)
	e, ok, err := outcomes.Get(ctx, h.Key)
	if err != nil || !ok || e.Status == outcomesPending || len(e.Receipt) == 0 || e.RunID != h.RunID {
		return fmt.Errorf("outcome ledger after the retry: want run %s's receipt, got %+v (found %t, %v)", h.RunID, e, ok, err)
	}
	r.Report.Extra["outcome_ledger"] = e.Status
	return r.effects(lab.DestLedger, id)
}

// outcomesPending is the ledger's mark of an attempt that may have applied
// (ledger.StatusPending; the case's variable ledger names the destination).
const outcomesPending = "pending"

// holdWriteLock takes the SQLite database's write lock until unlock.
func holdWriteLock(ctx context.Context, path string) (unlock func(), err error) {
	db, err := sql.Open("sqlite", path+"?_txlock=immediate")
	if err != nil {
		return nil, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = tx.Rollback()
		_ = db.Close()
	}, nil
}

// awaitAttemptStarted waits until a worker has taken the delivery's attempt.
func awaitAttemptStarted(ctx context.Context, c client.Client, wid string) error {
	for {
		desc, err := c.DescribeWorkflowExecution(ctx, wid, "")
		if err != nil {
			return err
		}
		for _, a := range desc.GetPendingActivities() {
			if a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no worker took the attempt of %s: %w", wid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// awaitEffect waits until the destination holds an effect for businessID.
func awaitEffect(ctx context.Context, env *Env, dest, businessID string) (int, error) {
	for {
		n, err := env.Effects(dest, businessID)
		if err != nil || n > 0 {
			return n, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no effect of %s at %s: %w", businessID, dest, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// newProcessExistingRequest: after a delivery, another client process
// (`courier deliver`) asks for the same operation and gets the original
// receipt as a duplicate.
func newProcessExistingRequest(ctx context.Context, r *Run) error {
	rd, err := realOf(r)
	if err != nil {
		return err
	}
	in, first, err := r.firstLedgerRow(ctx, "restart")
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, processTimeout)
	defer cancel()
	cmd := exec.CommandContext(pctx, rd.rl.Courier, "deliver", "--tenant", in.Tenant, "--destination", in.Destination,
		"--operation", in.Operation.Operation, "--id", in.BusinessID, "--payload", string(in.Payload))
	cmd.Env = rd.rl.Temporal.Env(os.Environ())
	cmd.Stderr = rd.rl.Log
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("courier deliver: %w", err)
	}
	var second workflows.DeliveryStatus
	if err := json.Unmarshal(out, &second); err != nil {
		return fmt.Errorf("courier deliver printed %q: %w", out, err)
	}
	r.Report.Outcome = string(second.Status)
	r.Report.Extra = map[string]any{"first": seedResult(first.Result), "second": seedResult(second.DeliveryResult)}
	if resource(second.DeliveryResult) != resource(first.Result) {
		r.Report.Failures = append(r.Report.Failures, fmt.Sprintf("second receipt %q is not the original %q",
			resource(second.DeliveryResult), resource(first.Result)))
	}
	return r.effects(lab.DestLedger, in.BusinessID)
}

// seedResult is a result in the sqlite seed's shape: status, key, result.
func seedResult(res workflows.DeliveryResult) map[string]any {
	return map[string]any{"status": res.Status, "key": res.Key, "result": resource(res)}
}

func resource(res workflows.DeliveryResult) string {
	if res.Receipt == nil {
		return ""
	}
	return res.Receipt.ResourceID
}
