package gate

import (
	"fmt"
	"strings"

	"github.com/abde64c9/courier/internal/text"
	"github.com/abde64c9/courier/workflows"
)

// What the web UI shows on a gate's page: its current details (Markdown),
// set at start and after every change. They are built from the gate's state
// and namespace alone; reasons, names and errors came from operators and
// workers, so they are escaped.

const (
	// detailTransitions is how many of the latest transitions the details list.
	detailTransitions = 5
	// detailErrorLen bounds a reported error quoted in the details.
	detailErrorLen = 300
)

// details is the gate's current details: the state and why in one line, the
// breaker, the deliveries waiting on it, the command that changes it, and
// what it heard and did last.
func details(s DestinationState, namespace string) string {
	name := text.Markdown(s.Name)
	var b strings.Builder
	b.WriteString(headline(s))
	b.WriteString("\n\n" + breakerLine(s.Breaker))
	b.WriteString(fmt.Sprintf("\n\n[deliveries held at %s](%s) · [deliveries parked at %s](%s)",
		name, workflows.UIListPath(namespace, workflows.HeldQuery(s.Name)),
		name, workflows.UIListPath(namespace, workflows.ParkedQuery(s.Name))))
	resume := workflows.ResumeCommand(s.Name)
	pause := text.Command("courier destination pause "+text.Shell(s.Name), `--reason "why"`, "--by <YOUR-NAME>")
	if s.Signed {
		resume = text.Command("courier destination resume "+text.Shell(s.Name), "--key <YOUR-KEY-FILE>", `--note "why"`)
		pause = text.Command("courier destination pause "+text.Shell(s.Name), `--reason "why"`, "--key <YOUR-KEY-FILE>")
	}
	switch s.State {
	case Paused:
		b.WriteString("\n\nTo resume it, which also closes its breaker if open and releases every delivery held here:\n\n" +
			text.Fence(resume))
	case Open, HalfOpen:
		b.WriteString("\n\nTo close the breaker now, without waiting for the probe, when you know " + name +
			" is back (it releases every delivery held here):\n\n" + text.Fence(resume))
	default:
		b.WriteString("\n\nTo hold every attempt to " + name + " back (maintenance, a partner's outage); " +
			"add `--until 2h` to end the pause by itself:\n\n" + text.Fence(pause))
	}
	if s.Signed {
		b.WriteString("\n\nIts reviewers have keys: a pause or resume carries a proof signed with yours " +
			"(`--key`, default `$COURIER_REVIEWER_KEY`), good until the gate changes state. " +
			"For Send an Update, add `--print` and paste what it prints.")
	}
	if len(s.Recent) > 0 {
		classes := make([]string, len(s.Recent))
		for i, r := range s.Recent {
			classes[i] = text.Markdown(string(r.Class))
		}
		b.WriteString("\n\nLatest reports, newest last: " + strings.Join(classes, ", "))
	}
	if n := len(s.Transitions); n > 0 {
		b.WriteString("\n\n**Transitions**, newest last\n")
		from := max(0, n-detailTransitions)
		if from > 0 {
			b.WriteString(fmt.Sprintf("\n- … %d earlier", from))
		}
		for _, t := range s.Transitions[from:] {
			by := text.Code(t.By)
			if t.Principal != "" {
				by += " (signed)"
			}
			b.WriteString(fmt.Sprintf("\n- %s: %s → %s by %s: %s", text.UTC(t.At), stateName(t.From), stateName(t.To),
				by, text.Markdown(t.Why)))
		}
	}
	b.WriteString("\n\nThe full record: Queries → `" + QueryState + "`." + text.DetailsEnd)
	return b.String()
}

// headline is the state and why in one line, with who and since.
func headline(s DestinationState) string {
	st, name := "**"+stateName(s.State)+"**", text.Markdown(s.Name)
	if p := s.Paused; p != nil {
		h := fmt.Sprintf("%s: %s · by %s since %s", st, text.Markdown(p.Reason), text.Code(p.By), text.UTC(p.Since))
		if !p.Until.IsZero() {
			h += ", until " + text.UTC(p.Until)
		}
		return h + "; no attempt is sent to " + name
	}
	h := st + ": attempts go to " + name
	switch s.State {
	case Open:
		h = st + ": no attempt is sent to " + name + " until the breaker's probe"
	case HalfOpen:
		h = st + ": one probe attempt is out; the rest wait for its answer"
	}
	if n := len(s.Transitions); n > 0 && s.Transitions[n-1].To == s.State {
		t := s.Transitions[n-1]
		return fmt.Sprintf("%s · by %s since %s: %s", h, text.Code(t.By), text.UTC(s.Since), text.Markdown(t.Why))
	}
	return h + " · since " + text.UTC(s.Since)
}

// breakerLine is the breaker: its state, failures, last failure, when it
// lets a probe through, and its settings as the gate last resolved them.
func breakerLine(b Breaker) string {
	s := "**Breaker**: " + stateName(b.State)
	switch b.State {
	case Open:
		s += fmt.Sprintf(" since %s (failures: %d) · lets one probe attempt through from %s", text.UTC(b.OpenedAt), b.Failures, text.UTC(b.ReopensAt()))
	case HalfOpen:
		s += fmt.Sprintf(" · probe attempt %s let through at %s; its answer closes or reopens it, and if none comes another probe goes at %s",
			text.Code(b.ProbeKey), text.UTC(b.ProbeAt), text.UTC(b.ProbeAt.Add(probeTimeout)))
	default:
		if b.Failures > 0 {
			s += fmt.Sprintf(" · failures: %d since %s", b.Failures, text.UTC(b.WindowStart))
		}
	}
	if b.LastFailure != "" {
		s += " · last failure: " + text.Code(text.Excerpt(b.LastFailure, detailErrorLen))
	}
	if c := b.Config; c != nil {
		s += fmt.Sprintf(" · opens at %d failures within %s; cool-down %s", c.Failures, c.Window, c.CoolDown)
	}
	return s
}

// stateName is a state as the details write it.
func stateName(state string) string { return strings.ReplaceAll(state, "_", " ") }
