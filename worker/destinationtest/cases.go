package destinationtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// kase is one fault case, named as the seed reports name it.
type kase struct {
	name string
	// skip says why the case does not apply to the subject, or is empty.
	skip func(k *kit) string
	// run returns the failures' messages.
	run func(ctx context.Context, k *kit) ([]string, error)
}

var cases = []kase{
	{name: "lost_response_same_key", skip: needsRetry, run: lostResponse},
	{name: "before_effect_retry", skip: needsRetry, run: beforeEffect},
	{name: "commit then process crash then new process retry", skip: needsRetry, run: crashed},
	{name: "20 concurrent requests", skip: dedupsByKey, run: concurrent},
	{name: "same_key_changed_payload", skip: dedupsByKey, run: changedPayload},
	{name: "rejected", skip: hasInvalid, run: rejected},
	{name: "repeat around key_retention", skip: shortRetention, run: aroundRetention},
}

func needsRetry(k *kit) string {
	if k.contract.Retry.MaxAttempts < 2 {
		return "retry.max_attempts is 1: no attempt follows a fault"
	}
	return ""
}

func dedupsByKey(k *kit) string {
	if d := k.contract.Dedup; d != contract.DedupKey && d != contract.DedupUniqueCommit {
		return fmt.Sprintf("dedup %s does not promise that the destination recognises a key", d)
	}
	return ""
}

func hasInvalid(k *kit) string {
	if k.s.Invalid == nil {
		return "Subject.Invalid is not set: no payload the destination rejects"
	}
	return ""
}

// maxRetention is the longest key retention whose passing the kit waits for.
const maxRetention = 10 * time.Second

// retentionMargin is how far past the key retention the late repeat comes.
const retentionMargin = time.Second

// answerMargin is how long before its attempt times out the repeat within
// the key retention reaches the adapter, for the adapter to answer.
const answerMargin = time.Second

func shortRetention(k *kit) string {
	c := k.contract
	r := c.KeyRetention.D()
	switch {
	case c.Dedup != contract.DedupKey || r <= 0:
		return "no key_retention declared: keys are kept for ever"
	case r > maxRetention:
		return fmt.Sprintf("key_retention %s is longer than the kit waits (%s)", r, maxRetention)
	case c.Retry.MaxAttempts < 2 || c.Retry.Deadline.D() <= r+2*retentionMargin:
		return "the retry budget (max_attempts, deadline) ends before the key retention"
	case k.retryArrivesLate():
		return "a retry could reach the destination after key_retention (the first retry's wait plus retry.attempt_timeout), " +
			"so Courier parks a lost response instead of repeating the key (lost_response_same_key checks that)"
	case c.Retry.AttemptTimeout.D() <= answerMargin:
		return "retry.attempt_timeout is too short to hold the repeat back within one attempt"
	}
	return ""
}

// retryArrivesLate: the retry after a lost first answer could reach the
// destination after its key retention, so the workflow parks instead of
// sending it (contract.Next past the retention), as it decides right
// after that first attempt.
func (k *kit) retryArrivesLate() bool {
	c := k.contract
	var first time.Time
	return c.KeyExpired(first, c.RetryArrival(first, c.Retry.Interval(1)))
}

// input is the n-th delivery of a case.
func (k *kit) input(n int) workflows.DeliveryInput {
	return workflows.DeliveryInput{
		Operation: opkey.Operation{Tenant: k.tenant, Destination: k.name, Operation: "conformance", BusinessID: fmt.Sprintf("kit-%s-%d", k.run, n)},
		Payload:   k.payload(n),
	}
}

// request is an attempt of in, as the activity gives it to the adapter.
func (k *kit) request(in workflows.DeliveryInput, attempt int) (destination.Request, error) {
	fp, err := opkey.Fingerprint(in.Payload)
	if err != nil {
		return destination.Request{}, fmt.Errorf("Subject.Payload: %w", err)
	}
	return destination.Request{Key: opkey.Key(in.Operation), Fingerprint: fp, Tenant: in.Tenant, Destination: k.name,
		Operation: in.Operation.Operation, BusinessID: in.BusinessID, Payload: in.Payload,
		Attempt: attempt, Contract: k.contract}, nil
}

func (k *kit) count(ctx context.Context, key string) (int, error) {
	n, err := k.s.Count(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("Subject.Count(%s): %w", key, err)
	}
	return n, nil
}

// planned delivers the next input under fault p and counts its effects.
func (k *kit) planned(ctx context.Context, p *plan) (key string, d delivered, effects int, err error) {
	in := k.input(k.next())
	key = opkey.Key(in.Operation)
	k.faults.planFor(key, p)
	if d, err = k.deliver.deliver(ctx, in, k.reviewer(key)); err != nil {
		return key, d, 0, err
	}
	effects, err = k.count(ctx, key)
	return key, d, effects, err
}

// reviewer answers a parked delivery as a person who looked at the
// destination would: delivered, naming the effect, when the adapter made
// one; retry when nothing reached it; else abandon.
func (k *kit) reviewer(key string) reviewer {
	return func(workflows.DeliveryStatus) workflows.ReviewDecision {
		d := workflows.ReviewDecision{Reviewer: "destinationtest", Decision: workflows.DecisionAbandon, Note: "the conformance kit's answer"}
		p := k.faults.observed(key)
		switch {
		case p.first != nil:
			d.Decision, d.ResourceID = workflows.DecisionDelivered, p.first.ResourceID
		case p.fault == timeoutBefore && p.calls == 1:
			d.Decision = workflows.DecisionRetry
		}
		return d
	}
}

// attempted says how the first attempt ended, for a case that needed it to
// make the effect.
func attempted(d delivered) string {
	if len(d.result.Attempts) == 0 {
		return "no attempt"
	}
	a := d.result.Attempts[0]
	return said(a.Class, a.Error)
}

// said is an answer's class, with its error when it has one.
func said(class contract.Class, err string) string {
	if err == "" {
		return string(class)
	}
	return fmt.Sprintf("%s (%s)", class, err)
}

// ended says how a delivery ended.
func ended(d delivered) string {
	s := string(d.result.Status)
	if d.result.Error != "" {
		s += " (" + d.result.Error + ")"
	}
	return s
}

func event(d delivered, name string) bool {
	return slices.ContainsFunc(d.result.Events, func(e workflows.Event) bool { return e.Event == name })
}

// lostResponse: the first attempt makes the effect and its answer is lost.
func lostResponse(ctx context.Context, k *kit) ([]string, error) {
	key, d, effects, err := k.planned(ctx, &plan{fault: loseResponse})
	if err != nil {
		return nil, err
	}
	return k.afterLostResponse("a repeat with the same key after a lost response", key, d, effects), nil
}

// afterLostResponse is what a delivery whose first answer was lost after
// the effect must show under the declared contract: one effect, and the
// end contract.Next leads to (duplicate naming the first effect, or a
// review).
func (k *kit) afterLostResponse(repeat, key string, d delivered, effects int) []string {
	p := k.faults.observed(key)
	dc := k.declared()
	if p.first == nil {
		return []string{fmt.Sprintf("%s, but the first attempt of a new key answered %s, not created: "+
			"a working destination must make the effect and answer Created with its receipt", dc, attempted(d))}
	}
	if effects == 0 {
		return []string{fmt.Sprintf("%s, but Count finds no effect for key %s although the adapter answered created: "+
			"make Count read what the destination stored for Request.Key", dc, key)}
	}
	var msgs []string
	if event(d, "lookup_not_found") {
		msgs = append(msgs, fmt.Sprintf("%s, but after a lost response the lookup did not find the effect that exists (%d effect for key %s): "+
			"make Lookup find the effect Deliver made for Request.Key (or the payload's field the destination indexes), or declare dedup none; "+
			"the delivery then made %d effects and ended %s", dc, p.effects, key, effects, ended(d)))
	} else if effects > 1 {
		msgs = append(msgs, fmt.Sprintf("%s, but %s made a second effect: declare dedup none until it honours keys; "+
			"%d effects for key %s, the delivery ended %s", dc, repeat, effects, key, ended(d)))
	}
	if len(msgs) > 0 {
		return msgs
	}
	first := p.first.ResourceID
	switch k.contract.Next(destination.Unknown, k.retryArrivesLate()) {
	case contract.StepReview:
		if len(d.parked) == 0 {
			msgs = append(msgs, fmt.Sprintf("%s, but after a lost response the delivery ended %s without a review", dc, ended(d)))
		}
	default:
		r := d.result.Receipt
		switch {
		case d.result.Status != workflows.StatusDuplicate:
			msgs = append(msgs, fmt.Sprintf("%s, but after a lost response the delivery ended %s, not duplicate naming the first effect %s: "+
				"when a key comes again, answer Replayed with the first effect's receipt (for dedup lookup, Lookup answers Found with it)",
				dc, ended(d), first))
		case r == nil || r.ResourceID != first:
			got := "no receipt"
			if r != nil {
				got = fmt.Sprintf("%q", r.ResourceID)
			}
			msgs = append(msgs, fmt.Sprintf("%s, but after a lost response the delivery ended duplicate naming %s, not the first effect's %q: "+
				"a replay and a lookup must name the effect the first attempt made", dc, got, first))
		}
	}
	return msgs
}

// beforeEffect: the first attempt times out before it reaches the adapter.
func beforeEffect(ctx context.Context, k *kit) ([]string, error) {
	key, d, effects, err := k.planned(ctx, &plan{fault: timeoutBefore})
	if err != nil {
		return nil, err
	}
	dc := k.declared()
	switch {
	case effects == 0 && event(d, "lookup_found"):
		return []string{fmt.Sprintf("%s, but after a timeout before anything reached the destination the lookup found an effect that does not exist "+
			"(0 effects for key %s): answer Found only when the destination names the effect of Request.Key", dc, key)}, nil
	case effects != 1 || d.result.Status != workflows.StatusCreated:
		return []string{fmt.Sprintf("%s, but after a timeout before anything reached the destination the delivery ended %s with %d effects for key %s, "+
			"not created with one: the retry must make the effect and answer Created", dc, ended(d), effects, key)}, nil
	}
	return nil, nil
}

// lateAnswer is how long after its context ends an adapter may take to
// return.
const lateAnswer = time.Second

// crashed: the first attempt's context ends between the commit and the
// answer, as when its worker dies.
func crashed(ctx context.Context, k *kit) ([]string, error) {
	key, d, effects, err := k.planned(ctx, &plan{fault: crashAfterCommit})
	if err != nil {
		return nil, err
	}
	p := k.faults.observed(key)
	if !p.canceled {
		k.note("the adapter answered %s before Count saw the effect, so its context never ended between the commit and the answer: "+
			"the crash was not exercised", p.answered.Class)
	}
	dc := k.declared()
	var msgs []string
	if p.canceled && p.late > lateAnswer {
		msgs = append(msgs, fmt.Sprintf("%s, but Deliver returned %s after its context ended: return once the context ends "+
			"(Unknown when the request may have been written)", dc, p.late.Round(time.Millisecond)))
	}
	switch {
	case effects > 1 && p.answered.Class.NothingApplied():
		msgs = append(msgs, fmt.Sprintf("%s, but when its context ended between the commit and the answer the adapter answered %s, "+
			"which says nothing was applied, and the retry made a second effect (%d for key %s): answer Unknown when the request may have been "+
			"written (destination.Failed(err, true))", dc, said(p.answered.Class, p.answered.Error), effects, key))
	case effects > 1:
		msgs = append(msgs, fmt.Sprintf("%s, but a repeat with the same key after a crashed attempt made a second effect: "+
			"declare dedup none until it honours keys; %d effects for key %s, the delivery ended %s", dc, effects, key, ended(d)))
	case effects == 0:
		msgs = append(msgs, fmt.Sprintf("%s, but Count saw the effect of key %s while the attempt ran and none after it ended %s: "+
			"make Count read what the destination stored for Request.Key", dc, key, ended(d)))
	}
	return msgs, nil
}

// concurrency is how many attempts with one key run at once.
const concurrency = 20

// concurrent: 20 attempts with one key at once, straight at the adapter.
func concurrent(ctx context.Context, k *kit) ([]string, error) {
	in := k.input(k.next())
	req, err := k.request(in, 1)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, k.contract.Retry.AttemptTimeout.D())
	defer cancel()
	outs := make([]destination.Outcome, concurrency)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() {
			r := req
			r.Attempt = i + 1
			outs[i] = k.s.Adapter.Deliver(actx, r)
		})
	}
	wg.Wait()
	effects, err := k.count(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	dc := k.declared()
	ids := map[string]bool{}
	created := 0
	for _, o := range outs {
		if o.Class == destination.Created {
			created++
		}
		if (o.Class == destination.Created || o.Class == destination.Replayed) && o.Receipt != nil {
			ids[o.Receipt.ResourceID] = true
		}
	}
	var msgs []string
	switch {
	case effects > 1:
		msgs = append(msgs, fmt.Sprintf("%s, but %d concurrent attempts with one key made %d effects for key %s: make the check of the key "+
			"and the effect one atomic step (a UNIQUE key in the effect's transaction), or declare dedup none", dc, concurrency, effects, req.Key))
	case created > 1:
		msgs = append(msgs, fmt.Sprintf("%s, but %d concurrent attempts with one key answered created %d times for %d effect: "+
			"answer Replayed when the key's effect exists", dc, concurrency, created, effects))
	case len(ids) > 1:
		msgs = append(msgs, fmt.Sprintf("%s, but %d concurrent attempts with one key named %d different resource ids for %d effect: "+
			"a replay names the one effect of the key", dc, concurrency, len(ids), effects))
	}
	return msgs, nil
}

// changedPayload: a key comes again with another payload.
func changedPayload(ctx context.Context, k *kit) ([]string, error) {
	n := k.next()
	in := k.input(n)
	key := opkey.Key(in.Operation)
	d, err := k.deliver.deliver(ctx, in, k.reviewer(key))
	if err != nil {
		return nil, err
	}
	dc := k.declared()
	if d.result.Status != workflows.StatusCreated {
		return []string{fmt.Sprintf("%s, but the first delivery of a new key ended %s, not created", dc, ended(d))}, nil
	}
	other := in
	other.Payload = k.payload(k.next())
	var class, how string
	if k.deliver.repeats() {
		if d, err = k.deliver.deliver(ctx, other, k.reviewer(key)); err != nil {
			return nil, err
		}
		class, how = string(d.result.Status), ended(d)
	} else {
		// A server refuses a known operation with another payload before
		// any attempt: the adapter is asked directly.
		req, err := k.request(other, 1)
		if err != nil {
			return nil, err
		}
		actx, cancel := context.WithTimeout(ctx, k.contract.Retry.AttemptTimeout.D())
		out := k.s.Adapter.Deliver(actx, req)
		cancel()
		class, how = string(out.Class), said(out.Class, out.Error)
	}
	effects, err := k.count(ctx, key)
	if err != nil {
		return nil, err
	}
	if effects != 1 || class == string(destination.Created) || class == string(destination.Replayed) || class == string(workflows.StatusDuplicate) {
		return []string{fmt.Sprintf("%s, but the same key with another payload ended %s, %d effects for key %s: "+
			"answer Conflict when a key comes again with another payload (Request.Fingerprint differs), and make no effect", dc, how, effects, key)}, nil
	}
	return nil, nil
}

// rejected: a payload the destination refuses as invalid.
func rejected(ctx context.Context, k *kit) ([]string, error) {
	in := k.input(k.next())
	in.Payload = k.s.Invalid
	key := opkey.Key(in.Operation)
	d, err := k.deliver.deliver(ctx, in, k.reviewer(key))
	if err != nil {
		return nil, err
	}
	effects, err := k.count(ctx, key)
	if err != nil {
		return nil, err
	}
	if effects != 0 || d.result.Status != workflows.StatusRejected {
		return []string{fmt.Sprintf("%s, but a payload the destination refuses (Subject.Invalid) ended %s with %d effects for key %s: "+
			"check the request before the effect and answer Rejected", k.declared(), ended(d), effects, key)}, nil
	}
	return nil, nil
}

// aroundRetention: a repeat within the key retention is deduplicated; an
// unknown outcome after it parks rather than sending again.
func aroundRetention(ctx context.Context, k *kit) ([]string, error) {
	r := k.contract.KeyRetention.D()
	// The repeat reaches the adapter as late as Courier's first retry may:
	// after its wait, near the end of its attempt's time. Courier sends it
	// only when that is within the key retention.
	retry := k.contract.Retry
	within := retry.Interval(1) + retry.AttemptTimeout.D() - answerMargin
	key, d, effects, err := k.planned(ctx, &plan{fault: repeatLater, wait: within})
	if err != nil {
		return nil, err
	}
	msgs := k.afterLostResponse(fmt.Sprintf("a repeat with the same key %s after a lost response, within the key retention,", within), key, d, effects)
	for i, m := range msgs {
		msgs[i] = strings.Replace(m, "declare dedup none until it honours keys",
			"declare a key_retention no longer than the destination keeps keys, or dedup none", 1)
	}

	// The throttle's wait puts the lost response past the retention. On the
	// test environment's clock it passes at once: the workflow decides by
	// that clock, as on a server it decides by the server's.
	key, d, effects, err = k.planned(ctx, &plan{fault: throttleFirst, wait: r + retentionMargin})
	if err != nil {
		return nil, err
	}
	if p := k.faults.observed(key); p.first == nil {
		return append(msgs, fmt.Sprintf("%s, but the attempt after a throttled one answered %s, not created", k.declared(), attempted(d))), nil
	}
	if effects != 1 || len(d.parked) == 0 {
		msgs = append(msgs, fmt.Sprintf("%s, but a lost response past the key retention ended %s with %d effects for key %s, reviewed %d times: "+
			"past the retention the delivery must park for review with one effect", k.declared(), ended(d), effects, key, len(d.parked)))
	}
	return msgs, nil
}
