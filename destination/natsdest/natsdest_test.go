package natsdest_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destination/natsdest"
	"github.com/abde64c9/courier/lab"
)

func startNATS(t *testing.T, window time.Duration) *lab.NATS {
	t.Helper()
	n, err := lab.StartNATS("", t.TempDir(), window)
	require.NoError(t, err)
	t.Cleanup(n.Close)
	return n
}

func open(t *testing.T, url, stream, subject string, retention time.Duration) *natsdest.Adapter {
	t.Helper()
	ad, err := natsdest.New(natsdest.Options{URL: url, Stream: stream, Subject: subject, KeyRetention: retention})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ad.Close() })
	return ad
}

func request(key string) destination.Request {
	return destination.Request{Key: key, Fingerprint: "fp-" + key, Payload: json.RawMessage(`{"order":"` + key + `"}`), Attempt: 1}
}

// TestDeliver: a publish is created with its stream sequence; a repeat of
// the key within the duplicate window is replayed and names the original
// message, not the stream's last.
func TestDeliver(t *testing.T) {
	ctx := context.Background()
	n := startNATS(t, time.Minute)
	ad := open(t, n.URL, lab.NATSStream, lab.NATSSubject, time.Minute)

	_, err := n.Publish(ctx, lab.NATSSubject, "before", []byte("{}"))
	require.NoError(t, err)
	out := ad.Deliver(ctx, request("k1"))
	require.Equal(t, destination.Created, out.Class, out.Error)
	require.Equal(t, "2", out.Receipt.ResourceID)
	require.Equal(t, lab.NATSStream, out.Receipt.Status)
	require.False(t, out.Receipt.Replayed)

	_, err = n.Publish(ctx, lab.NATSSubject, "after", []byte("{}"))
	require.NoError(t, err)
	again := ad.Deliver(ctx, request("k1"))
	require.Equal(t, destination.Replayed, again.Class, again.Error)
	require.Equal(t, "2", again.Receipt.ResourceID, "the original's sequence, though the stream's last is 3")
	require.True(t, again.Receipt.Replayed)
	seqs, err := n.Sequences(ctx, lab.NATSStream, "k1")
	require.NoError(t, err)
	require.Equal(t, []uint64{2}, seqs, "one message for the key")
}

// TestDeliverConflict: the same key with another payload within the
// window is a conflict, and the stream keeps the first message only.
func TestDeliverConflict(t *testing.T) {
	ctx := context.Background()
	n := startNATS(t, time.Minute)
	ad := open(t, n.URL, lab.NATSStream, lab.NATSSubject, time.Minute)
	require.Equal(t, destination.Created, ad.Deliver(ctx, request("k2")).Class)
	other := request("k2")
	other.Payload, other.Fingerprint = json.RawMessage(`{"order":"changed"}`), "fp-changed"
	out := ad.Deliver(ctx, other)
	require.Equal(t, destination.Conflict, out.Class)
	require.Equal(t, "message 1 of stream COURIER has this key with another payload (fingerprint fp-k2)", out.Error)
	count, err := n.Count(ctx, "k2")
	require.NoError(t, err)
	require.Equal(t, 1, count)
}

// TestNewChecksTheStream: the stream must exist, and its duplicate window
// must cover the declared key retention.
func TestNewChecksTheStream(t *testing.T) {
	n := startNATS(t, 30*time.Second)
	cases := []struct {
		name      string
		o         natsdest.Options
		wantError string
	}{
		{"no stream", natsdest.Options{URL: n.URL, Stream: "MISSING", Subject: "missing.x", KeyRetention: time.Second},
			`stream "MISSING": not found at ` + n.URL + `; create it (with subject missing.x and a duplicate window) or name an existing stream`},
		{"retention over the window", natsdest.Options{URL: n.URL, Stream: lab.NATSStream, Subject: lab.NATSSubject, KeyRetention: time.Hour},
			`contract.key_retention: 1h0m0s declared, but stream "COURIER" keeps message ids only for its duplicate window of 30s; ` +
				`declare key_retention "30s" or less, or raise the stream's duplicate window (duplicate_window) to at least 1h0m0s`},
		{"no retention", natsdest.Options{URL: n.URL, Stream: lab.NATSStream, Subject: lab.NATSSubject},
			`contract.key_retention: not declared, but stream "COURIER" keeps message ids only for its duplicate window of 30s; declare key_retention "30s" or less`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := natsdest.New(c.o)
			require.EqualError(t, err, c.wantError)
		})
	}
	open(t, n.URL, lab.NATSStream, lab.NATSSubject, 30*time.Second) // the window itself is fine
}

// TestDeliverNotSent: with the stream gone, the server answers that no
// one stores the subject, and nothing is written.
func TestDeliverNotSent(t *testing.T) {
	ctx := context.Background()
	n := startNATS(t, time.Minute)
	ad := open(t, n.URL, lab.NATSStream, lab.NATSSubject, time.Minute)
	require.NoError(t, n.DeleteStream(ctx, lab.NATSStream))
	out := ad.Deliver(ctx, request("k-gone"))
	require.Equal(t, destination.NotSent, out.Class)
	require.Equal(t, "not sent, no stream captures the subject (the stream is missing or its subjects changed): nats: no response from stream", out.Error)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	require.Equal(t, destination.NotSent, ad.Deliver(canceled, request("k-canceled")).Class)
}

// TestDeliverAckLost: the stream stores the message, its acknowledgement
// never arrives: unknown when the contract's attempt timeout ends.
func TestDeliverAckLost(t *testing.T) {
	n := startNATS(t, time.Minute)
	link, err := lab.NewNATSLink(n.URL)
	require.NoError(t, err)
	defer link.Close()
	ad := open(t, link.URL(), lab.NATSStream, lab.NATSSubject, time.Minute)
	link.LoseNextAck(lab.NATSSubject, 2*time.Second, nil)
	req := request("k-lost")
	req.Contract.Retry.AttemptTimeout = contract.Duration(time.Second)
	start := time.Now()
	out := ad.Deliver(context.Background(), req)
	require.Less(t, time.Since(start), 2*time.Second, "bounded by the attempt timeout")
	require.Equal(t, destination.Unknown, out.Class)
	require.Contains(t, out.Error, "no answer within the attempt's time after the request was written")
	seqs, err := n.Sequences(context.Background(), lab.NATSStream, "k-lost")
	require.NoError(t, err)
	require.Len(t, seqs, 1, "stored, though unacknowledged")

	// Once the link cuts the silent connection the adapter reconnects
	// through it; the repeat names the stored message.
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		out = ad.Deliver(ctx, request("k-lost"))
		return out.Class == destination.Replayed
	}, 10*time.Second, 100*time.Millisecond, "the last: %+v", out)
	require.Equal(t, strconv.FormatUint(seqs[0], 10), out.Receipt.ResourceID)
}

// TestDeliverOtherStream: a subject another stream captures is refused,
// and that stream stores nothing.
func TestDeliverOtherStream(t *testing.T) {
	ctx := context.Background()
	n := startNATS(t, time.Minute)
	require.NoError(t, n.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.x"}, Duplicates: time.Minute}))
	ad, err := natsdest.New(natsdest.Options{URL: n.URL, Stream: lab.NATSStream, Subject: "other.x", KeyRetention: time.Minute})
	require.NoError(t, err)
	defer ad.Close()
	out := ad.Deliver(ctx, request("k-other"))
	require.Equal(t, destination.Rejected, out.Class)
	require.Equal(t, "the stream refused the message: nats: API error: code=400 err_code=10060 description=expected stream does not match", out.Error)
	seqs, err := n.Sequences(ctx, "OTHER", "k-other")
	require.NoError(t, err)
	require.Empty(t, seqs)
}

// TestDeliverTooLarge: a payload over the server's max_payload is refused
// before it is written, and will be again: rejected.
func TestDeliverTooLarge(t *testing.T) {
	n := startNATS(t, time.Minute)
	ad := open(t, n.URL, lab.NATSStream, lab.NATSSubject, time.Minute)
	req := request("k-large")
	req.Payload = json.RawMessage(`"` + strings.Repeat("x", 2<<20) + `"`)
	out := ad.Deliver(context.Background(), req)
	require.Equal(t, destination.Rejected, out.Class)
	require.Equal(t, "the payload is larger than the server takes (max_payload): nats: maximum payload exceeded", out.Error)
}

// TestServerDownAtStart: a NATS server that cannot be reached when the
// worker starts does not stop it: attempts are not sent until the server
// is up, then the stream is checked at the first attempt that reaches it
// (a window shorter than the declared retention is still refused, nothing
// published), and a fitting stream takes the message.
func TestServerDownAtStart(t *testing.T) {
	ctx := context.Background()
	port, err := lab.FreePort()
	require.NoError(t, err)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ad := open(t, "nats://"+addr, lab.NATSStream, lab.NATSSubject, 2*time.Minute)
	out := ad.Deliver(ctx, request("k-down"))
	require.Equal(t, destination.NotSent, out.Class)
	require.Contains(t, out.Error, "not connected to NATS at nats://"+addr)

	n, err := lab.StartNATS(addr, t.TempDir(), time.Minute)
	require.NoError(t, err)
	t.Cleanup(n.Close)
	require.Eventually(t, func() bool {
		out = ad.Deliver(ctx, request("k-down"))
		return !strings.Contains(out.Error, "not connected")
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, destination.NotSent, out.Class, "the window (1m) is shorter than the declared retention (2m)")
	require.Contains(t, out.Error, `contract.key_retention: 2m0s declared, but stream "COURIER" keeps message ids only for its duplicate window of 1m0s`)
	seqs, err := n.Sequences(ctx, lab.NATSStream, "k-down")
	require.NoError(t, err)
	require.Empty(t, seqs, "nothing published")

	require.NoError(t, n.DeleteStream(ctx, lab.NATSStream))
	require.NoError(t, n.CreateStream(ctx, jetstream.StreamConfig{Name: lab.NATSStream, Subjects: []string{lab.NATSSubject}, Duplicates: 2 * time.Minute}))
	out = ad.Deliver(ctx, request("k-down"))
	require.Equal(t, destination.Created, out.Class, out.Error)
}
