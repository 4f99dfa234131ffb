// State and finishing: the search attributes, the events, and how a
// delivery ends.

package workflows

import (
	"fmt"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/opkey"
)

// logger is the workflow's logger (silent on replay) with the delivery's
// key, destination and current attempt on every line.
func (d *delivery) logger(ctx workflow.Context) log.Logger {
	return log.With(workflow.GetLogger(ctx), "key", d.res.Key, "destination", d.in.Destination, "attempt", len(d.res.Attempts))
}

func (d *delivery) event(ctx workflow.Context, attempt int, name, detail string) {
	d.res.Events = append(d.res.Events, Event{Time: workflow.Now(ctx), Attempt: attempt, Event: name, Detail: detail})
}

func (d *delivery) stateName() string {
	return string(d.res.StateOr(d.state))
}

// setState changes the state and what the web UI shows; it writes no history.
func (d *delivery) setState(ctx workflow.Context, s State) {
	d.state = s
	workflow.SetCurrentDetails(ctx, d.details())
}

// upsertState publishes the state for visibility queries. Only holds,
// retry waits, parking and finishing off the happy path do it (see
// finish), so a delivery created at its first try writes none.
func (d *delivery) upsertState(ctx workflow.Context) error {
	if err := workflow.UpsertTypedSearchAttributes(ctx, SAState.ValueSet(d.stateName())); err != nil {
		return fmt.Errorf("upsert %s: %w", SAState.GetName(), err)
	}
	d.stateShown = true
	return nil
}

// ensureSearchAttributes sets the operation's attributes when the caller did
// not (a start from another SDK or the temporal CLI), or set others than
// its input derives: any client may set them, and listings and bulk
// reviews select by them. The Go starter sets them right in the start
// options, so they cost no event.
func (d *delivery) ensureSearchAttributes(ctx workflow.Context) error {
	sa := workflow.GetTypedSearchAttributes(ctx)
	_, d.stateShown = sa.GetKeyword(SAState)
	if key, ok := sa.GetKeyword(SAKey); ok {
		if d.attributesDerived(sa, key) ||
			workflow.GetVersion(ctx, versionDerivedAttributes, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return nil
		}
		workflow.GetLogger(ctx).Warn("search attributes set at start differ from the delivery's own; replaced",
			"destination", d.in.Destination, "business_id", d.in.BusinessID)
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, OperationSearchAttributes(d.in.Operation, d.res.Key, StateDelivering)...); err != nil {
		return fmt.Errorf("upsert search attributes: %w", err)
	}
	d.stateShown = true
	return nil
}

// attributesDerived reports whether the attributes set at start are the
// ones the input derives (key is the CourierKey set), with no state or
// delivering.
func (d *delivery) attributesDerived(sa temporal.SearchAttributes, key string) bool {
	get := func(k temporal.SearchAttributeKeyKeyword) string { v, _ := sa.GetKeyword(k); return v }
	state, shown := sa.GetKeyword(SAState)
	return key == d.res.Key && get(SADestination) == d.in.Destination && get(SAOperation) == d.in.Operation.Operation &&
		get(SABusinessID) == d.in.BusinessID && (!shown || state == string(StateDelivering))
}

// StartSearchAttributes are the visibility attributes a delivery starts
// with: the operation's, and no state. CourierState is published when the
// delivery leaves the happy path; until then, and after it is created at
// its first try, the run's own status says where it is (running:
// delivering, completed: created).
func StartSearchAttributes(op opkey.Operation, key string) []temporal.SearchAttributeUpdate {
	return []temporal.SearchAttributeUpdate{
		SAKey.ValueSet(key),
		SADestination.ValueSet(op.Destination),
		SAOperation.ValueSet(op.Operation),
		SABusinessID.ValueSet(op.BusinessID),
	}
}

// OperationSearchAttributes are StartSearchAttributes with a state, as a
// delivery sets them itself when its start carried others.
func OperationSearchAttributes(op opkey.Operation, key string, state State) []temporal.SearchAttributeUpdate {
	return append(StartSearchAttributes(op, key), SAState.ValueSet(string(state)))
}

func (d *delivery) finish(ctx workflow.Context, st Status, receipt *activities.Receipt, cause string) (DeliveryResult, error) {
	d.res.Status, d.res.Receipt, d.res.Error = st, receipt, cause
	// A rejected or conflicting attempt has told the story already.
	if n := len(d.res.Events); n == 0 || d.res.Events[n-1].Event != string(st) {
		d.event(ctx, len(d.res.Attempts), string(st), cause)
	}
	workflow.SetCurrentDetails(ctx, d.details())
	// Created, with no state ever published: the run's status (Completed)
	// says it, and the upsert would be one more billed action. Only starts
	// with StartSearchAttributes leave the state unpublished, and the start
	// is in history: replay takes the same branch without a marker, whose
	// TemporalChangeVersion upsert would cost what this saves.
	if d.stateShown || st != StatusCreated {
		if err := d.upsertState(ctx); err != nil {
			return DeliveryResult{}, err
		}
	}
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{
		"destination": d.in.Destination, "status": string(st),
	}).Counter(MetricDeliveries).Inc(1)
	kv := []any{"status", st, "attempts", len(d.res.Attempts)}
	if receipt != nil {
		kv = append(kv, "resource_id", receipt.ResourceID)
	}
	if cause != "" {
		kv = append(kv, "cause", cause)
	}
	d.logger(ctx).Info("delivery finished", kv...)
	return d.close(ctx, st, cause)
}

// close ends the run of a finished delivery.
func (d *delivery) close(ctx workflow.Context, st Status, cause string) (DeliveryResult, error) {
	// Deliver updates waiting for this end answer before the run closes.
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return DeliveryResult{}, err
	}
	d.closed = true
	if !st.Delivered() && d.desk(ctx) {
		// Failed in the web UI's list, where Completed reads as delivered;
		// the result travels in the failure (see UndeliveredResult), whose
		// type says whether an effect may exist. Only the failure's content
		// changed with that type, not the command: no version marker.
		return d.res, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("%s: %s", st, cause), d.res.FailureType(),
			temporal.ApplicationErrorOptions{
				NonRetryable: true, Details: []any{d.res}, Category: temporal.ApplicationErrorCategoryBenign,
			})
	}
	return d.res, nil
}
