package lab

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destination/smtpdest"
)

// TestMailSinkKeepsMessages: what the sink accepted is counted by
// Message-ID, kept as files, and counted again after a restart on the
// same directory.
func TestMailSinkKeepsMessages(t *testing.T) {
	dir := t.TempDir()
	sink, err := StartMailSink(MailSinkOptions{Dir: dir})
	require.NoError(t, err)
	a, err := smtpdest.New(smtpdest.Options{Addr: sink.Addr, From: "courier@example.com", To: []string{"ops@example.com"}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := a.Deliver(ctx, destination.Request{Key: "k-1", Payload: json.RawMessage(`{"subject": "s"}`)})
	require.Equal(t, destination.Created, out.Class, out.Error)
	require.Equal(t, 1, sink.Count("<k-1@courier.invalid>"), "with angle brackets")
	require.Equal(t, 1, sink.Count("k-1@courier.invalid"), "without")
	require.Equal(t, 0, sink.Count("k-2@courier.invalid"))
	require.NoError(t, sink.Close())

	again, err := StartMailSink(MailSinkOptions{Dir: dir})
	require.NoError(t, err)
	defer again.Close()
	require.Equal(t, 1, again.Count("k-1@courier.invalid"))
	require.Len(t, again.Messages(), 1)
}
