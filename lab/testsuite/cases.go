// Package testsuite reproduces every case of the seed lab reports, in the
// Temporal test environment and against a real dev server, and reports them
// in the seeds' own shape (see faultlab). Lab only: its tests, the recorder
// and courier-lab faultlab import it.
package testsuite

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// Seed report names (their file names without .json).
const (
	SeedFaultInjection = "fault-injection-lab"
	SeedLoopbackHTTP   = "loopback-http-lab"
	SeedSQLiteUnique   = "sqlite-unique-key-lab"
)

// Case is one case of a seed report.
type Case struct {
	Seed string
	Name string // the seed's own case id
	// Want is what the seed shows and Courier must reproduce.
	Want Want
	// RealOnly cases need real processes or concurrent clients.
	RealOnly bool
	Run      func(ctx context.Context, r *Run) error
}

// Want is a case's expected observation.
type Want struct {
	Effects int
	Outcome string
	// Classes is the sequence of attempt results, when the seed shows one.
	Classes []contract.Class
	// Courier is the path that prevents a demonstrated failure.
	Courier *Want
}

// Run is one execution of a case: where it runs and what it observed.
type Run struct {
	Env *Env
	Deliverer
	// ID makes a business id unique to this run, so cases never share effects.
	ID func(base string) string

	Report Report
}

// Report is one case's line in the faultlab report; every field is observed.
type Report struct {
	Seed     string               `json:"seed"`
	Case     string               `json:"case"`
	Passed   bool                 `json:"passed"`
	Effects  int                  `json:"effects"`
	Outcome  string               `json:"outcome"`
	Attempts []ReportAttempt      `json:"attempts"`
	Events   []workflows.Event    `json:"events"`
	Courier  *CourierPath         `json:"courier_path,omitempty"`
	Requests []sandbox.RequestLog `json:"requests,omitempty"`
	Extra    map[string]any       `json:"result,omitempty"`
	Failures []string             `json:"failures,omitempty"`
}

// ReportAttempt is one attempt in the seeds' shape.
type ReportAttempt struct {
	Attempt int            `json:"attempt"`
	Key     *string        `json:"key"`
	Status  contract.Class `json:"status"`
	Error   string         `json:"error,omitempty"`
}

// CourierPath is, for a demonstration case, what Courier did instead.
type CourierPath struct {
	Effects  int               `json:"effects"`
	Outcome  string            `json:"outcome"`
	Attempts []ReportAttempt   `json:"attempts"`
	Events   []workflows.Event `json:"events"`
}

// Outcome statuses of a delivery, and the seed words of the demonstrations.
const (
	OutcomeAwaitingReview = string(workflows.StateAwaitingReview)
	OutcomeSuccess        = "success" // a demonstration's naive client got a receipt
)

// observe fills a report (or a Courier path) from a delivery's outcome.
func observe(o Outcome, key *string) (string, []ReportAttempt, []workflows.Event) {
	res := o.Result
	outcome := string(res.Status)
	if o.Parked != nil {
		res, outcome = o.Parked.DeliveryResult, OutcomeAwaitingReview
	}
	atts := make([]ReportAttempt, 0, len(res.Attempts))
	for _, a := range res.Attempts {
		atts = append(atts, ReportAttempt{Attempt: a.Number, Key: key, Status: a.Class, Error: a.Error})
	}
	return outcome, atts, res.Events
}

// deliver runs one Courier delivery and records it as the case's main path.
func (r *Run) deliver(ctx context.Context, in workflows.DeliveryInput, decide Decider) (Outcome, error) {
	o, err := r.Deliver(ctx, in, decide)
	if err != nil {
		return o, err
	}
	key := keyOf(in)
	outcome, atts, evs := observe(o, key)
	r.Report.Outcome = outcome
	r.Report.Attempts = append(r.Report.Attempts, atts...)
	r.Report.Events = append(r.Report.Events, evs...)
	return o, nil
}

// courierPath runs the delivery that prevents a demonstrated failure.
func (r *Run) courierPath(ctx context.Context, in workflows.DeliveryInput) error {
	o, err := r.Deliver(ctx, in, nil)
	if err != nil {
		return err
	}
	p := &CourierPath{}
	p.Outcome, p.Attempts, p.Events = observe(o, keyOf(in))
	if p.Effects, err = r.Env.Effects(in.Destination, in.BusinessID); err != nil {
		return err
	}
	r.Report.Courier = p
	return nil
}

func keyOf(in workflows.DeliveryInput) *string {
	k := opkey.Key(in.Operation)
	return &k
}

func (r *Run) effects(dest, id string) error {
	n, err := r.Env.Effects(dest, id)
	r.Report.Effects = n
	return err
}

func (r *Run) requests(dest string) {
	r.Report.Requests = r.Env.Sandbox.Requests(lab.SandboxService(r.Env.Config.Destinations[dest]))
}

// check compares a run with the seed; every failure is named.
func (c Case) check(rep *Report) {
	w := c.Want
	if rep.Effects != w.Effects {
		rep.Failures = append(rep.Failures, fmt.Sprintf("effects: got %d, the seed shows %d", rep.Effects, w.Effects))
	}
	if rep.Outcome != w.Outcome {
		rep.Failures = append(rep.Failures, fmt.Sprintf("outcome: got %q, want %q", rep.Outcome, w.Outcome))
	}
	if w.Classes != nil {
		got := make([]contract.Class, 0, len(rep.Attempts))
		for _, a := range rep.Attempts {
			got = append(got, a.Status)
		}
		if !slices.Equal(got, w.Classes) {
			rep.Failures = append(rep.Failures, fmt.Sprintf("attempts: got %v, want %v", got, w.Classes))
		}
	}
	if w.Courier != nil {
		p := rep.Courier
		switch {
		case p == nil:
			rep.Failures = append(rep.Failures, "courier path: not run")
		case p.Effects != w.Courier.Effects || p.Outcome != w.Courier.Outcome:
			rep.Failures = append(rep.Failures, fmt.Sprintf("courier path: got %d effects, %q; want %d, %q",
				p.Effects, p.Outcome, w.Courier.Effects, w.Courier.Outcome))
		}
	}
	rep.Passed = len(rep.Failures) == 0
}

// Execute runs the case on r and returns its checked report.
func (c Case) Execute(ctx context.Context, r *Run) Report {
	r.Report = Report{Seed: c.Seed, Case: c.Name, Attempts: []ReportAttempt{}, Events: []workflows.Event{}}
	if err := c.Run(ctx, r); err != nil {
		r.Report.Failures = append(r.Report.Failures, "run: "+err.Error())
		r.Report.Passed = false
		return r.Report
	}
	c.check(&r.Report)
	return r.Report
}

// Lost responses are staged with delays past the attempt timeout.
var faultDelay = 3 * lab.CaseBudget.AttemptTimeout

func closeAfterCommit(n int) sandbox.Fault {
	return sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit, Count: n}
}

func timeoutBeforeEffect(n int) sandbox.Fault {
	return sandbox.Fault{Kind: sandbox.FaultDelayBeforeCommit, Count: n, Delay: faultDelay}
}

var (
	unknown  = contract.ClassUnknown
	created  = contract.ClassCreated
	replayed = contract.ClassReplayed
)

const (
	statusCreated   = string(workflows.StatusCreated)
	statusDuplicate = string(workflows.StatusDuplicate)
)

// Cases is every case of the three seed reports, in the seeds' order.
func Cases() []Case {
	return []Case{
		// fault-injection-lab: timeouts before an effect and after a commit.
		{Seed: SeedFaultInjection, Name: "before_effect_retry",
			// No idempotency key: the crm destination is reconciled by lookup.
			Want: Want{Effects: 1, Outcome: statusCreated, Classes: []contract.Class{unknown, created}},
			Run: func(ctx context.Context, r *Run) error {
				in := lab.Input(lab.DestCRM, r.ID("before-effect"), nil)
				in.Payload = lab.Ticket(in.BusinessID, "synthetic-report 2026-11-06")
				if err := r.Env.Inject(lab.DestCRM, timeoutBeforeEffect(1)); err != nil {
					return err
				}
				if _, err := r.deliver(ctx, in, nil); err != nil {
					return err
				}
				return r.effects(lab.DestCRM, in.BusinessID)
			}},
		{Seed: SeedFaultInjection, Name: "lost_response_naive_retry",
			Want: Want{Effects: 2, Outcome: OutcomeSuccess,
				Courier: &Want{Effects: 1, Outcome: OutcomeAwaitingReview}},
			Run: func(ctx context.Context, r *Run) error {
				return r.demoBlindRetry(ctx, lab.DestLegacy, lab.DestLegacy, noKey)
			}},
		{Seed: SeedFaultInjection, Name: "lost_response_same_key",
			Want: Want{Effects: 1, Outcome: statusDuplicate, Classes: []contract.Class{unknown, replayed}},
			Run: func(ctx context.Context, r *Run) error {
				return r.lostResponseWithKey(ctx, "same-key")
			}},
		{Seed: SeedFaultInjection, Name: "lost_response_changed_key",
			Want: Want{Effects: 2, Outcome: OutcomeSuccess,
				Courier: &Want{Effects: 1, Outcome: statusDuplicate}},
			Run: func(ctx context.Context, r *Run) error {
				return r.demoBlindRetry(ctx, lab.DestHelpdesk, lab.DestHelpdesk, newKeyEachAttempt)
			}},
		{Seed: SeedFaultInjection, Name: "same_key_changed_payload",
			Want: Want{Effects: 1, Outcome: string(workflows.StatusConflict),
				Classes: []contract.Class{unknown, contract.ClassConflict}},
			Run: func(ctx context.Context, r *Run) error {
				id := r.ID("changed-payload")
				first := lab.Input(lab.DestHelpdeskOnce, id, lab.Ticket(id, "synthetic-report 2026-11-06"))
				if err := r.Env.Inject(lab.DestHelpdeskOnce, closeAfterCommit(1)); err != nil {
					return err
				}
				o, err := r.deliver(ctx, first, nil)
				if err != nil {
					return err
				}
				if o.Result.Status != workflows.StatusAttemptLimit {
					return fmt.Errorf("first delivery: got %s, want attempt_limit", o.Result.Status)
				}
				changed := first
				changed.Payload = lab.Ticket(id, "period only")
				if _, err := r.deliver(ctx, changed, nil); err != nil {
					return err
				}
				return r.effects(lab.DestHelpdeskOnce, id)
			}},
		{Seed: SeedFaultInjection, Name: "transient_then_success",
			Want: Want{Effects: 1, Outcome: statusCreated, Classes: []contract.Class{unknown, unknown, created}},
			Run: func(ctx context.Context, r *Run) error {
				return r.timeoutsBeforeEffect(ctx, "transient", 2)
			}},
		{Seed: SeedFaultInjection, Name: "retry_budget_exhausted",
			Want: Want{Effects: 0, Outcome: string(workflows.StatusAttemptLimit), Classes: []contract.Class{unknown, unknown, unknown}},
			Run: func(ctx context.Context, r *Run) error {
				return r.timeoutsBeforeEffect(ctx, "exhausted", 3)
			}},

		// loopback-http-lab: real HTTP, the TCP connection closed after write.
		{Seed: SeedLoopbackHTTP, Name: "blind",
			Want: Want{Effects: 2, Outcome: OutcomeSuccess,
				Courier: &Want{Effects: 1, Outcome: OutcomeAwaitingReview}},
			Run: func(ctx context.Context, r *Run) error {
				return r.demoBlindRetry(ctx, lab.DestLegacy, lab.DestLegacy, noKey)
			}},
		{Seed: SeedLoopbackHTTP, Name: "key",
			Want: Want{Effects: 1, Outcome: statusDuplicate, Classes: []contract.Class{unknown, replayed}},
			Run: func(ctx context.Context, r *Run) error {
				return r.lostResponseWithKey(ctx, "key")
			}},
		{Seed: SeedLoopbackHTTP, Name: "review",
			Want: Want{Effects: 1, Outcome: OutcomeAwaitingReview, Classes: []contract.Class{unknown}},
			Run:  reviewCase},
		{Seed: SeedLoopbackHTTP, Name: "ignored",
			// The failure is real: a destination declared "key" that ignores
			// keys makes the same-key retry a second ticket.
			Want: Want{Effects: 2, Outcome: statusCreated, Classes: []contract.Class{unknown, created}},
			Run: func(ctx context.Context, r *Run) error {
				id := r.ID("ignored")
				in := lab.Input(lab.DestIgnoring, id, lab.Ticket(id, "Move the workshop booking"))
				if err := r.Env.Inject(lab.DestIgnoring, closeAfterCommit(1)); err != nil {
					return err
				}
				if _, err := r.deliver(ctx, in, nil); err != nil {
					return err
				}
				r.requests(lab.DestIgnoring)
				return r.effects(lab.DestIgnoring, id)
			}},
		{Seed: SeedLoopbackHTTP, Name: "rejected",
			Want: Want{Effects: 0, Outcome: string(workflows.StatusRejected), Classes: []contract.Class{contract.ClassRejected}},
			Run: func(ctx context.Context, r *Run) error {
				id := r.ID("rejected")
				in := lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, ""))
				if _, err := r.deliver(ctx, in, nil); err != nil {
					return err
				}
				return r.effects(lab.DestHelpdesk, id)
			}},

		// sqlite-unique-key-lab: the key under a UNIQUE constraint, committed
		// with the effect.
		{Seed: SeedSQLiteUnique, Name: "normal",
			Want: Want{Effects: 1, Outcome: statusCreated, Classes: []contract.Class{created}},
			Run: func(ctx context.Context, r *Run) error {
				return r.ledgerOnce(ctx, "normal")
			}},
		{Seed: SeedSQLiteUnique, Name: "same request twice",
			Want: Want{Effects: 1, Outcome: statusDuplicate},
			Run: func(ctx context.Context, r *Run) error {
				return r.ledgerTwice(ctx, "double", false)
			}},
		{Seed: SeedSQLiteUnique, Name: "same key different content",
			Want: Want{Effects: 1, Outcome: string(workflows.StatusConflict)},
			Run: func(ctx context.Context, r *Run) error {
				return r.ledgerTwice(ctx, "conflict", true)
			}},
		{Seed: SeedSQLiteUnique, Name: "20 concurrent requests", RealOnly: true,
			Want: Want{Effects: 1, Outcome: statusCreated}},
		{Seed: SeedSQLiteUnique, Name: "commit then process crash then new process retry", RealOnly: true,
			Want: Want{Effects: 1, Outcome: statusDuplicate}},
		{Seed: SeedSQLiteUnique, Name: "new process existing request", RealOnly: true,
			Want: Want{Effects: 1, Outcome: statusDuplicate}},
		{Seed: SeedSQLiteUnique, Name: "worker with no saved request",
			Want: Want{Effects: 1, Outcome: statusCreated, Classes: []contract.Class{created}},
			Run: func(ctx context.Context, r *Run) error {
				return r.ledgerOnce(ctx, "before-send")
			}},
		{Seed: SeedSQLiteUnique, Name: "destination without key: lost acknowledgement followed by blind retry",
			Want: Want{Effects: 2, Outcome: OutcomeSuccess,
				Courier: &Want{Effects: 1, Outcome: statusDuplicate}},
			Run: func(ctx context.Context, r *Run) error {
				in := r.ledgerRow("lost-ack")
				n, err := blindRetryWithoutKey(ctx, r.Env.LedgerPath, opkey.Key(in.Operation), in.Payload)
				if err != nil {
					return err
				}
				r.Report.Effects, r.Report.Outcome = n, OutcomeSuccess
				r.Env.Faults[lab.DestLedger].LoseAcks(1)
				return r.courierPath(ctx, in)
			}},
	}
}

func (r *Run) lostResponseWithKey(ctx context.Context, base string) error {
	id := r.ID(base)
	in := lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, "Move the workshop booking"))
	if err := r.Env.Inject(lab.DestHelpdesk, closeAfterCommit(1)); err != nil {
		return err
	}
	o, err := r.deliver(ctx, in, nil)
	if err != nil {
		return err
	}
	recs, err := r.Env.Sandbox.Records("helpdesk")
	if err != nil {
		return err
	}
	// The replayed receipt must name the ticket the lost response created.
	for _, rec := range recs {
		if o.Result.Receipt != nil && rec.TicketID == o.Result.Receipt.ResourceID {
			r.Report.Extra = map[string]any{"ticket_id": rec.TicketID}
		}
	}
	if r.Report.Extra == nil {
		return fmt.Errorf("receipt %+v names no stored ticket", o.Result.Receipt)
	}
	r.requests(lab.DestHelpdesk)
	return r.effects(lab.DestHelpdesk, id)
}

func (r *Run) timeoutsBeforeEffect(ctx context.Context, base string, n int) error {
	id := r.ID(base)
	in := lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, "synthetic-report 2026-11-06"))
	if err := r.Env.Inject(lab.DestHelpdesk, timeoutBeforeEffect(n)); err != nil {
		return err
	}
	if _, err := r.deliver(ctx, in, nil); err != nil {
		return err
	}
	return r.effects(lab.DestHelpdesk, id)
}

// reviewCase: a lost response at a destination without keys stops for a
// human; the reviewer finds the ticket and says so by signal. The case's
// outcome is the state the seed shows; the resolution is in its result.
func reviewCase(ctx context.Context, r *Run) error {
	id := r.ID("review")
	in := lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Move the workshop booking"))
	if err := r.Env.Inject(lab.DestLegacy, closeAfterCommit(1)); err != nil {
		return err
	}
	var parked workflows.DeliveryStatus
	decide := func(st workflows.DeliveryStatus) *workflows.ReviewDecision {
		parked = st
		recs, _ := r.Env.Sandbox.Records("legacy")
		for _, rec := range recs {
			if string(rec.Payload) != "" && containsID(rec.Payload, id) {
				return &workflows.ReviewDecision{Decision: workflows.DecisionDelivered, Reviewer: "faultlab",
					Note: "ticket found in the helpdesk", ResourceID: rec.TicketID}
			}
		}
		return &workflows.ReviewDecision{Decision: workflows.DecisionRetry, Reviewer: "faultlab", Note: "no ticket found"}
	}
	o, err := r.Deliver(ctx, in, decide)
	if err != nil {
		return err
	}
	outcome, atts, _ := observe(Outcome{Parked: &parked}, nil)
	r.Report.Outcome, r.Report.Attempts, r.Report.Events = outcome, atts, o.Result.Events
	r.Report.Extra = map[string]any{"resolved": o.Result.Status, "receipt": o.Result.Receipt}
	if o.Result.Status != workflows.StatusDeliveredByReview {
		return fmt.Errorf("review did not resolve the delivery: %s", o.Result.Status)
	}
	r.requests(lab.DestLegacy)
	return r.effects(lab.DestLegacy, id)
}

func (r *Run) ledgerOnce(ctx context.Context, base string) error {
	in := r.ledgerRow(base)
	if _, err := r.deliver(ctx, in, nil); err != nil {
		return err
	}
	return r.effects(lab.DestLedger, in.BusinessID)
}

// ledgerTwice sends the same operation twice, the second time with the same
// or another payload; the report's outcome is the second answer.
func (r *Run) ledgerTwice(ctx context.Context, base string, changePayload bool) error {
	in, first, err := r.firstLedgerRow(ctx, base)
	if err != nil {
		return err
	}
	id := in.BusinessID
	if changePayload {
		in.Payload = lab.Ticket(id, "another ledger row")
	}
	second, err := r.deliver(ctx, in, nil)
	if err != nil {
		return err
	}
	r.Report.Extra = map[string]any{"first": first.Result.Status, "second": second.Result.Status,
		"first_receipt": first.Result.Receipt, "second_receipt": second.Result.Receipt}
	return r.effects(lab.DestLedger, id)
}

// ledgerRow is a delivery of a new ledger row for base.
func (r *Run) ledgerRow(base string) workflows.DeliveryInput {
	id := r.ID(base)
	return lab.Input(lab.DestLedger, id, lab.Ticket(id, "ledger row"))
}

// firstLedgerRow delivers a new ledger row for base, which must be created.
func (r *Run) firstLedgerRow(ctx context.Context, base string) (workflows.DeliveryInput, Outcome, error) {
	in := r.ledgerRow(base)
	first, err := r.deliver(ctx, in, nil)
	if err == nil && first.Result.Status != workflows.StatusCreated {
		err = fmt.Errorf("first request: got %s, want created", first.Result.Status)
	}
	return in, first, err
}

// demoTimeout bounds a demonstration client's requests.
const demoTimeout = 5 * time.Second
