// Package probe checks that a destination does what its contract declares,
// through the same adapter a worker uses, before real deliveries depend on
// it. A `key` destination that ignores keys (the seed's "ignored" case)
// looks healthy until the first lost response, when Courier's "safe" retry
// makes a second effect; the probe makes that visible up front. The courier
// probe command runs it.
//
// What is checked, by dedup kind:
//
//	key, unique-commit  one probe operation sent twice with the same key: the
//	                    second send must replay the first receipt, naming
//	                    the same resource id
//	lookup              a lookup of the fresh key finds nothing (and lists
//	                    nothing else); one send; a lookup then finds that
//	                    effect by the same id, within the declared settle
//	                    time (it looks every tenth of it, and measures how
//	                    long the effect took to appear)
//	none                one send is accepted; a second is never made, since
//	                    it would be a second effect
package probe

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/opkey"
)

// Verdict is what the probe concluded.
type Verdict string

const (
	// Passed: the destination behaved as its contract declares.
	Passed Verdict = "passed"
	// Violation: it did not; Courier's decisions for it would be wrong.
	Violation Verdict = "contract_violation"
	// Rejected: it refused the probe payload; nothing was checked.
	Rejected Verdict = "rejected_probe_payload"
	// Inconclusive: a transport failure or an unexpected answer got in the way.
	Inconclusive Verdict = "inconclusive"
)

// Operation and Tenant name every probe operation, so probe effects are
// easy to find and delete at the destination.
const (
	Operation = "courier-probe"
	Tenant    = "courier-probe"
)

// inFlightRetries bounds how often a send answered "key in flight" is
// repeated before the probe gives up.
const inFlightRetries = 3

// Step is one request the probe made and what came back.
type Step struct {
	Action     string         `json:"action"`
	Class      contract.Class `json:"class,omitempty"`
	StatusCode int            `json:"status_code,omitempty"`
	ResourceID string         `json:"resource_id,omitempty"`
	Found      *bool          `json:"found,omitempty"`
	Error      string         `json:"error,omitempty"`
	// Read is what the adapter read at each declared place in the answer.
	Read []destination.Read `json:"read,omitempty"`
}

// Report is the probe's finding.
type Report struct {
	Destination string          `json:"destination"`
	Dedup       contract.Dedup  `json:"dedup"`
	Operation   string          `json:"operation"`
	Tenant      string          `json:"tenant"`
	BusinessID  string          `json:"business_id"`
	Key         string          `json:"key"`
	Payload     json.RawMessage `json:"payload"`
	Verdict     Verdict         `json:"verdict"`
	// Finding says in a sentence what the destination did and what it means.
	Finding string `json:"finding"`
	// Checked says what was checked for this dedup kind.
	Checked string `json:"checked"`
	// Warnings are problems that do not fail the probe.
	Warnings []string `json:"warnings,omitempty"`
	Steps    []Step   `json:"steps"`
	// Effects are the probe effects the destination now holds (resource
	// ids), to recognise and delete.
	Effects []string `json:"effects"`
	// Settle, for a lookup destination, is its declared settle time, and
	// Appeared how long after the send's answer the lookup first found
	// the effect (to within one look's interval).
	Settle   string `json:"settle,omitempty"`
	Appeared string `json:"appeared_after,omitempty"`
}

// Options of a probe run.
type Options struct {
	// BusinessID of the probe operation; empty: NewBusinessID().
	BusinessID string
	// Payload to send; empty: DefaultPayload(BusinessID). Destinations that
	// validate their payloads need one they accept.
	Payload json.RawMessage
}

// Placeholders a probe payload may carry in its strings: a destination
// whose lookup matches a field the caller sets (an external id) finds the
// probe's effect only when the payload carries the probe's own key or
// business id there.
const (
	PlaceholderKey        = "{key}"
	PlaceholderBusinessID = "{business_id}"
)

// Expand replaces the placeholders in every string of payload, a JSON
// object, with the probe's key and business id.
func Expand(payload json.RawMessage, key, businessID string) (json.RawMessage, error) {
	if !bytes.Contains(payload, []byte(PlaceholderKey)) && !bytes.Contains(payload, []byte(PlaceholderBusinessID)) {
		return payload, nil
	}
	var doc any
	if err := json.Unmarshal(payload, &doc); err != nil {
		return nil, fmt.Errorf("probe payload: not JSON: %w", err)
	}
	r := strings.NewReplacer(PlaceholderKey, key, PlaceholderBusinessID, businessID)
	var expand func(v any) any
	expand = func(v any) any {
		switch v := v.(type) {
		case string:
			return r.Replace(v)
		case map[string]any:
			for k, e := range v {
				v[k] = expand(e)
			}
		case []any:
			for i, e := range v {
				v[i] = expand(e)
			}
		}
		return v
	}
	return json.Marshal(expand(doc))
}

// NewBusinessID is unique per run, so every probe uses a key never used
// before and a replay can only come from this run's first send.
func NewBusinessID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("courier-probe-%s-%s", now.UTC().Format("20060102T150405Z"), hex.EncodeToString(b[:]))
}

// DefaultPayload is a ticket an operator recognises as a probe: the sandbox
// helpdesk's shape (request_id, subject), saying it is safe to delete.
func DefaultPayload(businessID string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"request_id":    businessID,
		"subject":       "Courier probe " + businessID + ": checks the destination's idempotency contract; safe to delete",
		"courier_probe": true,
	})
	return b
}

// Run probes destination name through its adapter.
func Run(ctx context.Context, name string, d destinations.Destination, ad destination.Adapter, o Options) (Report, error) {
	if o.BusinessID == "" {
		o.BusinessID = NewBusinessID(time.Now())
	}
	if len(o.Payload) == 0 {
		o.Payload = DefaultPayload(o.BusinessID)
	}
	op := opkey.Operation{Tenant: Tenant, Destination: name, Operation: Operation, BusinessID: o.BusinessID}
	if err := op.Validate(); err != nil {
		return Report{}, err
	}
	key := opkey.Key(op)
	payload, err := Expand(o.Payload, key, op.BusinessID)
	if err != nil {
		return Report{}, err
	}
	o.Payload = payload
	fp, err := opkey.Fingerprint(o.Payload)
	if err != nil {
		return Report{}, err
	}
	p := &prober{
		ad: ad, c: d.Contract, rules: d.Rules, reading: d.Lookup,
		req: destination.Request{
			Key: key, Fingerprint: fp, Tenant: op.Tenant, Destination: name,
			Operation: op.Operation, BusinessID: op.BusinessID, Payload: o.Payload, Contract: d.Contract,
		},
		r: Report{
			Destination: name, Dedup: d.Contract.Dedup, Operation: op.Operation, Tenant: op.Tenant,
			BusinessID: op.BusinessID, Payload: o.Payload, Steps: []Step{}, Effects: []string{},
		},
	}
	p.r.Key = p.req.Key
	switch d.Contract.Dedup {
	case contract.DedupKey, contract.DedupUniqueCommit:
		p.replays(ctx)
	case contract.DedupLookup:
		p.lookup(ctx)
	case contract.DedupNone:
		p.none(ctx)
	default:
		return Report{}, fmt.Errorf("destination %q: dedup %q cannot be probed", name, d.Contract.Dedup)
	}
	return p.r, nil
}

type prober struct {
	ad      destination.Adapter
	c       contract.Contract
	rules   []destinations.Rule
	reading *destinations.LookupReading
	req     destination.Request
	r       Report
}

func (p *prober) conclude(v Verdict, format string, args ...any) {
	p.r.Verdict, p.r.Finding = v, fmt.Sprintf(format, args...)
}

// send makes one attempt, repeating it while the destination says the key
// is in flight (nothing applied, safe with any contract).
func (p *prober) send(ctx context.Context, action string) destination.Outcome {
	var out destination.Outcome
	for i := 0; i <= inFlightRetries; i++ {
		p.req.Attempt++
		out = p.ad.Deliver(ctx, p.req)
		s := Step{Action: action, Class: out.Class, StatusCode: out.StatusCode, Error: out.Error, Read: out.Reads}
		if out.Receipt != nil {
			s.ResourceID = out.Receipt.ResourceID
		}
		p.r.Steps = append(p.r.Steps, s)
		if out.Class != contract.ClassInFlight {
			break
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(time.Second):
		}
	}
	if out.Class == contract.ClassCreated || out.Class == contract.ClassReplayed {
		p.addEffect(out.Receipt)
	}
	return out
}

func (p *prober) addEffect(r *destination.Receipt) {
	id := "(no resource id in the receipt)"
	if r != nil && r.ResourceID != "" {
		id = r.ResourceID
	}
	for _, e := range p.r.Effects {
		if e == id {
			return
		}
	}
	p.r.Effects = append(p.r.Effects, id)
}

// first sends the probe once and concludes when it did not create anything.
func (p *prober) first(ctx context.Context) (destination.Outcome, bool) {
	out := p.send(ctx, "send 1")
	switch out.Class {
	case contract.ClassCreated:
		return out, true
	case contract.ClassRejected:
		p.conclude(Rejected, "the destination refused the probe payload (%s); nothing was created. "+
			"Pass a payload it accepts with --payload", out.Error)
	case contract.ClassReplayed:
		p.conclude(Violation, "the first send of a key never used before came back as a replay (status %d): "+
			"%s also matches new effects, so Courier would report every delivery as a duplicate",
			out.StatusCode, p.replayRecognisedBy(out.StatusCode))
	default:
		p.conclude(Inconclusive, "the first send did not get a receipt (%s: %s); run the probe again when the destination is reachable",
			out.Class, out.Error)
	}
	return out, false
}

func (p *prober) replays(ctx context.Context) {
	p.r.Checked = "sent one probe operation twice with the same key: the second send must replay the first receipt"
	if p.c.Dedup == contract.DedupUniqueCommit {
		p.r.Checked = "inserted one probe operation twice with the same key: the second insert must hit the UNIQUE key and replay the first receipt"
	}
	one, ok := p.first(ctx)
	if !ok {
		return
	}
	two := p.send(ctx, "send 2 (same key, same payload)")
	id1, id2 := resourceID(one.Receipt), resourceID(two.Receipt)
	switch two.Class {
	case contract.ClassReplayed:
		switch {
		case id2 == "":
			p.conclude(Violation, "the second send was read as a replay (by %s) but names no resource id: a delivery whose response was lost "+
				"could not name the original effect and would never end duplicate; declare where the replay's id is "+
				"(receipt.id, or that rule's receipt.id)", p.replayRecognisedBy(two.StatusCode))
			return
		case id1 == "":
			p.conclude(Inconclusive, "the first send's receipt names no resource id, so the replay's %s cannot be compared with it: "+
				"declare where the created answer's id is (receipt.id)", id2)
			return
		case id1 != id2:
			p.conclude(Violation, "the second send was read as a replay but names another resource (%s, then %s): "+
				"either the destination ignores the key and made two effects, or the replay's id is read from the wrong place "+
				"(see what was read at each pointer above)", id1, id2)
			return
		}
		p.conclude(Passed, "replays: the second send with the same key returned the first receipt (%s), recognised as a replay by %s, and made no second effect",
			id1, p.replayRecognisedBy(two.StatusCode))
	case contract.ClassCreated:
		if id1 == "" || id2 == "" {
			p.conclude(Inconclusive, "both sends answered as new and the receipts carry no resource id to compare: "+
				"look for two effects with business id %s at the destination (two: it ignores the key)", p.req.BusinessID)
			return
		}
		if id1 == id2 {
			if p.c.ReplayMarker == nil {
				p.conclude(Passed, "replays without a marker: the second send returned the first receipt (%s) as if new, and made no second effect", id1)
				p.r.Warnings = append(p.r.Warnings,
					"no replay_marker is declared: after a lost response Courier reports the repeat as created, not duplicate (still one effect, the first receipt); "+
						"if the destination marks replays, set replay_marker to what it sends (or write a rule naming replayed)")
				return
			}
			p.conclude(Passed, "replays: the second send returned the first receipt (%s), but without the declared replay marker", id1)
			p.r.Warnings = append(p.r.Warnings, fmt.Sprintf(
				"the replay was not recognised (replay_marker %s): Courier reports a repeat as created, not duplicate; set replay_marker to what the destination sends",
				markerString(p.c.ReplayMarker)))
			return
		}
		p.conclude(Violation, "CONTRACT VIOLATION: the destination ignores the key: two sends with the same %s made two effects (%s and %s). "+
			"After a lost response Courier would retry with the same key and duplicate the effect. "+
			"Declare dedup none (an unknown outcome then stops for review) until the provider honours keys",
			keyName(p.c), orNone(id1), orNone(id2))
	case contract.ClassConflict:
		p.conclude(Violation, "the second send of the same payload was refused as a reused key (%s): "+
			"Courier would end a retried delivery as conflict instead of duplicate", two.Error)
	case contract.ClassRejected:
		p.conclude(Violation, "the second send was rejected (%s) although the first created %s: "+
			"Courier would report a retried delivery as rejected while its effect exists", two.Error, orNone(id1))
	default:
		p.conclude(Inconclusive, "the second send got no answer to judge (%s: %s); the first created %s. Run the probe again",
			two.Class, two.Error, orNone(id1))
	}
}

func (p *prober) lookup(ctx context.Context) {
	p.r.Checked = "looked the fresh key up (must be not found, listing nothing else), sent the probe once, looked it up again " +
		"until found (must find that effect by its id, within the declared settle time); not sent twice: the destination does not deduplicate"
	before, err := p.find(ctx, "lookup before sending")
	switch {
	case errors.Is(err, destination.ErrUnreadable):
		p.conclude(Violation, "the lookup's answer for a key never used cannot be read: %v. After a lost response every delivery "+
			"would park for review. %s", err, p.readingAdvice())
		return
	case err != nil:
		p.conclude(Inconclusive, "the lookup failed before anything was sent: %v; check lookup_url", err)
		return
	case before.Found:
		p.conclude(Violation, "CONTRACT VIOLATION: the lookup found an effect (%s) for a key never used: after a lost response Courier would "+
			"report duplicate for a delivery that never happened. %s", orNone(resourceID(before.Receipt)), p.readingAdvice())
		return
	case before.Listed > 0:
		p.conclude(Violation, "CONTRACT VIOLATION: the lookup for a key never used listed %d records of other effects: it does not filter by the key, "+
			"so an effect past the answer's first page would not be found and Courier would send again. Check that lookup_url's query "+
			"filters by {key}", before.Listed)
		return
	}
	one, ok := p.first(ctx)
	if !ok {
		return
	}
	settle := p.c.SettleTime()
	p.r.Settle = settle.String()
	after, appeared, missed, err := p.appear(ctx, settle)
	id, found := resourceID(one.Receipt), resourceID(after.Receipt)
	switch {
	case errors.Is(err, destination.ErrUnreadable):
		p.conclude(Violation, "the probe created %s but the lookup's answer cannot be read: %v. After a lost response the delivery "+
			"would park for review instead of ending duplicate. %s", orNone(id), err, p.readingAdvice())
	case err != nil:
		p.conclude(Inconclusive, "the probe created %s but the lookup failed: %v", orNone(id), err)
	case !after.Found:
		p.conclude(Violation, "CONTRACT VIOLATION: the lookup does not find the effect just created (%s) by its key, "+
			"looking for %s (the declared settle is %s): after a lost response Courier would find nothing and send again, "+
			"duplicating the effect", orNone(id), lookFor(settle), settle)
	case missed >= settle:
		p.conclude(Violation, "CONTRACT VIOLATION: the effect (%s) appeared to the lookup only %s after the send was answered, "+
			"and it was still missing %s after it: the declared settle of %s is shorter. After a lost response Courier would "+
			"look too soon, find nothing and send again, duplicating the effect. Declare a settle of at least %s, with a margin",
			orNone(id), p.r.Appeared, missed.Round(time.Millisecond), settle, p.r.Appeared)
	case id != "" && found != id:
		p.conclude(Violation, "CONTRACT VIOLATION: the lookup names another effect (%s) than the one created (%s): "+
			"either it finds the wrong record or its id is read from the wrong place (see what was read at each pointer above)", found, id)
	default:
		p.conclude(Passed, "lookup works: the fresh key was not found, the probe created %s, and the lookup by key then found %s, "+
			"%s after the send was answered, within the declared settle of %s", orNone(id), found, p.r.Appeared, settle)
		if appeared >= settle/2 {
			p.r.Warnings = append(p.r.Warnings, fmt.Sprintf(
				"the effect took %s to appear, half the declared settle of %s or more: a slower moment of the destination "+
					"may take longer; declare more margin", p.r.Appeared, settle))
		}
		if id == "" {
			p.r.Warnings = append(p.r.Warnings, fmt.Sprintf(
				"the created answer names no resource id, so the lookup's %s could not be compared with it; declare receipt.id", found))
		}
	}
}

// readingAdvice says what to declare so a lookup's answer names the effect.
func (p *prober) readingAdvice() string {
	switch {
	case p.reading == nil:
		return "Without a lookup reading a 2xx answer must be the effect itself, with its id at receipt.id; for a list or search " +
			"endpoint declare lookup.items (where the records are) and lookup.match (the record's field that holds the key)"
	case p.reading.Match == nil:
		return "Declare lookup.match, so that only a record that carries the key counts"
	}
	return "Check lookup_url filters by {key} and the lookup's pointers (see what was read at each above)"
}

// lookFor bounds how long the probe looks for the effect it sent: past
// the settle time, long enough to measure a destination that needs more.
func lookFor(settle time.Duration) time.Duration { return settle + max(settle, 5*time.Second) }

// lookEvery is how often the probe looks for the effect it sent, elapsed
// after sending: a tenth of the settle time, or of the time elapsed once
// past it, so the time it measures is that close.
func lookEvery(settle, elapsed time.Duration) time.Duration {
	return min(max(max(settle, elapsed)/10, 10*time.Millisecond), time.Second)
}

// appear looks the effect just sent up until the lookup finds it, for up to
// lookFor(settle), and records how long after the send it first did
// (appeared, Report.Appeared). missed is how long after the send the last
// look that did not find it was made.
func (p *prober) appear(ctx context.Context, settle time.Duration) (f destination.Found, appeared, missed time.Duration, err error) {
	sent := time.Now()
	for n := 1; ; n++ {
		at := time.Since(sent)
		f, err = p.lookupEffect(ctx)
		if err != nil || f.Found || at >= lookFor(settle) {
			s := Step{Action: fmt.Sprintf("lookup after sending (look %d, %s)", n, at.Round(time.Millisecond)), Found: &f.Found, Read: f.Reads}
			if err != nil {
				s.Error, s.Found = err.Error(), nil
			}
			if f.Receipt != nil {
				s.ResourceID = f.Receipt.ResourceID
			}
			p.r.Steps = append(p.r.Steps, s)
			if err == nil && f.Found {
				appeared = at.Round(time.Millisecond)
				p.r.Appeared = appeared.String()
			}
			return f, appeared, missed, err
		}
		missed = at
		select {
		case <-ctx.Done():
			return f, 0, missed, ctx.Err()
		case <-time.After(lookEvery(settle, at)):
		}
	}
}

func (p *prober) find(ctx context.Context, action string) (destination.Found, error) {
	f, err := p.lookupEffect(ctx)
	s := Step{Action: action, Found: &f.Found, Read: f.Reads}
	if err != nil {
		s.Error = err.Error()
		s.Found = nil
	}
	if f.Receipt != nil {
		s.ResourceID = f.Receipt.ResourceID
	}
	p.r.Steps = append(p.r.Steps, s)
	return f, err
}

func (p *prober) none(ctx context.Context) {
	p.r.Checked = "sent the probe once and checked it was accepted; not sent twice (that would be a second effect). " +
		"With dedup none Courier never retries an unknown outcome: it stops for review"
	one, ok := p.first(ctx)
	if !ok {
		return
	}
	p.conclude(Passed, "accepted the probe (%s); nothing else to check for dedup none", orNone(resourceID(one.Receipt)))
}

// lookupEffect asks the adapter's Lookup, which every lookup destination's
// adapter has.
func (p *prober) lookupEffect(ctx context.Context) (destination.Found, error) {
	lk, ok := p.ad.(destination.Lookuper)
	if !ok {
		return destination.Found{}, fmt.Errorf("the adapter has no Lookup: %w", destination.ErrUnreadable)
	}
	return lk.Lookup(ctx, p.req)
}

func resourceID(r *destination.Receipt) string {
	if r == nil {
		return ""
	}
	return r.ResourceID
}

func orNone(id string) string {
	if id == "" {
		return "an effect without a resource id"
	}
	return id
}

func keyName(c contract.Contract) string {
	switch {
	case c.KeyHeader != "" && c.KeyField != "":
		return fmt.Sprintf("%s and body field %s", c.KeyHeader, c.KeyField)
	case c.KeyHeader != "":
		return c.KeyHeader
	case c.KeyField != "":
		return "key in body field " + string(c.KeyField)
	}
	return "key"
}

// replayRecognisedBy names what made an answer of this status a replay:
// the first rule naming replayed for it, else the replay marker.
func (p *prober) replayRecognisedBy(status int) string {
	for i, r := range p.rules {
		if r.Class == contract.ClassReplayed && r.Status.Contains(status) {
			return fmt.Sprintf("rules[%d] (status %s)", i, r.Status)
		}
	}
	return "replay_marker " + markerString(p.c.ReplayMarker)
}

func markerString(m *contract.ReplayMarker) string {
	switch {
	case m == nil:
		return "(none declared)"
	case m.Header != "" && len(m.Values) > 0:
		return fmt.Sprintf("header %s: one of %s", m.Header, strings.Join(m.Values, ", "))
	case m.Header != "" && m.Value == "":
		return fmt.Sprintf("header %s present", m.Header)
	case m.Header != "":
		return fmt.Sprintf("header %s: %s", m.Header, m.Value)
	}
	return fmt.Sprintf("status %d", m.Status)
}
