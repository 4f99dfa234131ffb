package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/lab/testsuite"
	"github.com/abde64c9/courier/lab/wftest"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// trustSeed names the -trust scenarios in a history index.
const trustSeed = "trust"

// trustAttemptTimeout bounds the recording worker's attempts: far longer
// than trustDelay, so the delayed attempt is still in flight when the
// scenario cancels it.
const (
	trustAttemptTimeout = 30 * time.Second
	trustDelay          = 20 * time.Second
)

// trustKeyRetention is the key retention the retention scenario declares
// for helpdesk: shorter than an attempt may take, so a retry after a lost
// answer could arrive after it.
const trustKeyRetention = 10 * time.Second

// trustScenario runs one delivery off the happy path, through the paths a
// caller or an operator can take, and returns its workflow ID.
type trustScenario struct {
	name string
	run  func(ctx context.Context, t *trustDriver) (string, error)
}

var trustScenarios = []trustScenario{
	{"caller-set attributes claim another destination and business id", func(ctx context.Context, t *trustDriver) (string, error) {
		in := lab.Input(lab.DestHelpdesk, "trust-claimed", lab.Ticket("trust-claimed", "claimed attributes"))
		key := opkey.Key(in.Operation)
		claimed := in.Operation
		claimed.Destination, claimed.BusinessID = lab.DestLedger, "someone-else"
		run, err := t.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: workflows.WorkflowID(key), TaskQueue: workflows.TaskQueue,
			TypedSearchAttributes: temporal.NewSearchAttributes(
				workflows.OperationSearchAttributes(claimed, key, workflows.StateDelivering)...),
		}, workflows.WorkflowType, in)
		if err != nil {
			return "", err
		}
		var res workflows.DeliveryResult
		if err := run.Get(ctx, &res); err != nil {
			return "", err
		}
		return run.GetID(), want(res.Status, workflows.StatusCreated)
	}},
	{"parked for review, then cancelled", func(ctx context.Context, t *trustDriver) (string, error) {
		h, err := t.park(ctx, "trust-parked", "parked, then cancelled")
		if err != nil {
			return "", err
		}
		return h.WorkflowID, t.cancel(ctx, h.Key)
	}},
	{"the review command pasted with its placeholders is ignored, then the filled-in one delivers", func(ctx context.Context, t *trustDriver) (string, error) {
		h, err := t.park(ctx, "trust-pasted", "pasted placeholders")
		if err != nil {
			return "", err
		}
		// By signal, as the web UI's Send a Signal or a script sends it: the
		// update's validator would refuse it before history saw it.
		pasted := workflows.ReviewDecision{Decision: workflows.DecisionDelivered, ResourceID: "<ID-YOU-FOUND>", Reviewer: "<YOUR-NAME>", Note: "found it"}
		if err := t.c.SignalWorkflow(ctx, h.WorkflowID, "", workflows.SignalReview, pasted); err != nil {
			return "", err
		}
		res, err := t.decided(ctx, h.WorkflowID, "ticket-found")
		if err != nil {
			return "", err
		}
		if res.Review == nil || res.Review.Ignored != 1 {
			return "", fmt.Errorf("review %+v, want the pasted decision ignored", res.Review)
		}
		return h.WorkflowID, want(res.Status, workflows.StatusDeliveredByReview)
	}},
	{"cancelled while its attempt is in flight", func(ctx context.Context, t *trustDriver) (string, error) {
		in := lab.Input(lab.DestHelpdesk, "trust-in-flight", lab.Ticket("trust-in-flight", "cancelled in flight"))
		if err := t.env.Inject(lab.DestHelpdesk, sandbox.Fault{Kind: sandbox.FaultDelayAfterCommit, Delay: trustDelay}); err != nil {
			return "", err
		}
		h, err := t.s.Start(ctx, in)
		if err != nil {
			return "", err
		}
		// The ticket is committed and its answer delayed: the attempt is
		// in flight.
		for {
			n, err := t.env.Effects(lab.DestHelpdesk, in.BusinessID)
			if err != nil {
				return "", err
			}
			if n > 0 {
				break
			}
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		return h.WorkflowID, t.cancel(ctx, h.Key)
	}},
	// Last: it redeploys the worker with helpdesk's short key retention.
	{"a key destination loses its answer after the commit and the retry would arrive after its key retention: parked, then delivered by review", func(ctx context.Context, t *trustDriver) (string, error) {
		if err := t.redeploy(func(cfg *destinations.Config) {
			d := cfg.Destinations[lab.DestHelpdesk]
			d.Contract.KeyRetention = contract.Duration(trustKeyRetention)
			cfg.Destinations[lab.DestHelpdesk] = d
		}); err != nil {
			return "", err
		}
		if err := t.env.Inject(lab.DestHelpdesk, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}); err != nil {
			return "", err
		}
		id := "trust-retention"
		h, err := t.s.Start(ctx, lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, "retry past the key retention")))
		if err != nil {
			return "", err
		}
		if err := t.parkedWithOneTicket(ctx, h.Key, id); err != nil {
			return "", err
		}
		recs, err := t.env.Sandbox.Records(lab.SandboxService(t.env.Config.Destinations[lab.DestHelpdesk]))
		if err != nil {
			return "", err
		}
		i := slices.IndexFunc(recs, func(r sandbox.Record) bool { return r.Key == h.Key })
		if i < 0 {
			return "", fmt.Errorf("no ticket with key %s to name", h.Key)
		}
		res, err := t.decided(ctx, h.WorkflowID, recs[i].TicketID)
		if err != nil {
			return "", err
		}
		return h.WorkflowID, want(res.Status, workflows.StatusDeliveredByReview)
	}},
}

// The retention-after-hold scenario's terms for helpdesk: the retry after
// a lost answer is decided within the key retention (its wait and attempt
// timeout end before it), and the gate then holds it past the retention.
const (
	holdKeyRetention = 15 * time.Second
	holdRetryWait    = 6 * time.Second
	holdAttempt      = time.Second
)

func init() {
	trustScenarios = append(trustScenarios, trustScenario{
		"a key destination loses its answer after the commit, the retry is held by a pause past its key retention: parked when resumed, then delivered by review",
		retentionAfterHold,
	})
}

// retentionAfterHold pauses helpdesk's gate between a lost answer and the
// retry decided in time, resumes it once the key retention has passed,
// and sees the delivery park with one ticket, not send.
func retentionAfterHold(ctx context.Context, t *trustDriver) (string, error) {
	if err := t.redeploy(func(cfg *destinations.Config) {
		d := cfg.Destinations[lab.DestHelpdesk]
		d.Contract.KeyRetention = contract.Duration(holdKeyRetention)
		d.Contract.Retry.AttemptTimeout = contract.Duration(holdAttempt)
		d.Contract.Retry.InitialInterval = contract.Duration(holdRetryWait)
		d.Contract.Retry.MaxInterval = contract.Duration(holdRetryWait)
		cfg.Destinations[lab.DestHelpdesk] = d
	}); err != nil {
		return "", err
	}
	if err := t.env.Inject(lab.DestHelpdesk, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}); err != nil {
		return "", err
	}
	id := "trust-retention-hold"
	began := time.Now()
	h, err := t.s.Start(ctx, lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, "retry held past the key retention")))
	if err != nil {
		return "", err
	}
	if _, err := t.until(ctx, h.Key, func(st workflows.DeliveryStatus) bool { return len(st.Attempts) == 1 }); err != nil {
		return "", err
	}
	if _, err := t.s.Pause(ctx, lab.DestHelpdesk, gate.PauseRequest{Reason: "partner maintenance", By: "ops"}); err != nil {
		return "", err
	}
	if _, err := t.until(ctx, h.Key, func(st workflows.DeliveryStatus) bool { return st.State == workflows.StatePaused }); err != nil {
		return "", fmt.Errorf("the retry was not held: %w", err)
	}
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(time.Until(began.Add(holdKeyRetention + time.Second))):
	}
	if _, err := t.s.Resume(ctx, lab.DestHelpdesk, gate.ResumeRequest{By: "ops", Note: "maintenance over"}); err != nil {
		return "", err
	}
	if err := t.parkedWithOneTicket(ctx, h.Key, id); err != nil {
		return "", err
	}
	res, err := t.decided(ctx, h.WorkflowID, "ticket-found")
	if err != nil {
		return "", err
	}
	return h.WorkflowID, want(res.Status, workflows.StatusDeliveredByReview)
}

// decided signals ops's decision that the effect exists as resourceID,
// as a reviewer who found it would, and waits for the delivery's end.
func (t *trustDriver) decided(ctx context.Context, workflowID, resourceID string) (workflows.DeliveryResult, error) {
	var res workflows.DeliveryResult
	found := workflows.ReviewDecision{Decision: workflows.DecisionDelivered, ResourceID: resourceID, Reviewer: "ops", Note: "found it"}
	if err := t.c.SignalWorkflow(ctx, workflowID, "", workflows.SignalReview, found); err != nil {
		return res, err
	}
	err := t.c.GetWorkflow(ctx, workflowID, "").Get(ctx, &res)
	return res, err
}

// until polls the delivery's status until ok.
func (t *trustDriver) until(ctx context.Context, key string, ok func(workflows.DeliveryStatus) bool) (workflows.DeliveryStatus, error) {
	for {
		st, err := t.s.Status(ctx, key)
		if err == nil && ok(st) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("%w: last %s after %d attempts", ctx.Err(), st.State, len(st.Attempts))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// recordTrust runs every -trust scenario against a `courier worker`
// process over the lab's destinations and returns their histories.
func recordTrust(ctx context.Context, tmp *lab.Temporal, courier, dir string, logger *slog.Logger) (map[string][]byte, []wftest.RecordedCase, error) {
	return recordScenarios(ctx, tmp, courier, dir, logger, trustSeed, nil, func(t *trustDriver) []scenario {
		var scs []scenario
		for _, sc := range trustScenarios {
			scs = append(scs, scenario{sc.name, func(ctx context.Context) (string, error) { return sc.run(ctx, t) }})
		}
		return scs
	})
}

// scenario runs one delivery and returns its workflow ID.
type scenario struct {
	name string
	run  func(ctx context.Context) (string, error)
}

// recordScenarios runs scenarios against a `courier worker` process over
// the lab's destinations, changed by edit, and records their histories
// under seed.
func recordScenarios(ctx context.Context, tmp *lab.Temporal, courier, dir string, logger *slog.Logger, seed string,
	edit func(*destinations.Config) error, scenarios func(*trustDriver) []scenario,
) (map[string][]byte, []wftest.RecordedCase, error) {
	env, err := testsuite.NewEnv(dir)
	if err != nil {
		return nil, nil, err
	}
	defer env.Close()
	cfg := env.Config
	for name, d := range cfg.Destinations {
		d.Contract.Retry.AttemptTimeout = contract.Duration(trustAttemptTimeout)
		cfg.Destinations[name] = d
	}
	if edit != nil {
		if err := edit(&cfg); err != nil {
			return nil, nil, err
		}
	}
	file := filepath.Join(dir, lab.DestinationsFile)
	var w *lab.Worker
	deploy := func(cfg destinations.Config) error {
		if w != nil {
			w.Kill()
		}
		if err := lab.WriteDestinations(file, cfg); err != nil {
			return err
		}
		var err error
		w, err = lab.StartWorker(ctx, lab.WorkerOptions{Courier: courier, Destinations: file, Temporal: tmp,
			Args: []string{"--log-level", "warn"}, Log: os.Stderr, Ledger: "sqlite:" + filepath.Join(dir, lab.OutcomesDB)})
		return err
	}
	if err := deploy(cfg); err != nil {
		return nil, nil, err
	}
	defer func() {
		if w != nil {
			w.Kill()
		}
	}()
	c := tmp.Client()
	files := map[string][]byte{}
	var index []wftest.RecordedCase
	redeploy := func(edit func(*destinations.Config)) error {
		changed := cfg
		changed.Destinations = maps.Clone(cfg.Destinations)
		edit(&changed)
		return deploy(changed)
	}
	for _, sc := range scenarios(&trustDriver{c: c, s: starter.New(c), env: env, redeploy: redeploy}) {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		id, err := sc.run(sctx)
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("scenario %q: %w", sc.name, err)
		}
		rc, err := recordLatest(ctx, c, seed, sc.name, id, files)
		if err != nil {
			return nil, nil, err
		}
		index = append(index, rc)
		logger.Warn("recorded", "scenario", sc.name)
	}
	return files, index, nil
}

// trustDriver starts, waits on and cancels the scenarios' deliveries.
type trustDriver struct {
	c   client.Client
	s   *starter.Client
	env *testsuite.Env
	// redeploy restarts the worker on the scenarios' file changed by edit;
	// the scenarios after it run on the changed file.
	redeploy func(edit func(*destinations.Config)) error
}

// park starts a delivery to legacy whose response is lost after the
// commit, and waits until it is parked for review.
func (t *trustDriver) park(ctx context.Context, id, subject string) (starter.Handle, error) {
	if err := t.env.Inject(lab.DestLegacy, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}); err != nil {
		return starter.Handle{}, err
	}
	h, err := t.s.Start(ctx, lab.Input(lab.DestLegacy, id, lab.Ticket(id, subject)))
	if err != nil {
		return h, err
	}
	st, err := t.s.Wait(ctx, h.Key)
	if err == nil && st.State != workflows.StateAwaitingReview {
		err = fmt.Errorf("ended %s, want it parked for review", st.State)
	}
	return h, err
}

// cancel asks the delivery to cancel and checks that it ends canceled.
// parkedWithOneTicket waits for the helpdesk delivery key to stop, and
// says how it is not parked for review after one attempt with the one
// ticket of businessID.
func (t *trustDriver) parkedWithOneTicket(ctx context.Context, key, businessID string) error {
	st, err := t.s.Wait(ctx, key)
	if err != nil {
		return err
	}
	if st.State != workflows.StateAwaitingReview || len(st.Attempts) != 1 {
		return fmt.Errorf("ended %s after %d attempts, want it parked for review after one", st.State, len(st.Attempts))
	}
	if n, err := t.env.Effects(lab.DestHelpdesk, businessID); err != nil || n != 1 {
		return fmt.Errorf("%d tickets (%v), want one", n, err)
	}
	return nil
}

func (t *trustDriver) cancel(ctx context.Context, key string) error {
	if err := t.c.CancelWorkflow(ctx, workflows.WorkflowID(key), ""); err != nil {
		return err
	}
	// It fails (nothing delivered) once it has ended.
	_ = t.c.GetWorkflow(ctx, workflows.WorkflowID(key), "").Get(ctx, nil)
	st, err := t.s.Status(ctx, key)
	if err != nil {
		return err
	}
	return want(st.Status, workflows.StatusCanceled)
}

func want(got, want workflows.Status) error {
	if got != want {
		return fmt.Errorf("ended %s, want %s", got, want)
	}
	return nil
}
