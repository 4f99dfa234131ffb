package devstack

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/config"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/workflows"
)

// notes say what each sample destination is for.
var notes = map[string]string{
	"helpdesk": "the service honours Idempotency-Key: retries replay the first receipt",
	"ledger":   "SQLite table with a UNIQUE key, written in the effect's transaction",
	"crm":      "no dedup, but an effect can be found by key after an unknown outcome",
	"legacy":   "no dedup at all: an unknown outcome waits for your review",
	"ignoring": "declares key support the service does not have: what `courier probe` catches",
	"events":   "a NATS JetStream publish: the key is its message id, a repeat within the duplicate window is dropped",
	"mail":     "an email through SMTP: no dedup, its Message-ID is the key's, so a lost answer waits for your review",
}

// ListURL is the web UI's workflow list filtered by a visibility query.
func ListURL(uiURL, query string) string {
	return uiURL + "/namespaces/" + Namespace + "/workflows?query=" + url.QueryEscape(query)
}

// AwaitingReviewURL lists the deliveries waiting for a review decision.
func (s *Stack) AwaitingReviewURL() string {
	return ListURL(s.UIURL(), fmt.Sprintf("%s=%q", workflows.SAState.GetName(), string(workflows.StateAwaitingReview)))
}

// DeliveriesURL lists every delivery.
func (s *Stack) DeliveriesURL() string {
	return ListURL(s.UIURL(), fmt.Sprintf("WorkflowType=%q", workflows.WorkflowType))
}

// Banner is what `courier-lab dev` prints once everything runs: where things
// are, and commands to copy. Example ids are fresh on every start, so the
// walkthrough works again on a stack that remembers the last run's.
func (s *Stack) Banner() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	cfg := s.lab.Config

	p("")
	p("Courier dev is running. State: %s (kept across runs). Ctrl-C stops everything.", s.o.Dir)
	p("")
	p("  Temporal         %s, namespace %s (server log: %s)", s.hostPort(), Namespace, filepath.Join(s.o.Dir, TemporalLog))
	p("  Web UI           %s (no start or reset: a delivery never runs again from it)", s.UIURL())
	p("  Retention        %d days: a repeated request joins its delivery for that long", int(Retention.Hours()/24))
	p("  Deliveries       %s", s.DeliveriesURL())
	p("  Awaiting review  %s", s.AwaitingReviewURL())
	p("  Sandbox          %s (what it stored: GET /admin/records?destination=NAME)", s.SandboxURL())
	p("  NATS             %s, JetStream stream %s (subject %s), kept in %s", s.nats.URL, lab.NATSStream, lab.NATSSubject, filepath.Join(s.o.Dir, NATSDir))
	p("  Mail sink        smtp://%s, each mail it accepts kept in %s", s.mail.Addr, filepath.Join(s.o.Dir, MailDir))
	if m := s.MetricsURL(); m != "" {
		p("  Worker metrics   %s", m)
	}
	if u := s.APIURL(); u != "" {
		p("  HTTP API         %s, tenant %s, token in %s (docs/api.md)", u, lab.NexusTenant, s.APITokenPath())
	}
	p("  Nexus endpoint   %s: service %s, operation %s, tenant %s (task queue %s); callers' namespace %s",
		s.endpoint, workflows.NexusService, workflows.NexusOperationDeliver, lab.NexusTenant,
		workflows.NexusTaskQueue(lab.NexusTenant), lab.CallerNamespace)
	p("")
	p("  Destinations (lab/config/destinations.dev.json):")
	for _, name := range cfg.Names() {
		p("    %-9s dedup %-14s %s", name, cfg.Destinations[name].Contract.Dedup, notes[name])
	}

	// The commands are written as the product is installed, as the details
	// and the README write them; the PATH export puts this stack's own
	// courier first.
	const c = "courier"
	run := s.started.Format("150405")
	dup := opkey.Operation{Destination: "helpdesk", Operation: "create-ticket", BusinessID: "order-" + run + "-1"}
	unk := opkey.Operation{Destination: "legacy", Operation: "create-ticket", BusinessID: "order-" + run + "-2"}
	deliver := func(op opkey.Operation, subject string) string {
		return fmt.Sprintf("%s deliver --destination %s --operation %s --id %s --payload '{\"subject\": %q}'",
			c, op.Destination, op.Operation, op.BusinessID, subject)
	}
	p("")
	p("Try it in another terminal:")
	p("")
	p("  export TEMPORAL_ADDRESS=%s", s.hostPort())
	p("  export COURIER_DESTINATIONS=%s   # the dev worker's destinations file", shellWord(s.destinationsPath()))
	p("  export COURIER_REVIEWER_KEY=%s   # your reviewer key: legacy takes signed decisions, pauses and resumes", shellWord(s.ReviewerKeyPath()))
	p("  export PATH=%s:$PATH   # the courier the dev worker runs", shellWord(s.courierDir()))
	p("")
	p("  # 1. One ticket, asked for twice: created, then duplicate (the same receipt)")
	p("  %s", deliver(dup, "Printer on fire"))
	p("  %s", deliver(dup, "Printer on fire"))
	p("")
	p("  # 2. The sandbox drops the next legacy response right after committing the ticket:")
	p("  #    an unknown outcome, which a destination without dedup cannot retry safely")
	p("  curl -s -X POST %s/admin/faults -d '{\"destination\": \"legacy\", \"fault\": \"close_after_commit\"}'", s.SandboxURL())
	p("  %s", deliver(unk, "Call the customer back"))
	p("")
	p("  # 3. It waits for a person: here, and in the web UI (Awaiting review, above)")
	p("  %s list --state %s", c, workflows.StateAwaitingReview)
	p("  %s destination status   # every destination: its gate, and what waits at it (legacy: 1 parked)", c)
	p("  curl -s '%s/admin/records?destination=legacy'   # the ticket is there: note its id", s.SandboxURL())
	p("  %s review %s --decision delivered --reviewer you --resource-id <TICKET-ID> --note 'found in legacy'",
		c, opkey.Key(unk))
	p("  #    (signed with your key; add --print for a decision to paste into the web UI's Send an Update)")
	if s.SandboxURL() == "http://"+config.DevSandboxAddr {
		p("")
		p("  # 4. Does a destination do what its contract says? (from the Courier checkout)")
		p("  %s probe ignoring --destinations lab/config/destinations.dev.json", c)
	}
	if u := s.APIURL(); u != "" {
		auth := fmt.Sprintf(`-H "Authorization: Bearer $(cat %s)"`, shellWord(s.APITokenPath()))
		post := func(op opkey.Operation, subject string) string {
			return fmt.Sprintf(`curl -si %s/v1/destinations/%s/operations/%s %s -H 'Idempotency-Key: "%s"' -d '{"subject": %q}'`,
				u, op.Destination, op.Operation, auth, op.BusinessID, subject)
		}
		created := opkey.Operation{Tenant: lab.NexusTenant, Destination: "helpdesk", Operation: "create-ticket", BusinessID: "order-" + run + "-4"}
		parked := opkey.Operation{Tenant: lab.NexusTenant, Destination: "legacy", Operation: "create-ticket", BusinessID: "order-" + run + "-5"}
		p("")
		p("  # 5. Over plain HTTP, for a service without a Temporal SDK (tenant %s, from its token)", lab.NexusTenant)
		p("  %s   # 201 created", post(created, "Over HTTP"))
		p("  %s   # again: 200, Idempotent-Replayed", post(created, "Over HTTP"))
		p("  %s   # 422: another payload", post(created, "Something else"))
		p("  curl -s -X POST %s/admin/faults -d '{\"destination\": \"legacy\", \"fault\": \"close_after_commit\"}'", s.SandboxURL())
		p("  %s   # 202 and its Location: parked for review", post(parked, "Call back over HTTP"))
		p("  curl -s %s/v1/deliveries/%s %s   # its status: awaiting_review, the evidence", u, opkey.Key(parked), auth)
	}
	p("")
	p("  # 6. From your own workflows (examples/order, from the checkout): an order workflow")
	p("  #    in namespace %s delivers its ticket through the Nexus endpoint; the endpoint", lab.CallerNamespace)
	p("  #    fixes the tenant (%s). Without --endpoint it runs in %s and starts a child.", lab.NexusTenant, Namespace)
	p("  TEMPORAL_NAMESPACE=%s go run ./examples/order worker &", lab.CallerNamespace)
	p("  TEMPORAL_NAMESPACE=%s go run ./examples/order place --id order-%s-3 --endpoint %s", lab.CallerNamespace, run, s.endpoint)
	p("")
	p("  # 7. Not only HTTP: a NATS publish and an email, each an adapter on the public")
	p("  #    destination API (docs/adapters.md), with the same guarantee")
	p("  %s deliver --destination events --operation order-placed --id order-%s-6 --payload '{\"order\": \"order-%s-6\"}'", c, run, run)
	p("  %s deliver --destination mail --operation send-receipt --id order-%s-7 --payload '{\"subject\": \"Your receipt\", \"text\": \"Thank you for your order.\"}'", c, run)
	p("  grep -l 'Your receipt' %s/*.eml   # the mail; its Message-ID is the receipt's resource id", shellWord(absolute(filepath.Join(s.o.Dir, MailDir))))
	p("")
	return b.String()
}

// courierDir is the folder of the courier binary the worker runs, for the
// banner's PATH export.
func (s *Stack) courierDir() string { return filepath.Dir(absolute(s.o.Courier)) }

// ReviewerKeyPath is the dev reviewer's key file.
func (s *Stack) ReviewerKeyPath() string { return absolute(filepath.Join(s.o.Dir, ReviewerKey)) }

// destinationsPath is the dev worker's destinations file.
func (s *Stack) destinationsPath() string { return absolute(s.lab.ConfigPath) }

// shellWord is path as a shell word: as it is when nothing in it is special
// to the shell, else quoted, so that a checkout in a folder with spaces
// still pastes.
func shellWord(path string) string {
	if path != "" && strings.Trim(path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return path
	}
	return "'" + strings.ReplaceAll(path, "'", `'\''`) + "'"
}

// absolute is path made absolute, so that the banner's exports work from
// any folder.
func absolute(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
