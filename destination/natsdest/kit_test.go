package natsdest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/worker/destinationtest"
)

// TestNATSKeepsItsContract: the adapter passes the conformance kit with
// the contract a destinations file declares for it, dedup key for the
// stream's duplicate window, its effects counted from the stream.
func TestNATSKeepsItsContract(t *testing.T) {
	t.Run("answering at once", func(t *testing.T) { runKit(t, 0, nil) })
	// Acknowledgements that come a while after the stream stored the
	// message let the kit end an attempt's context between the two, as a
	// worker dying there would.
	t.Run("answering late", func(t *testing.T) { runKit(t, 200*time.Millisecond, nil) })
	t.Run("on a real server", func(t *testing.T) {
		srv, err := lab.StartTemporal(t.Context(), lab.TemporalOptions{})
		require.NoError(t, err)
		defer srv.Close()
		runKit(t, 200*time.Millisecond, srv.Client())
	})
}

// runKit runs the kit against a fresh stream whose acknowledgements come
// late, through the SDK's test environment or, with c, a real server.
func runKit(t *testing.T, late time.Duration, c client.Client) {
	// Long enough for a retry (its wait, then its attempt's time) to reach
	// the stream within it.
	const window = 3 * time.Second
	n := startNATS(t, window)
	// A stream that refuses messages over a size: the kit's invalid payload.
	kit := jetstream.StreamConfig{Name: "KIT", Subjects: []string{"kit.deliveries"}, Duplicates: window, MaxMsgSize: 512}
	require.NoError(t, n.CreateStream(t.Context(), kit))
	link, err := lab.NewNATSLink(n.URL)
	require.NoError(t, err)
	defer link.Close()
	d := destinations.Destination{Adapter: destinations.AdapterNATS,
		NATS: &destinations.NATS{URL: link.URL(), Stream: kit.Name, Subject: kit.Subjects[0]},
		Contract: contract.Contract{Dedup: contract.DedupKey, KeyRetention: contract.Duration(window),
			Retry: contract.Retry{MaxAttempts: 5, InitialInterval: contract.Duration(100 * time.Millisecond),
				AttemptTimeout: contract.Duration(1500 * time.Millisecond), Deadline: contract.Duration(time.Minute)}}}
	ad := open(t, link.URL(), kit.Name, kit.Subjects[0], window)
	link.AnswerLate(late)
	destinationtest.Run(t, destinationtest.Subject{
		Name: "orders", Adapter: ad, Destination: &d,
		Count: func(ctx context.Context, key string) (int, error) {
			seqs, err := n.Sequences(ctx, kit.Name, key)
			return len(seqs), err
		},
		Invalid: json.RawMessage(`{"blob": "` + strings.Repeat("x", 1024) + `"}`),
		Client:  c,
	})
}
