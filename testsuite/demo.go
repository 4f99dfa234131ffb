package testsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/google/uuid"
)

// keying is how a demonstration's naive client keys its attempts.
type keying int

const (
	noKey             keying = iota // blind retry: no idempotency key at all
	newKeyEachAttempt               // a fresh key per attempt: as good as none
)

// demoBlindRetry shows a failure Courier exists to prevent: a plain client
// posts a ticket, loses the response after the commit, and posts it again.
// The report's effects and outcome are the naive client's (two tickets, and
// it believes it succeeded); Courier then delivers the same kind of
// operation through dest under the same fault.
func (r *Run) demoBlindRetry(ctx context.Context, naiveDest, dest string, k keying) error {
	id := r.ID("naive")
	if err := r.Env.Inject(naiveDest, closeAfterCommit(1)); err != nil {
		return err
	}
	url := r.Env.Config.Destinations[naiveDest].URL
	client := &http.Client{Timeout: demoTimeout}
	for attempt := 1; attempt <= 2; attempt++ {
		key := ""
		if k == newKeyEachAttempt {
			key = uuid.NewString()
		}
		status, err := post(ctx, client, url, key, Ticket(id, "Move the workshop booking"))
		ra := ReportAttempt{Attempt: attempt, Status: "success"}
		if key != "" {
			ra.Key = &key
		}
		if err != nil {
			ra.Status, ra.Error = "timeout_outcome_unknown", err.Error()
		}
		r.Report.Attempts = append(r.Report.Attempts, ra)
		if err == nil {
			r.Report.Outcome = OutcomeSuccess
			r.Report.Extra = map[string]any{"http_status": status}
			break
		}
	}
	r.requests(naiveDest)
	if err := r.effects(naiveDest, id); err != nil {
		return err
	}

	cid := r.ID("courier")
	if err := r.Env.Inject(dest, closeAfterCommit(1)); err != nil {
		return err
	}
	return r.courierPath(ctx, Input(dest, cid, Ticket(cid, "Move the workshop booking")))
}

// post is the naive client: one JSON POST, an error when no response came.
func post(ctx context.Context, c *http.Client, url, key string, body json.RawMessage) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.GetBody = nil // never let the transport resend it: this client's retries are its own
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("no response: %w", err)
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func containsID(payload json.RawMessage, id string) bool {
	var p struct {
		RequestID string `json:"request_id"`
	}
	return json.Unmarshal(payload, &p) == nil && p.RequestID == id
}
