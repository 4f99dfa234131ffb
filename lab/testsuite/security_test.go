package testsuite

import (
	"context"
	"encoding/base64"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/connect/codec"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// TestSecretNotInHistory: a destination's credential comes from the
// worker's environment, reaches the destination on every attempt, and
// appears nowhere in the delivery's history: not in its raw event bytes,
// not base64-encoded either.
func TestSecretNotInHistory(t *testing.T) {
	ctx, rl, env := realTest(t, 2*time.Minute)

	secret := "courier-test-token-" + uuid.NewString()
	t.Setenv("COURIER_TEST_HELPDESK_TOKEN", secret)
	// The sandbox takes any Authorization header; this front records it, to
	// prove the secret was really sent.
	var mu sync.Mutex
	var sent []string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("Authorization"))
		mu.Unlock()
		env.Sandbox.Handler().ServeHTTP(w, r)
	}))
	defer front.Close()
	cfg := destinations.Config{Destinations: maps.Clone(env.Config.Destinations)}
	d := cfg.Destinations[lab.DestHelpdesk]
	d.URL = front.URL + "/helpdesk/tickets"
	d.Auth = &destinations.Auth{Header: "Authorization", Scheme: "Bearer", SecretEnv: "COURIER_TEST_HELPDESK_TOKEN"}
	cfg.Destinations[lab.DestHelpdesk] = d
	ads, err := worker.OpenAdapters(cfg, nil)
	require.NoError(t, err)
	defer ads.Close()
	stop := startWorkers(t, rl.Temporal.Client(), cfg, worker.NewActivities(rl.Temporal.Client(), cfg, ads))
	defer stop()

	// A lost response first: the retry and its error are in history too.
	id := "secret-" + rl.RunID
	require.NoError(t, env.Inject(lab.DestHelpdesk, closeAfterCommit(1)))
	res, err := starter.New(rl.Temporal.Client()).Deliver(ctx, lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, "Move the workshop booking")))
	require.NoError(t, err)
	require.Equal(t, workflows.StatusDuplicate, res.Status)
	mu.Lock()
	require.Equal(t, []string{"Bearer " + secret, "Bearer " + secret}, sent, "both attempts carried the credential")
	mu.Unlock()

	raw, text := history(ctx, t, rl.Temporal.Client(), workflows.WorkflowID(res.Key))
	// The search finds what is there: the payload, in clear without a codec.
	require.Contains(t, string(raw), "Move the workshop booking")
	for _, s := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret))} {
		require.NotContains(t, string(raw), s, "raw event bytes")
		require.NotContains(t, string(text), s, "history JSON")
	}
}

// TestEncryptedHistory: with COURIER_CODEC_KEY set, the payload's plaintext
// appears nowhere in history, the worker still delivers it, and the result
// decodes with the key (and only with it).
func TestEncryptedHistory(t *testing.T) {
	ctx, rl, env := realTest(t, 2*time.Minute)

	c := encryptingClient(ctx, t, rl)
	stop := startWorkers(t, c, env.Config, env.WorkerActivities(c))
	defer stop()

	id := "encrypted-" + rl.RunID
	plaintext := "Move the workshop booking " + uuid.NewString()
	require.NoError(t, env.Inject(lab.DestHelpdesk, closeAfterCommit(1)))
	st := starter.New(c)
	res, err := st.Deliver(ctx, lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, plaintext)))
	require.NoError(t, err)
	require.Equal(t, workflows.StatusDuplicate, res.Status)

	// The worker decrypted it: the destination holds the plaintext.
	recs, err := env.Sandbox.Records("helpdesk")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Contains(t, string(recs[0].Payload), plaintext)

	wid := workflows.WorkflowID(res.Key)
	raw, text := history(ctx, t, rl.Temporal.Client(), wid)
	require.NotContains(t, string(raw), plaintext, "raw event bytes")
	require.NotContains(t, string(text), plaintext, "history JSON")
	require.Contains(t, string(raw), codec.Encoding, "payloads are marked encrypted")
	require.Contains(t, string(raw), "test-key-1", "with the id of their key")

	// The result decodes with the key, and names the stored ticket...
	var out workflows.DeliveryResult
	require.NoError(t, c.GetWorkflow(ctx, wid, "").Get(ctx, &out))
	require.Equal(t, workflows.StatusDuplicate, out.Status)
	require.Equal(t, recs[0].TicketID, out.Receipt.ResourceID)
	// ...and not without it.
	require.Error(t, rl.Temporal.Client().GetWorkflow(ctx, wid, "").Get(ctx, &out))
}

// startWorkers runs Courier's workers on c until stop.
func startWorkers(t *testing.T, c client.Client, cfg destinations.Config, acts *activities.Activities) (stop func()) {
	t.Helper()
	ws := worker.New(c, cfg, acts, sdkworker.Options{})
	for _, w := range ws {
		require.NoError(t, w.Start())
	}
	return func() {
		for _, w := range ws {
			w.Stop()
		}
	}
}

// history returns a completed workflow's history as the raw bytes of its
// events, and as JSON.
func history(ctx context.Context, t *testing.T, c client.Client, wid string) (raw, text []byte) {
	t.Helper()
	return closedHistory(ctx, t, c, wid, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
}
