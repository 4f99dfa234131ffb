package workflows

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/internal/text"
	"github.com/abde64c9/courier/opkey"
)

// What the web UI shows of a delivery: its current details (Markdown), and
// the summaries of its activities and timers. None of it is a decision:
// replay does not check it, so it may read the worker's destinations file.

const (
	// detailAttempts is how many of the latest attempts the details list.
	detailAttempts = 5
	// detailErrorLen bounds an error quoted in the details.
	detailErrorLen = 300
)

// ReviewCommands are the three decisions of a parked delivery as commands,
// its placeholders ones a shell and the validator refuse.
func ReviewCommands(key string) string {
	review := "courier review " + key
	return text.Command(review, "--decision delivered", "--resource-id <ID-YOU-FOUND>", "--reviewer <YOUR-NAME>", `--note "found it"`) + "\n\n" +
		text.Command(review, "--decision retry", "--reviewer <YOUR-NAME>", `--note "it is not there"`) + "\n\n" +
		text.Command(review, "--decision abandon", "--reviewer <YOUR-NAME>", `--note "why"`)
}

// ResumeCommand resumes a destination: it ends a pause and closes an open
// breaker at once, and the gate releases the deliveries held there.
func ResumeCommand(dest string) string {
	return text.Command("courier destination resume "+text.Shell(dest), "--by <YOUR-NAME>", `--note "why"`)
}

// reviewTemplate is the review update's input, for the web UI's Send an
// Update dialog, over lines that fit the details panel.
const reviewTemplate = `{
  "decision": "delivered",
  "resource_id": "<ID-YOU-FOUND>",
  "reviewer": "<YOUR-NAME>",
  "note": "found it"
}`

// UIWorkflowPath is the web UI's page of the latest run of a workflow ID.
func UIWorkflowPath(namespace, workflowID string) string {
	return fmt.Sprintf("/namespaces/%s/workflows/%s", url.PathEscape(namespace), url.PathEscape(workflowID))
}

// UIListPath is the web UI's list of the workflows a visibility query matches.
func UIListPath(namespace, query string) string {
	return fmt.Sprintf("/namespaces/%s/workflows?query=%s", url.PathEscape(namespace), url.QueryEscape(query))
}

// Summary is the web UI's one-line summary of a delivery, set by whoever
// starts it: the operation, destination, business id and tenant. The key
// is the page's title (the workflow ID); the current details say the rest,
// so a delivery starts without static details, which would repeat these.
func Summary(op opkey.Operation) string {
	// The web UI renders it as Markdown: the caller's values stay text.
	s := fmt.Sprintf("%s → %s · %s", text.Markdown(op.Operation), text.Markdown(op.Destination), text.Markdown(op.BusinessID))
	if op.Tenant != "" {
		s += " (" + text.Markdown(op.Tenant) + ")"
	}
	return s
}

// details is the delivery's current details: the state and why in one
// line, the facts, the latest attempts, and what an operator can do.
func (d *delivery) details() string {
	var b strings.Builder
	b.WriteString(d.headline())
	b.WriteString(fmt.Sprintf("\n\n%s → %s · tenant %s · business id %s · key %s",
		text.Markdown(d.in.Operation.Operation), text.Markdown(d.in.Destination), text.Code(d.in.Tenant), text.Code(d.in.BusinessID), text.Code(d.res.Key)))
	if c := d.recorded(); c != nil {
		b.WriteString(fmt.Sprintf("\n\ndedup %s · %d attempts within %s", c.Dedup, d.budgetOr(c), c.Retry.Deadline))
		if c.KeyRetention > 0 {
			b.WriteString(fmt.Sprintf(" · keys kept %s", c.KeyRetention))
		}
		if s := c.SettleTime(); s > 0 {
			b.WriteString(fmt.Sprintf(" · looked up %s after an unknown outcome", s))
		}
	}
	if d.namespace != "" {
		q := fmt.Sprintf(`%s="%s"`, SABusinessID.GetName(), d.in.BusinessID)
		b.WriteString(fmt.Sprintf(" · [every delivery of this business id](%s)", UIListPath(d.namespace, q)))
	}
	if d.held != nil {
		b.WriteString(d.heldHelp())
	}
	if n := len(d.res.Attempts); n > 0 {
		b.WriteString("\n\n**Attempts**\n")
		from := max(0, n-detailAttempts)
		if from > 0 {
			b.WriteString(fmt.Sprintf("\n- … %d earlier", from))
		}
		for _, at := range d.res.Attempts[from:] {
			b.WriteString(fmt.Sprintf("\n- %d: %s", at.Number, at.Class))
			if at.StatusCode != 0 {
				b.WriteString(fmt.Sprintf(", HTTP %d", at.StatusCode))
			}
			if at.Error != "" {
				b.WriteString(", " + text.Code(text.Excerpt(at.Error, detailErrorLen)))
			}
			b.WriteString(fmt.Sprintf(" (%s, %s)", at.Started.UTC().Format(time.TimeOnly), at.Ended.Sub(at.Started).Round(time.Millisecond)))
		}
	}
	if d.waiting() && d.policy() != nil {
		b.WriteString("\n\n**Evidence**\n\n" + text.Fence(text.Wrap(d.res.Review.Evidence, text.FenceWidth)))
		b.WriteString("\n\nCheck the destination for the effect, then decide one of (" + text.Markdown(d.policy().Source) +
			" sign their decisions: run it with your key file in `$COURIER_REVIEWER_KEY`, or add `--key FILE`):\n\n" +
			text.Fence(ReviewCommands(d.res.Key)))
		b.WriteString("\n\nor here: More Actions → **Send an Update**, name `review`, with the signed decision that this prints " +
			"(it carries `proof`; the update refuses a decision without a valid one and says why):\n\n" +
			text.Fence(text.Command("courier review "+d.res.Key, "--decision retry", "--reviewer <YOUR-NAME>", `--note "why"`, "--print")))
	} else if d.waiting() {
		b.WriteString("\n\n**Evidence**\n\n" + text.Fence(text.Wrap(d.res.Review.Evidence, text.FenceWidth)))
		b.WriteString("\n\nCheck the destination for the effect, then decide one of:\n\n" + text.Fence(ReviewCommands(d.res.Key)))
		b.WriteString("\n\nor here: More Actions → **Send an Update** (not Send a Signal: the update refuses a bad decision " +
			"and says why, a signal is ignored silently), name `review`, with:\n\n" + text.Fence(reviewTemplate) +
			"\n\n(`decision` is `retry`, `delivered` or `abandon`; `resource_id` only with `delivered`.)" +
			"\n\nMany parked here at once (after an outage): preview, then decide them in one batch job:\n\n" +
			text.Fence(text.Command("courier review --all", "--destination "+text.Shell(d.in.Destination), "--decision retry",
				"--reviewer <YOUR-NAME>", `--note "why"`, "--dry-run")))
	}
	if r := d.res.Review; r != nil {
		if rec, ok := lastDecision(r, true); ok {
			found := ""
			if rec.ResourceID != "" {
				found = ", resource " + text.Code(rec.ResourceID)
			}
			b.WriteString(fmt.Sprintf("\n\nLast decision: **%s**%s by %s at %s (%s): %s", rec.Decision, found, decider(rec),
				text.UTC(rec.Received), via(rec), text.Code(rec.Note)))
		}
		if rec, ok := lastDecision(r, false); ok {
			b.WriteString(fmt.Sprintf("\n\nIgnored %d decision(s); the last (%s): %s", r.Ignored, via(rec), text.Code(rec.Reason)))
		}
	}
	b.WriteString("\n\nThe full record: Queries → `status`." + text.DetailsEnd)
	return b.String()
}

// headline is the state and why, in one line.
func (d *delivery) headline() string {
	st := "**" + strings.ReplaceAll(d.stateName(), "_", " ") + "**"
	n := len(d.res.Attempts)
	switch {
	case d.res.Status == StatusCreated || d.res.Status == StatusDuplicate:
		s := st + ": " + text.Markdown(d.in.Destination)
		if d.res.Status == StatusDuplicate {
			s += " already had it"
		}
		if r := d.res.Receipt; r != nil {
			s += ", resource " + text.Code(r.ResourceID)
			switch r.Source {
			case activities.SourceReplayed:
				s += " (named by its replay)"
			case activities.SourceLookup:
				s += " (found by lookup)"
			case activities.SourceLedger:
				s += " (recorded by an earlier run in the outcome ledger)"
			}
		}
		return s
	case d.res.Status == StatusDeliveredByReview || d.res.Status == StatusAbandoned:
		if rec, ok := lastDecision(d.res.Review, true); ok {
			s := fmt.Sprintf("%s: decided by %s", st, decider(rec))
			if rec.ResourceID != "" {
				s += ", resource " + text.Code(rec.ResourceID) // the effect the reviewer found
			}
			return s + ": " + text.Code(rec.Note)
		}
	case d.res.Status == StatusCanceled:
		return st + ": " + text.Code(text.Excerpt(d.res.Error, detailErrorLen))
	case d.res.Status != "":
		return st + ": nothing was delivered: " + text.Code(text.Excerpt(d.res.Error, detailErrorLen))
	case d.waiting():
		return st + ": " + text.Markdown(d.reason)
	case d.held != nil:
		s := st + ": " + text.Markdown(d.held.Reason)
		if !d.held.Until.IsZero() {
			s += " (until " + text.UTC(d.held.Until) + ")"
		}
		return s + "; nothing is sent, and waiting spends no attempt and no deadline"
	case d.state == StateRetryWait && n > 0:
		return fmt.Sprintf("%s: attempt %d ended %s; attempt %d next", st, n, d.res.Attempts[n-1].Class, n+1)
	case d.state == StateReconciling:
		return fmt.Sprintf("%s: asking %s whether attempt %d took effect", st, text.Markdown(d.in.Destination), n)
	}
	return fmt.Sprintf("%s: attempt %d → %s", st, n+1, text.Markdown(d.in.Destination))
}

// heldHelp is what a held delivery's details add: its destination's gate,
// the deliveries held with it, and the command that releases them.
func (d *delivery) heldHelp() string {
	h, dest := d.held, text.Markdown(d.in.Destination)
	s := fmt.Sprintf("\n\n**Held at [%s's gate](%s)** · [every delivery held at %s](%s)\n\n", dest,
		UIWorkflowPath(d.namespace, GateIDPrefix+d.in.Destination), dest, UIListPath(d.namespace, HeldQuery(d.in.Destination)))
	switch {
	case h.State == string(StatePaused) && !h.Until.IsZero():
		s += fmt.Sprintf("%s is paused until %s, then resumes by itself. Resume it sooner, which releases every delivery held there, with:", dest, text.UTC(h.Until))
	case h.State == string(StatePaused):
		s += fmt.Sprintf("%s is paused until an operator resumes it, which releases every delivery held there:", dest)
	case !h.Until.IsZero():
		s += fmt.Sprintf("Its breaker lets one probe attempt through at %s; if %s answers, the breaker closes and releases "+
			"every delivery held there. If you know %s is back, resuming it closes the breaker at once:", text.UTC(h.Until), dest, dest)
	default:
		s += "Its breaker lets no probe through until an operator resumes it, which closes the breaker and releases every delivery held there:"
	}
	return s + "\n\n" + text.Fence(ResumeCommand(d.in.Destination))
}

// waiting: parked, no decision yet.
func (d *delivery) waiting() bool {
	return d.state == StateAwaitingReview && d.res.Status == "" && d.res.Review != nil && d.decision == nil
}

// decider names who made a decision: the verified principal and the rule
// that allowed it, or the name the decision gave.
func decider(rec ReviewRecord) string {
	if rec.Principal != "" {
		return text.Code(rec.Principal) + " (verified: " + text.Markdown(rec.Policy) + ")"
	}
	return text.Code(rec.Reviewer)
}

// via says how a decision came.
func via(rec ReviewRecord) string {
	if rec.SignedJob {
		return "via " + rec.Via + " from signed batch job " + text.Code(rec.BatchJob)
	}
	return "via " + rec.Via
}

// lastDecision is the latest accepted (or ignored) decision recorded.
func lastDecision(r *Review, accepted bool) (ReviewRecord, bool) {
	if r == nil {
		return ReviewRecord{}, false
	}
	for i := len(r.Decisions) - 1; i >= 0; i-- {
		if r.Decisions[i].Accepted == accepted {
			return r.Decisions[i], true
		}
	}
	return ReviewRecord{}, false
}

// parkReason says in one line why a delivery parks, for the details'
// headline and the notifier.
func (d *delivery) parkReason(out activities.Outcome, c contract.Contract, keyExpired bool) string {
	n := len(d.res.Attempts)
	switch out.Class {
	case contract.ClassEarlierRun:
		return "an earlier run of this operation may have sent it, and this run may not send again unchecked: check the destination"
	case contract.ClassUnconfigured:
		return fmt.Sprintf("destination %s is no longer configured on the workers: restore it, or check the destination", d.in.Destination)
	}
	if keyExpired && out.Class.NothingApplied() {
		return d.retentionReason(c)
	}
	s := fmt.Sprintf("attempt %d ended %s", n, out.Class)
	switch out.Class {
	case contract.ClassUnknown:
		s = fmt.Sprintf("attempt %d lost its response after the request was (or may have been) written", n)
	case contract.ClassServerError:
		s = fmt.Sprintf("attempt %d got HTTP %d, which does not say that nothing was applied", n, out.StatusCode)
	}
	if keyExpired {
		return fmt.Sprintf("%s; a retry would arrive after %s's key retention of %s, when it may no longer recognise the key, so it could apply it twice: check the destination",
			s, d.in.Destination, c.KeyRetention)
	}
	return fmt.Sprintf("%s; %s (dedup %s) cannot tell whether it applied: check the destination", s, d.in.Destination, c.Dedup)
}

// attemptSummary names attempt n in the history: of how many, where, and
// how the destination deduplicates. After a hold it says what the activity
// is first: a look at the gate, which may hold it again and send nothing.
func (d *delivery) attemptSummary(n int) string {
	c := d.recorded()
	if c == nil {
		if dest, ok := d.destinations[d.in.Destination]; ok {
			c = &dest.Contract
		}
	}
	attempt, dest, dedup := fmt.Sprintf("attempt %d", n), text.Markdown(d.in.Destination), ""
	if c != nil {
		attempt, dedup = fmt.Sprintf("attempt %d of %d", n, d.budgetOr(c)), fmt.Sprintf(" (dedup %s)", c.Dedup)
	}
	switch {
	case d.released:
		return fmt.Sprintf("%s → %s%s, released by its gate", attempt, dest, dedup)
	case d.heldLast:
		return fmt.Sprintf("look at %s's gate; %s if it admits", dest, attempt)
	}
	return fmt.Sprintf("%s → %s%s", attempt, dest, dedup)
}

// backoffSummary names the wait before attempt n+1 and what caused it.
func backoffSummary(wait time.Duration, n int, out activities.Outcome) string {
	s := fmt.Sprintf("backoff %s before attempt %d (%s", wait, n+1, out.Class)
	if out.StatusCode != 0 {
		s += fmt.Sprintf(", HTTP %d", out.StatusCode)
	}
	if out.RetryAfter > 0 {
		s += fmt.Sprintf(", Retry-After %s", out.RetryAfter)
	}
	return s + ")"
}

// budgetOr is the attempts this delivery may make: its running budget, or
// before the first decision about one, the contract's.
func (d *delivery) budgetOr(c *contract.Contract) int {
	if d.budget > 0 {
		return d.budget
	}
	return c.Retry.MaxAttempts
}
