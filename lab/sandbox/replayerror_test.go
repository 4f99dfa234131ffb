package sandbox

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReplayAsError: the repeat of a completed create is a 409 error that
// names the original, under an error id of its own each time.
func TestReplayAsError(t *testing.T) {
	f := newFixtureWith(t, DialectModes())
	const path = "/entries/v1/entries"
	post := func(key, body string) raw {
		t.Helper()
		return f.send(t, "POST", path, map[string]string{"Idempotency-Key": key}, body)
	}
	type dupError struct {
		Error struct {
			Code   string `json:"code"`
			ID     string `json:"id"`
			Errors []struct {
				Code  string `json:"code"`
				Links struct {
					ConflictingResourceID string `json:"conflicting_resource_id"`
				} `json:"links"`
			} `json:"errors"`
		} `json:"error"`
	}

	first := post("k1", ticket)
	require.Equal(t, http.StatusCreated, first.status)
	require.JSONEq(t, `{"data":{"id":"ticket-1","status":"posted"}}`, first.body)

	errIDs := map[string]bool{}
	for range 2 {
		r := post("k1", `{ "subject": "Move the workshop booking", "request_id": "example-001" }`)
		require.Equal(t, http.StatusConflict, r.status)
		var e dupError
		require.NoError(t, json.Unmarshal([]byte(r.body), &e))
		require.Equal(t, "duplicate_request", e.Error.Code)
		require.Len(t, e.Error.Errors, 1)
		require.Equal(t, "duplicate", e.Error.Errors[0].Code)
		require.Equal(t, "ticket-1", e.Error.Errors[0].Links.ConflictingResourceID)
		hexPart, ok := strings.CutPrefix(e.Error.ID, "err_")
		require.True(t, ok, e.Error.ID)
		_, err := hex.DecodeString(hexPart)
		require.NoError(t, err, e.Error.ID)
		require.NotEmpty(t, hexPart)
		errIDs[e.Error.ID] = true
	}
	require.Len(t, errIDs, 2, "each answer has an error id of its own")

	reused := post("k1", `{"request_id":"example-001","subject":"Another subject"}`)
	require.Equal(t, http.StatusUnprocessableEntity, reused.status)
	var re struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(reused.body), &re))
	require.Equal(t, "idempotency_key_reused", re.Error.Code)
	require.NotEmpty(t, re.Error.Message)

	invalid := post("k2", `{"request_id":"example-001"}`)
	require.Equal(t, http.StatusBadRequest, invalid.status)
	require.JSONEq(t, `{"error":{"code":"validation","field":"subject"}}`, invalid.body)

	recs := f.records(t, "entries")
	require.Len(t, recs, 1, "one stored effect")
	require.Equal(t, "k1", recs[0].Key)
	require.Equal(t, []RequestLog{
		{Request: 1, Key: ptr("k1"), Write: true, Result: ResultWrittenThenReceipt},
		{Request: 2, Key: ptr("k1"), CacheHit: true, Result: ResultCachedReceipt},
		{Request: 3, Key: ptr("k1"), CacheHit: true, Result: ResultCachedReceipt},
		{Request: 4, Key: ptr("k1"), Result: ResultKeyReused},
		{Request: 5, Key: ptr("k2"), Result: ResultValidationRejected},
	}, f.srv.Requests("entries"))
	require.Error(t, f.srv.Inject("entries", Fault{Kind: FaultGarbledLookup}), "it has no lookup to garble")
}

func TestReplayAsErrorInFlight(t *testing.T) {
	f := newFixtureWith(t, DialectModes())
	require.NoError(t, f.srv.Inject("entries", Fault{Kind: FaultDelayBeforeCommit, Delay: 500 * time.Millisecond}))
	errc := make(chan error, 1)
	go func() {
		req, err := http.NewRequest("POST", f.http.URL+"/entries/v1/entries", bytes.NewBufferString(ticket))
		if err == nil {
			req.Header.Set("Idempotency-Key", "k1")
			var resp *http.Response
			if resp, err = f.client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		errc <- err
	}()
	require.Eventually(t, func() bool { return len(f.srv.Requests("entries")) == 1 }, 2*time.Second, 5*time.Millisecond)
	r := f.send(t, "POST", "/entries/v1/entries", map[string]string{"Idempotency-Key": "k1"}, ticket)
	require.Equal(t, http.StatusConflict, r.status)
	require.JSONEq(t, `{"error":{"code":"request_in_progress"}}`, r.body)
	requireHungUp(t, <-errc)
	require.Empty(t, f.records(t, "entries"))
}
