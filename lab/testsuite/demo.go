package testsuite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/abde64c9/courier/lab"
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
		status, err := post(ctx, client, url, key, lab.Ticket(id, "Move the workshop booking"))
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
	return r.courierPath(ctx, lab.Input(dest, cid, lab.Ticket(cid, "Move the workshop booking")))
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

// blindRetryWithoutKey is the seed's naive writer: into a table whose key
// column is not unique, it inserts the row, treats the acknowledgement as
// lost and inserts it again, as a blind retry would. It returns how many
// rows hold the key afterwards: two effects for one business operation. The
// table is its own (never the ledger destination's), cleared of the key
// first so every run counts the same.
func blindRetryWithoutKey(ctx context.Context, path, key string, payload []byte) (int, error) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS ledger_without_key (key TEXT NOT NULL, payload TEXT NOT NULL)"); err != nil {
		return 0, err
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM ledger_without_key WHERE key = ?", key); err != nil {
		return 0, err
	}
	for range 2 {
		if _, err := db.ExecContext(ctx, "INSERT INTO ledger_without_key (key, payload) VALUES (?, ?)", key, string(payload)); err != nil {
			return 0, err
		}
	}
	var n int
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM ledger_without_key WHERE key = ?", key).Scan(&n)
	return n, err
}
