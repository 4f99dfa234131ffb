package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/abde64c9/courier/activities/ledger"
	"github.com/abde64c9/courier/contract"
)

// Outcomes is the outcome ledger (package activities/ledger): Courier's own
// record of each operation's outcome, kept after Temporal forgets the run.
// Only the worker's steps that learn an outcome write it; a caller never
// does, so what it says is Courier's, not a claim.
type Outcomes interface {
	Get(ctx context.Context, key string) (ledger.Entry, bool, error)
	Put(ctx context.Context, e ledger.Entry) error
	DeletePending(ctx context.Context, key, runID string) (bool, error)
}

// SourceLedger: the ledger's record of the effect an earlier run made; the
// destination was not asked again.
const SourceLedger = "ledger"

// ledgerTries bounds how often one step reads or writes the ledger before it
// gives up: a slow ledger is waited for a little, never sent past.
const ledgerTries = 4

// withLedger runs f up to ledgerTries times, backing off, while ctx lasts.
func withLedger(ctx context.Context, f func() error) error {
	wait := 250 * time.Millisecond
	var err error
	for i := 0; i < ledgerTries; i++ {
		if err = f(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait *= 2
	}
	return err
}

// run is the run an activity serves, as the server reports it.
func run(ctx context.Context) (workflowID, runID string) {
	info := activity.GetInfo(ctx)
	return info.WorkflowExecution.ID, info.WorkflowExecution.RunID
}

// fromLedger answers an attempt from the ledger before anything is sent:
// ok is true when the attempt may go on to the destination. A final outcome
// an earlier run recorded answers for it (the same payload: its receipt, as
// a replay; another: a conflict); one whose outcome is unknown stops it for
// review, unless the destination still recognises the repeat. own is this
// run's mark, if an earlier attempt of it left one.
func (a *Activities) fromLedger(ctx context.Context, req Request, c contract.Contract) (out Outcome, own *ledger.Entry, ok bool) {
	var e ledger.Entry
	var found bool
	err := withLedger(ctx, func() (err error) {
		e, found, err = a.Ledger.Get(ctx, req.Key)
		return err
	})
	if err != nil {
		return ledgerEvidence(fmt.Sprintf("not sent: the outcome ledger could not be read (%v): whether an earlier run applied this operation is not known", err)), nil, false
	}
	wid, rid := run(ctx)
	switch {
	case !found:
		return Outcome{}, nil, true
	case e.WorkflowID == wid && e.RunID == rid && !namesEffect(e.Status):
		return Outcome{}, &e, true
	case e.WorkflowID == wid && e.RunID == rid:
		// An earlier attempt of this run recorded its receipt, and its
		// report was lost (its worker died after writing it): the effect
		// is known, and is not sent again.
	case e.Fingerprint != req.Fingerprint:
		return Outcome{Class: contract.ClassConflict, Error: fmt.Sprintf(
			"not sent: the outcome ledger records this operation (%s, run %s) with another payload (fingerprint %s)",
			e.Status, e.RunID, e.Fingerprint)}, nil, false
	case !namesEffect(e.Status):
		earlier := EarlierRun{RunID: e.RunID, Status: e.Status + " (outcome ledger)", Closed: e.Recorded, FirstAttempt: e.FirstAttempt}
		if !earlier.stops(req, c) {
			return Outcome{}, nil, true
		}
		ev := ledgerEvidence(fmt.Sprintf("not sent: the outcome ledger records run %s of this operation as %s (first attempt %s): "+
			"it may have applied it, and dedup %s would not recognise a repeat",
			e.RunID, e.Status, e.FirstAttempt.UTC().Format(time.RFC3339), c.Dedup))
		ev.EarlierRuns = []EarlierRun{earlier}
		return ev, nil, false
	}
	r, err := decodeReceipt(a.LedgerConverter, e.Receipt)
	if err != nil || r == nil || r.ResourceID == "" {
		return ledgerEvidence(fmt.Sprintf("not sent: the outcome ledger records this operation as %s by run %s, but its receipt cannot be read (%v)",
			e.Status, e.RunID, err)), nil, false
	}
	r.Replayed, r.Source = true, SourceLedger
	return Outcome{Class: contract.ClassReplayed, Receipt: r, Error: ""}, nil, false
}

// namesEffect says whether a ledger status records an effect the
// destination holds; any other (pending, abandoned) leaves it unknown.
func namesEffect(status string) bool {
	switch status {
	case "created", "duplicate", "delivered_by_review":
		return true
	}
	return false
}

// ledgerEvidence stops an attempt for review with the ledger's reason.
func ledgerEvidence(why string) Outcome {
	return Outcome{Class: contract.ClassEarlierRun, Error: why}
}

// markSending records, before anything is sent, that this run's attempt may
// apply the operation: a worker that dies between the effect and its answer
// leaves the mark, and a later run parks on it instead of sending blind. It
// returns the mark.
func (a *Activities) markSending(ctx context.Context, req Request, own *ledger.Entry) (*ledger.Entry, error) {
	wid, rid := run(ctx)
	e := ledger.Entry{Key: req.Key, Fingerprint: req.Fingerprint, Status: ledger.StatusPending, Destination: req.Destination,
		WorkflowID: wid, RunID: rid, FirstAttempt: time.Now()}
	if own != nil && !own.FirstAttempt.IsZero() {
		e.FirstAttempt = own.FirstAttempt
	}
	return &e, withLedger(ctx, func() error { return a.Ledger.Put(ctx, e) })
}

// settle records what the attempt learned: a receipt is the operation's
// final outcome; an attempt that applied nothing takes back its mark (or
// restores an earlier attempt's, own); anything else leaves the mark, since
// the effect may exist.
func (a *Activities) settle(ctx context.Context, req Request, own, mark *ledger.Entry, out Outcome) error {
	switch {
	case (out.Class == contract.ClassCreated || out.Class == contract.ClassReplayed) && out.Receipt != nil:
		status := "created"
		if out.Class == contract.ClassReplayed {
			status = "duplicate"
		}
		return a.recordFinal(ctx, req.Key, req.Fingerprint, req.Destination, status, out.Receipt, "", mark)
	case out.Class.NothingApplied():
		if own != nil {
			return withLedger(ctx, func() error { return a.Ledger.Put(ctx, *own) })
		}
		_, rid := run(ctx)
		return withLedger(ctx, func() error { _, err := a.Ledger.DeletePending(ctx, req.Key, rid); return err })
	}
	return nil
}

// recordFinal writes the operation's final outcome for this run.
func (a *Activities) recordFinal(ctx context.Context, key, fingerprint, destination, status string, r *Receipt, principal string, own *ledger.Entry) error {
	b, err := EncodeReceipt(a.LedgerConverter, r)
	if err != nil {
		return err
	}
	wid, rid := run(ctx)
	e := ledger.Entry{Key: key, Fingerprint: fingerprint, Status: status, Destination: destination, Receipt: b,
		WorkflowID: wid, RunID: rid, Principal: principal}
	if own != nil {
		e.FirstAttempt = own.FirstAttempt
	}
	if err := withLedger(ctx, func() error { return a.Ledger.Put(ctx, e) }); err != nil {
		return fmt.Errorf("record %s of %s in the outcome ledger: %w", status, key, err)
	}
	return nil
}

// Decided is an outcome a delivery reached without an attempt (a review's
// decision), for the ledger.
type Decided struct {
	Key         string   `json:"key"`
	Fingerprint string   `json:"fingerprint"`
	Destination string   `json:"destination"`
	Status      string   `json:"status"`
	Receipt     *Receipt `json:"receipt,omitempty"`
	// Principal is the verified principal of the decision, if it carried a
	// proof; a reviewer's typed name is not recorded as one.
	Principal string `json:"principal,omitempty"`
}

// RecordOutcome writes an outcome a review decided into the ledger, so a
// repeat after the run is gone answers it too. Without a ledger it does
// nothing.
func (a *Activities) RecordOutcome(ctx context.Context, d Decided) error {
	if a.Ledger == nil {
		return nil
	}
	var own *ledger.Entry
	e, found, err := a.Ledger.Get(ctx, d.Key)
	if err != nil {
		return fmt.Errorf("read %s from the outcome ledger: %w", d.Key, err)
	}
	if wid, rid := run(ctx); found && e.WorkflowID == wid && e.RunID == rid {
		own = &e
	}
	return a.recordFinal(ctx, d.Key, d.Fingerprint, d.Destination, d.Status, d.Receipt, d.Principal, own)
}

// EncodeReceipt is the receipt as the ledger keeps it: through the data
// converter dc (the worker's; nil: the SDK's default), so that with the
// payload codec on it is stored encrypted as history's payloads are.
func EncodeReceipt(dc converter.DataConverter, r *Receipt) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	p, err := orDefault(dc).ToPayload(r)
	if err != nil {
		return nil, fmt.Errorf("encode the receipt for the outcome ledger: %w", err)
	}
	return proto.Marshal(p)
}

func decodeReceipt(dc converter.DataConverter, b []byte) (*Receipt, error) {
	if len(b) == 0 {
		return nil, errors.New("no receipt recorded")
	}
	var p commonpb.Payload
	if err := proto.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	var r Receipt
	if err := orDefault(dc).FromPayload(&p, &r); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return &r, nil
}

func orDefault(dc converter.DataConverter) converter.DataConverter {
	if dc != nil {
		return dc
	}
	return converter.GetDefaultDataConverter()
}

// DecodeReceipt reads a receipt the ledger keeps, for courier ledger show.
func DecodeReceipt(dc converter.DataConverter, b []byte) (json.RawMessage, error) {
	r, err := decodeReceipt(dc, b)
	if err != nil {
		return nil, err
	}
	return json.Marshal(r)
}
