package testsuite

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/connect/codec"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// TestEncryptedFailures: with COURIER_CODEC_KEY set, what ends up in a
// failure's message stays private too. A destination that rejects the
// payload quoting it back (a 400 echoing the body), and a reviewer's note
// on an abandoned delivery, appear nowhere in history, while the worker and
// a caller holding the key still read both, and one without it reads
// "Encoded failure".
func TestEncryptedFailures(t *testing.T) {
	ctx, rl, env := realTest(t, 3*time.Minute)

	c := encryptingClient(ctx, t, rl)
	plain := rl.Temporal.Client() // no key

	// The helpdesk refuses every ticket, quoting what it was sent.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":"invalid ticket","received":%s}`, body)
	}))
	defer echo.Close()
	cfg := destinations.Config{Destinations: maps.Clone(env.Config.Destinations)}
	d := cfg.Destinations[lab.DestHelpdesk]
	d.URL = echo.URL + "/helpdesk/tickets"
	cfg.Destinations[lab.DestHelpdesk] = d
	ads, err := worker.OpenAdapters(cfg, nil)
	require.NoError(t, err)
	defer ads.Close()
	stop := startWorkers(t, c, cfg, worker.NewActivities(c, cfg, ads))
	defer stop()
	st := starter.New(c)

	echoed := "echoed-" + uuid.NewString()[:8]
	id := "rejected-" + rl.RunID
	rejected, err := st.Deliver(ctx, lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, echoed)))
	require.NoError(t, err)
	require.Equal(t, workflows.StatusRejected, rejected.Status, "%+v", rejected.Attempts)
	require.Contains(t, rejected.Error, echoed, "the worker quoted the destination's answer")

	// A lost response parks the legacy delivery; the reviewer abandons it.
	note := "customer withdrew, see " + uuid.NewString()[:8]
	id = "abandoned-" + rl.RunID
	require.NoError(t, env.Inject(lab.DestLegacy, closeAfterCommit(1)))
	parked, err := st.Deliver(ctx, lab.Input(lab.DestLegacy, id, lab.Ticket(id, "Move the workshop booking")))
	require.NoError(t, err)
	require.Equal(t, workflows.StateAwaitingReview, parked.State)
	_, err = st.Review(ctx, parked.Key, workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "ops", Note: note})
	require.NoError(t, err)

	for key, marker := range map[string]string{rejected.Key: echoed, parked.Key: note} {
		wid := workflows.WorkflowID(key)
		raw, text := closedHistory(ctx, t, plain, wid, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED)
		require.NotContains(t, string(raw), marker, "raw event bytes of %s", wid)
		require.NotContains(t, string(text), marker, "history JSON of %s", wid)
		require.Contains(t, string(raw), "Encoded failure", "the failure is there, encoded")

		// The key holder reads the failure, its message and its result...
		err := c.GetWorkflow(ctx, wid, "").Get(ctx, nil)
		require.ErrorContains(t, err, marker)
		res, notDelivered := workflows.UndeliveredResult(err)
		require.True(t, notDelivered, "a NotDelivered failure: %v", err)
		require.Contains(t, res.Error, marker)
		// ...and one without it reads neither.
		err = plain.GetWorkflow(ctx, wid, "").Get(ctx, nil)
		require.ErrorContains(t, err, "Encoded failure")
		require.NotContains(t, err.Error(), marker)
	}
}

// encryptingClient sets a fresh key (id test-key-1) in the environment and
// connects to rl's server as every Courier process does, with
// connect.ClientOptions: payloads and failures encrypted. It closes when the
// test ends.
func encryptingClient(ctx context.Context, t *testing.T, rl *RealLab) client.Client {
	t.Helper()
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	t.Setenv(codec.EnvKeyFile, "")
	t.Setenv(codec.EnvKey, base64.StdEncoding.EncodeToString(key))
	t.Setenv(codec.EnvKeyID, "test-key-1")
	opts, err := connect.ClientOptions(testLogger)
	require.NoError(t, err)
	require.NotNil(t, opts.DataConverter, "the codec is on")
	require.NotNil(t, opts.FailureConverter, "for failures too")
	opts.HostPort, opts.Namespace = rl.Temporal.HostPort, rl.Temporal.Namespace
	c, err := client.DialContext(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// closedHistory returns a closed workflow's history, which must end with
// last, as the raw bytes of its events and as JSON.
func closedHistory(ctx context.Context, t *testing.T, c client.Client, wid string, last enumspb.EventType) (raw, text []byte) {
	t.Helper()
	// A review's decision is recorded in the outcome ledger before the
	// delivery ends: wait for the end (the result may not decode here).
	_ = c.GetWorkflow(ctx, wid, "").Get(ctx, nil)
	h := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var buf bytes.Buffer
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		b, err := proto.Marshal(ev)
		require.NoError(t, err)
		buf.Write(b)
		h.Events = append(h.Events, ev)
	}
	require.NotEmpty(t, h.Events)
	require.Equal(t, last, h.Events[len(h.Events)-1].GetEventType())
	text, err := protojson.Marshal(h)
	require.NoError(t, err)
	return buf.Bytes(), text
}
