package testsuite

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// natsDestinations is a destinations file with four NATS destinations
// reached through link: orders (the lab's stream, a minute's window),
// events (a one-second window, declared as its key retention), events-later
// (the same stream, retried 2s after a 500ms attempt) and gone (a stream
// the test deletes).
func natsDestinations(linkURL string) string {
	dest := func(stream, subject, retention, retry string) string {
		return fmt.Sprintf(`{"adapter": "nats", "nats": {"url": %q, "stream": %q, "subject": %q},
  "contract": {"dedup": "key", "key_retention": %q, "retry": {%s, "deadline": "1m"}}}`,
			linkURL, stream, subject, retention, retry)
	}
	const retry = `"max_attempts": 10, "initial_interval": "100ms", "attempt_timeout": "2s"`
	return `{"destinations": {
  "orders": ` + dest(lab.NATSStream, lab.NATSSubject, "1m", retry) + `,
  "events": ` + dest("EVENTS", "events.short", "1s", retry) + `,
  "events-later": ` + dest("EVENTS", "events.short", "1s", `"max_attempts": 10, "initial_interval": "2s", "attempt_timeout": "500ms"`) + `,
  "gone": ` + dest("GONE", "gone.x", "1m", `"max_attempts": 2, "initial_interval": "100ms", "attempt_timeout": "2s"`) + `}}`
}

// TestRealNATS delivers to a NATS JetStream stream through the real
// Delivery workflow on a real dev server, with a worker in this process
// that opens the destinations file's adapter nats, and counts the messages
// the stream stored.
func TestRealNATS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := sharedServer(t)
	n, err := lab.StartNATS("", t.TempDir(), time.Minute)
	require.NoError(t, err)
	defer n.Close()
	require.NoError(t, n.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.short"}, Duplicates: time.Second}))
	require.NoError(t, n.CreateStream(ctx, jetstream.StreamConfig{Name: "GONE", Subjects: []string{"gone.x"}, Duplicates: time.Minute}))
	link, err := lab.NewNATSLink(n.URL)
	require.NoError(t, err)
	defer link.Close()
	cfg, err := destinations.Parse([]byte(natsDestinations(link.URL())))
	require.NoError(t, err)

	runID := newLab(t).RunID
	tc, err := lab.StartTemporal(ctx, lab.TemporalOptions{Address: srv.HostPort, Namespace: "nats-" + runID, Logger: testLogger})
	require.NoError(t, err)
	defer tc.Close()
	ads, err := worker.OpenAdapters(cfg, nil)
	require.NoError(t, err)
	defer ads.Close()
	for _, w := range worker.New(tc.Client(), cfg, worker.NewActivities(tc.Client(), cfg, ads), sdkworker.Options{}) {
		require.NoError(t, w.Start())
		defer w.Stop()
	}
	st := starter.New(tc.Client())
	stored := func(stream, key string) []uint64 {
		t.Helper()
		seqs, err := n.Sequences(ctx, stream, key)
		require.NoError(t, err)
		return seqs
	}

	t.Run("created", func(t *testing.T) {
		res, err := st.Deliver(ctx, lab.TicketInput("orders", "created-"+runID))
		require.NoError(t, err)
		require.Equal(t, workflows.StatusCreated, res.Status, "%+v", res.Attempts)
		seqs := stored(lab.NATSStream, res.Key)
		require.Len(t, seqs, 1)
		require.Equal(t, strconv.FormatUint(seqs[0], 10), res.Receipt.ResourceID)
		require.Equal(t, lab.NATSStream, res.Receipt.Status)
	})

	t.Run("acknowledgement lost after the stream stored the message", func(t *testing.T) {
		in := lab.TicketInput("orders", "lost-ack-"+runID)
		key := opkey.Key(in.Operation)
		filled := make(chan error, 1)
		link.LoseNextAck(lab.NATSSubject, 0, func() {
			// Once the stream holds it, another message after it: the
			// replay must name the original's sequence, not the last.
			filled <- fillAfter(ctx, n, key, "filler-"+runID)
		})
		res, err := st.Deliver(ctx, in)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusDuplicate, res.Status, "%+v", res.Attempts)
		require.Equal(t, contract.ClassUnknown, res.Attempts[0].Class, "%+v", res.Attempts)
		seqs := stored(lab.NATSStream, res.Key)
		require.Len(t, seqs, 1, "one message in the stream")
		require.Equal(t, strconv.FormatUint(seqs[0], 10), res.Receipt.ResourceID, "the receipt names the stored message")
		require.True(t, res.Receipt.Replayed)
		require.NoError(t, <-filled)
		t.Logf("attempts: %+v; receipt: %s %s", res.Attempts, res.Receipt.ResourceID, res.Receipt.Body)
	})

	t.Run("unknown outcome past the duplicate window parks", func(t *testing.T) {
		in := lab.TicketInput("events", "window-"+runID)
		// The answer never comes: the attempt ends unknown at its 2s
		// timeout, past the stream's 1s window.
		link.LoseNextAck("events.short", 3*time.Second, nil)
		res, err := st.Deliver(ctx, in)
		require.NoError(t, err)
		require.Equal(t, workflows.StateAwaitingReview, res.State, "%+v", res.Attempts)
		require.Empty(t, res.Status)
		require.Len(t, res.Attempts, 1, "no resend")
		require.Contains(t, res.Review.Evidence, "after its key retention of 1s")
		require.Len(t, stored("EVENTS", res.Key), 1, "one message in the stream")
		t.Logf("evidence: %s", res.Review.Evidence)

		// What the park prevented: past the window the stream takes the
		// same message id as a new message.
		ack, err := n.Publish(ctx, "events.short", res.Key, []byte("{}"))
		require.NoError(t, err)
		require.False(t, ack.Duplicate, "the window has passed")
		require.Len(t, stored("EVENTS", res.Key), 2)
	})

	t.Run("a retry that would arrive past a 1 s window parks", func(t *testing.T) {
		in := lab.TicketInput("events-later", "later-"+runID)
		// The acknowledgement is lost at once, inside the window, but the
		// retry would go 2s later: past the window, where the stream takes
		// the same message id as a new message.
		link.LoseNextAck("events.short", 0, nil)
		res, err := st.Deliver(ctx, in)
		require.NoError(t, err)
		require.Equal(t, workflows.StateAwaitingReview, res.State, "%+v", res.Attempts)
		require.Len(t, res.Attempts, 1, "no resend")
		require.Equal(t, contract.ClassUnknown, res.Attempts[0].Class, "%+v", res.Attempts)
		require.Less(t, res.Attempts[0].Ended.Sub(res.Attempts[0].Started), time.Second, "lost inside the window")
		require.Contains(t, res.Review.Evidence, "cannot deduplicate a retry that would arrive after its key retention of 1s")
		require.Len(t, stored("EVENTS", res.Key), 1, "one message in the stream")
		t.Logf("evidence: %s", res.Review.Evidence)
	})

	t.Run("a stream that does not exist", func(t *testing.T) {
		require.NoError(t, n.DeleteStream(ctx, "GONE"))
		res, err := st.Deliver(ctx, lab.TicketInput("gone", "gone-"+runID))
		require.NoError(t, err)
		require.Equal(t, workflows.StatusAttemptLimit, res.Status, "%+v", res.Attempts)
		for _, a := range res.Attempts {
			require.Equal(t, contract.ClassNotSent, a.Class, "%+v", a)
		}
		require.Contains(t, res.Error, "not sent, no stream captures the subject")
		t.Logf("error: %s", res.Error)
	})
}

// fillAfter waits until the lab's stream holds key's message, then
// publishes another one.
func fillAfter(ctx context.Context, n *lab.NATS, key, filler string) error {
	for {
		seqs, err := n.Sequences(ctx, lab.NATSStream, key)
		if err != nil {
			return err
		}
		if len(seqs) > 0 {
			_, err := n.Publish(ctx, lab.NATSSubject, filler, []byte("{}"))
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the stream never stored %s: %w", key, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestNATSWorkerChecksTheWindow: a worker does not start with a NATS
// destination whose stream forgets message ids before the declared key
// retention, or whose stream does not exist.
func TestNATSWorkerChecksTheWindow(t *testing.T) {
	n, err := lab.StartNATS("", t.TempDir(), 30*time.Second)
	require.NoError(t, err)
	defer n.Close()
	file := func(stream, retention string) string {
		return fmt.Sprintf(`{"destinations": {"orders": {"adapter": "nats",
  "nats": {"url": %q, "stream": %q, "subject": %q},
  "contract": {"dedup": "key", "key_retention": %q, "retry": {"max_attempts": 3, "attempt_timeout": "2s", "deadline": "1m"}}}}}`,
			n.URL, stream, lab.NATSSubject, retention)
	}
	for _, c := range []struct{ stream, retention, want string }{
		{lab.NATSStream, "1h", `destination "orders": contract.key_retention: 1h0m0s declared, but stream "COURIER" keeps message ids only for its duplicate window of 30s; ` +
			`declare key_retention "30s" or less, or raise the stream's duplicate window (duplicate_window) to at least 1h0m0s`},
		{"ORDERS", "30s", `destination "orders": stream "ORDERS": not found at ` + n.URL +
			`; create it (with subject courier.deliveries and a duplicate window) or name an existing stream`},
	} {
		cfg, err := destinations.Parse([]byte(file(c.stream, c.retention)))
		require.NoError(t, err)
		_, err = worker.OpenAdapters(cfg, nil)
		require.EqualError(t, err, c.want)
	}
}
