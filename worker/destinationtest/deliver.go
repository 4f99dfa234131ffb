package destinationtest

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdktest "go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// delivered is how a delivery ended, and the reviews it stopped for.
type delivered struct {
	result workflows.DeliveryResult
	parked []workflows.DeliveryStatus
}

// reviewer answers a parked delivery; the kit always answers, so every
// delivery ends.
type reviewer func(workflows.DeliveryStatus) workflows.ReviewDecision

// deliverer runs deliveries through the Delivery workflow.
type deliverer interface {
	deliver(ctx context.Context, in workflows.DeliveryInput, review reviewer) (delivered, error)
	// repeats reports whether a second delivery of one operation reaches
	// the adapter (the test environment has no earlier runs; a server
	// refuses another payload before anything is sent).
	repeats() bool
	close()
}

// adapters are the worker's adapters: the subject's, wrapped.
func adapters(cfg destinations.Config, ad destination.Adapter) *worker.Adapters {
	ads := &worker.Adapters{ByName: map[string]destination.Adapter{}}
	for name := range cfg.Destinations {
		ads.ByName[name] = ad
	}
	return ads
}

// testEnv runs each delivery in a fresh SDK test environment.
type testEnv struct {
	cfg  destinations.Config
	acts *activities.Activities
}

func newTestEnv(cfg destinations.Config, ad destination.Adapter) *testEnv {
	acts := worker.NewActivities(nil, cfg, adapters(cfg, ad))
	// Each delivery runs once here: it has no earlier runs.
	acts.Runs = noEarlierRuns{}
	return &testEnv{cfg: cfg, acts: acts}
}

type noEarlierRuns struct{}

func (noEarlierRuns) Earlier(context.Context, string, string) ([]activities.EarlierRun, error) {
	return nil, nil
}

// maxReviews bounds how often the kit answers one delivery's reviews: a
// delivery that keeps parking does not take the kit's answers.
const maxReviews = 5

func tooManyReviews(d delivered) error {
	why := "no evidence"
	if r := d.parked[len(d.parked)-1].Review; r != nil {
		why = r.Evidence
	}
	return fmt.Errorf("the delivery parked for review %d times and took none of the kit's answers; last: %s", len(d.parked), why)
}

// reviewPoll is how often, on the test environment's clock, the kit looks
// for a parked delivery.
const reviewPoll = time.Minute

func (e *testEnv) deliver(_ context.Context, in workflows.DeliveryInput, review reviewer) (delivered, error) {
	var s sdktest.WorkflowTestSuite
	// The kit's messages say what happened; the SDK's logs would bury them.
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(2 * time.Minute)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(opkey.Key(in.Operation))})
	worker.Register(env, e.cfg, e.acts)

	var out delivered
	var queryErr error
	var look func()
	look = func() {
		v, err := env.QueryWorkflow(workflows.QueryStatus)
		var st workflows.DeliveryStatus
		if err == nil {
			err = v.Get(&st)
		}
		if err != nil || st.State != workflows.StateAwaitingReview {
			queryErr = err
			env.RegisterDelayedCallback(look, reviewPoll)
			return
		}
		out.parked = append(out.parked, st)
		if len(out.parked) > maxReviews {
			env.CancelWorkflow()
			return
		}
		env.SignalWorkflow(workflows.SignalReview, review(st))
		env.RegisterDelayedCallback(look, reviewPoll)
	}
	env.RegisterDelayedCallback(look, reviewPoll)
	env.ExecuteWorkflow(workflows.WorkflowType, in)
	if len(out.parked) > maxReviews {
		return out, tooManyReviews(out)
	}
	if !env.IsWorkflowCompleted() {
		return out, fmt.Errorf("delivery did not complete in the test environment (last status query: %v)", queryErr)
	}
	if err := env.GetWorkflowError(); err != nil {
		res, ok := workflows.UndeliveredResult(err)
		if !ok {
			return out, err
		}
		out.result = res
		return out, nil
	}
	return out, env.GetWorkflowResult(&out.result)
}

func (e *testEnv) repeats() bool { return true }

func (e *testEnv) close() {}

// server runs deliveries on a real server, through the starter, with a worker
// of the kit's own.
type server struct {
	starter *starter.Client
	workers []sdkworker.Worker
}

func startReal(_ context.Context, c client.Client, cfg destinations.Config, ad destination.Adapter) (*server, error) {
	r := &server{starter: starter.New(c)}
	acts := worker.NewActivities(c, cfg, adapters(cfg, ad))
	for _, w := range worker.New(c, cfg, acts, sdkworker.Options{}) {
		if err := w.Start(); err != nil {
			r.close()
			return nil, fmt.Errorf("destinationtest: start a worker on the server: %w", err)
		}
		r.workers = append(r.workers, w)
	}
	return r, nil
}

// statusPoll paces the kit's look for a review decision taking hold.
const statusPoll = 100 * time.Millisecond

func (r *server) deliver(ctx context.Context, in workflows.DeliveryInput, review reviewer) (delivered, error) {
	var out delivered
	st, err := r.starter.Deliver(ctx, in)
	for err == nil && st.State == workflows.StateAwaitingReview {
		out.parked = append(out.parked, st)
		if len(out.parked) > maxReviews {
			return out, tooManyReviews(out)
		}
		seen := 0
		if st.Review != nil {
			seen = len(st.Review.Decisions)
		}
		if _, err = r.starter.Review(ctx, st.Key, review(st)); err != nil {
			break
		}
		for err == nil && (st.Review == nil || len(st.Review.Decisions) <= seen) {
			select {
			case <-ctx.Done():
				return out, ctx.Err()
			case <-time.After(statusPoll):
			}
			st, err = r.starter.Status(ctx, st.Key)
		}
		if err == nil {
			st, err = r.starter.Wait(ctx, st.Key)
		}
	}
	if err != nil {
		return out, fmt.Errorf("delivery %s: %w", opkey.Key(in.Operation), err)
	}
	out.result = st.DeliveryResult
	return out, nil
}

func (r *server) repeats() bool { return false }

func (r *server) close() {
	for _, w := range r.workers {
		w.Stop()
	}
}
