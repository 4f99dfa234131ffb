package testsuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

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
	// crashExit is the exit code of the worker that dies after its commit.
	crashExit = 23
	// processTimeout bounds how long a helper process may take.
	processTimeout = time.Minute
)

func realOf(r *Run) (*Real, error) {
	rd, ok := r.Deliverer.(*Real)
	if !ok || rd.lab == nil {
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
	id := r.ID("concurrent")
	in := Input(DestLedger, id, Ticket(id, "ledger row"))
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
	return r.effects(DestLedger, id)
}

// crashThenNewProcess: a worker process commits the ledger row and exits
// before its attempt completes. Temporal sees the attempt lost; a new
// worker process retries with the same key and the UNIQUE key replays it.
func crashThenNewProcess(ctx context.Context, r *Run) error {
	rd, err := realOf(r)
	if err != nil {
		return err
	}
	id := r.ID("lost-response")
	in := Input(DestLedger, id, Ticket(id, "ledger row"))
	cfg := caseDir(r.Env, "destinations.json")
	if err := writeDestinations(cfg, r.Env.Config); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, processTimeout)
	defer cancel()

	first, err := rd.lab.spawn(roleWorker, envDestinations+"="+cfg, fmt.Sprintf("%s=%d", envExitAfterCommit, crashExit))
	if err != nil {
		return err
	}
	defer first.stop()
	h, err := rd.Starter.Start(ctx, in)
	if err != nil {
		return err
	}
	code, err := first.wait(pctx)
	if err != nil {
		return fmt.Errorf("first worker: %w", err)
	}
	r.Report.Extra = map[string]any{"first_exit": code}
	if code != crashExit {
		return fmt.Errorf("first worker exited with %d, want %d (its exit right after the commit)", code, crashExit)
	}
	rows, err := r.Env.Effects(DestLedger, id)
	if err != nil {
		return err
	}
	r.Report.Extra["rows_after_crash"] = rows

	second, err := rd.lab.spawn(roleWorker, envDestinations+"="+cfg)
	if err != nil {
		return err
	}
	defer second.stop()
	st, err := rd.Starter.Wait(pctx, h.Key)
	if err != nil {
		return fmt.Errorf("wait for the new worker process: %w", err)
	}
	r.Report.Outcome, r.Report.Attempts, r.Report.Events = observe(Outcome{Result: st.DeliveryResult}, keyOf(in))
	r.Report.Extra["retry"] = seedResult(st.DeliveryResult)
	return r.effects(DestLedger, id)
}

// newProcessExistingRequest: after a delivery, another client process asks
// for the same operation and gets the original receipt as a duplicate.
func newProcessExistingRequest(ctx context.Context, r *Run) error {
	rd, err := realOf(r)
	if err != nil {
		return err
	}
	id := r.ID("restart")
	in := Input(DestLedger, id, Ticket(id, "ledger row"))
	first, err := r.deliver(ctx, in, nil)
	if err != nil {
		return err
	}
	if first.Result.Status != workflows.StatusCreated {
		return fmt.Errorf("first request: got %s, want created", first.Result.Status)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, processTimeout)
	defer cancel()
	p, err := rd.lab.spawn(roleDeliver, envInput+"="+string(b))
	if err != nil {
		return err
	}
	if code, err := p.wait(pctx); err != nil || code != 0 {
		return fmt.Errorf("client process: exit %d: %v", code, err)
	}
	var second workflows.DeliveryStatus
	if err := json.Unmarshal(p.stdout.Bytes(), &second); err != nil {
		return fmt.Errorf("client process printed %q: %w", p.stdout.String(), err)
	}
	r.Report.Outcome = string(second.Status)
	r.Report.Extra = map[string]any{"first": seedResult(first.Result), "second": seedResult(second.DeliveryResult)}
	if resource(second.DeliveryResult) != resource(first.Result) {
		r.Report.Failures = append(r.Report.Failures, fmt.Sprintf("second receipt %q is not the original %q",
			resource(second.DeliveryResult), resource(first.Result)))
	}
	return r.effects(DestLedger, id)
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
