// Package notify tells people that a delivery waits for their review: a
// JSON POST to a webhook (a chat channel's, an incident tool's) when the
// delivery parks and at each reminder. Only the worker opens it.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/redact"
	"github.com/abde64c9/courier/internal/text"
)

// Webhook posts notices to one notifier.
type Webhook struct {
	url, webUI string
	header     string
	// auth is the full header value; it is only ever put in a request header.
	auth   string
	client *http.Client
	// red redacts the worker's secrets from the notifier's answers, which
	// are recorded in history when it refuses a notice.
	red *redact.Redactor
}

var _ activities.Notifier = (*Webhook)(nil)

// timeout bounds one POST; the activity's retry policy does the rest.
const timeout = 10 * time.Second

// maxAnswer bounds how much of a refusing notifier's answer is quoted.
const maxAnswer = 256

// New builds the webhook, reading its secret once: a missing one stops the
// worker at start. red (nil: none) redacts the worker's secrets from the
// notifier's answers.
func New(n destinations.Notifier, red *redact.Redactor) (*Webhook, error) {
	w := &Webhook{url: n.URL, webUI: strings.TrimSuffix(n.WebUI, "/"), red: red, client: &http.Client{
		Timeout: timeout,
		// A notice goes only where it was told: following a redirect would
		// send the credential header to another host. The redirect is an
		// answer like any other non-2xx.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	if n.Auth != nil {
		v, err := n.Auth.HeaderValue()
		if err != nil {
			return nil, fmt.Errorf("notifier.%w", err)
		}
		w.header, w.auth = n.Auth.Header, v
	}
	return w, nil
}

// Notice is the JSON a notifier receives. Text reads well on its own in a
// chat channel; the other fields are for tools that route and deduplicate.
type Notice struct {
	Text string `json:"text"`
	// Event is parked or reminder; Reminder counts from 1.
	Event       string    `json:"event"`
	Reminder    int       `json:"reminder,omitempty"`
	ID          string    `json:"id"`
	Key         string    `json:"key"`
	Destination string    `json:"destination"`
	Tenant      string    `json:"tenant,omitempty"`
	Operation   string    `json:"operation"`
	BusinessID  string    `json:"business_id"`
	Namespace   string    `json:"namespace"`
	WorkflowID  string    `json:"workflow_id"`
	Reason      string    `json:"reason"`
	Evidence    string    `json:"evidence"`
	ParkedAt    time.Time `json:"parked_at"`
	AgeSeconds  int64     `json:"age_seconds"`
	Review      string    `json:"review_command"`
	WebUI       string    `json:"web_ui_url,omitempty"`
}

// NoticeOf is the notice for reminder r, at now.
func (w *Webhook) NoticeOf(r activities.Reminder, now time.Time) Notice {
	n := Notice{
		Event: "parked", Reminder: r.Number,
		// One id per notice, so a receiver can drop a retried POST.
		ID:  fmt.Sprintf("%s-%d-%d", r.Key, r.Since.Unix(), r.Number),
		Key: r.Key, Destination: r.Destination, Tenant: r.Tenant, Operation: r.Operation,
		BusinessID: r.BusinessID, Namespace: r.Namespace, WorkflowID: r.WorkflowID,
		Reason: r.Reason, Evidence: r.Evidence, ParkedAt: r.Since.UTC(),
		AgeSeconds: int64(now.Sub(r.Since).Seconds()),
		Review:     fmt.Sprintf(`courier review %s --decision retry|delivered|abandon --reviewer <YOUR-NAME> --note "what you checked" [--resource-id <ID-YOU-FOUND>]`, r.Key),
	}
	if w.webUI != "" {
		n.WebUI = fmt.Sprintf("%s/namespaces/%s/workflows/%s", w.webUI, url.PathEscape(r.Namespace), url.PathEscape(r.WorkflowID))
	}
	waiting := "is waiting for a review"
	if r.Number > 0 {
		n.Event = "reminder"
		waiting = fmt.Sprintf("is still waiting for a review, after %s (reminder %d)", now.Sub(r.Since).Round(time.Second), r.Number)
	}
	// Chat tools render Text as Markdown: the delivery's values are code
	// spans and the reason is escaped, so none of them becomes a link.
	n.Text = fmt.Sprintf("Courier: %s → %s (business id %s) %s: %s.\nDecide: %s",
		text.Code(r.Operation), text.Code(r.Destination), text.Code(r.BusinessID), waiting, text.Markdown(r.Reason), text.Code(n.Review))
	if n.WebUI != "" {
		n.Text += "\n" + n.WebUI
	}
	return n
}

// Notify posts the notice for r.
func (w *Webhook) Notify(ctx context.Context, r activities.Reminder) error {
	return w.post(ctx, w.NoticeOf(r, time.Now()))
}

// GateNotice is the JSON a notifier receives when a destination's breaker
// opens.
type GateNotice struct {
	Text        string    `json:"text"`
	Event       string    `json:"event"` // destination_open
	Destination string    `json:"destination"`
	State       string    `json:"state"`
	Since       time.Time `json:"since"`
	Why         string    `json:"why"`
	Status      string    `json:"status_command"`
}

// NotifyGate posts a gate's change.
func (w *Webhook) NotifyGate(ctx context.Context, g activities.GateNotice) error {
	cmd := "courier destination status " + g.Destination
	return w.post(ctx, GateNotice{
		Event: "destination_" + g.State, Destination: g.Destination, State: g.State, Since: g.Since.UTC(), Why: g.Why, Status: cmd,
		Text: fmt.Sprintf("Courier: destination %s is %s: %s. Deliveries to it wait, spending no attempts. See: %s",
			text.Code(g.Destination), strings.ReplaceAll(g.State, "_", " "), text.Markdown(g.Why), text.Code(cmd)),
	})
}

// post sends one notice. Any answer but 2xx is an error, for the
// activity's retry policy.
func (w *Webhook) post(ctx context.Context, notice any) error {
	body, err := json.Marshal(notice)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if w.header != "" {
		req.Header.Set(w.header, w.auth)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		// Without url.Error's "Post <url>:": a chat webhook's URL is often
		// itself a credential.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("notifier: %w", w.red.Error(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		// Redacted before it is cut, so that no part of a secret is kept;
		// the bound leaves room for the markers.
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4*maxAnswer))
		excerpt := strings.TrimSpace(text.Cut(w.red.String(string(answer)), maxAnswer))
		if resp.StatusCode/100 == 3 {
			// Where it pointed is not quoted: a Location may carry a token.
			return fmt.Errorf("notifier answered %s (a redirect, not followed): %s", resp.Status, excerpt)
		}
		return fmt.Errorf("notifier answered %s: %s", resp.Status, excerpt)
	}
	return nil
}
