package smtpdest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination/smtpdest"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/worker/destinationtest"
)

// TestKeepsItsContract: the smtp destination, declared as the destinations
// file declares it (dedup none), passes the conformance kit against the
// real mail sink, its mails counted by the Message-ID each key gives. A
// sink slow to confirm lets the kit end an attempt between the mail being
// kept and its 250, as a worker dying there would.
func TestKeepsItsContract(t *testing.T) {
	for name, delay := range map[string]time.Duration{"answering at once": 0, "answering late": 200 * time.Millisecond} {
		t.Run(name, func(t *testing.T) {
			s, err := lab.StartMailSink(lab.MailSinkOptions{AnswerDelay: delay})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			d := destinations.Destination{Adapter: destinations.AdapterSMTP,
				SMTP: &destinations.SMTP{Addr: s.Addr, From: "courier@example.com", To: []string{"ops@example.com"}},
				Contract: contract.Contract{Dedup: contract.DedupNone, Retry: contract.Retry{
					MaxAttempts: 3, AttemptTimeout: contract.Duration(10 * time.Second), Deadline: contract.Duration(time.Minute)}}}
			a, err := smtpdest.New(smtpdest.Options{Addr: d.SMTP.Addr, From: d.SMTP.From, To: d.SMTP.To})
			require.NoError(t, err)
			destinationtest.Run(t, destinationtest.Subject{
				Name: "mail", Adapter: a, Destination: &d,
				Count: func(_ context.Context, key string) (int, error) { return s.Count(a.MessageID(key)), nil },
				Payload: func(n int) json.RawMessage {
					return json.RawMessage(fmt.Sprintf(`{"subject": "kit mail %d", "text": "conformance"}`, n))
				},
				Invalid: json.RawMessage(`{"subject": "two\nlines"}`),
			})
		})
	}
}

// TestDeclaredKeyFailsTheKit: registered as a Go adapter that claims dedup
// key, it fails the kit: after a lost answer the retry sends a second mail.
func TestDeclaredKeyFailsTheKit(t *testing.T) {
	s := sink(t)
	a := adapter(t, s.Addr)
	fs, err := destinationtest.Check(t.Context(), destinationtest.Subject{
		Name: "mail", Adapter: a,
		Contract: contract.Contract{Dedup: contract.DedupKey, Retry: contract.Retry{
			MaxAttempts: 3, AttemptTimeout: contract.Duration(10 * time.Second), Deadline: contract.Duration(time.Minute)}},
		Count:   func(_ context.Context, key string) (int, error) { return s.Count(a.MessageID(key)), nil },
		Payload: func(n int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"subject": "kit mail %d"}`, n)) },
	})
	require.NoError(t, err)
	lost := ""
	for _, f := range fs {
		t.Log(f)
		if f.Case == "lost_response_same_key" {
			lost = f.Message
		}
	}
	require.Contains(t, lost,
		"declared dedup key, but a repeat with the same key after a lost response made a second effect: declare dedup none until it honours keys")
}
