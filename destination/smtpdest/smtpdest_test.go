package smtpdest_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destination/smtpdest"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/testcert"
)

const key = "5b0e6c2e-7d3a-5f43-9a51-0c4f5d7d2f10"

func sink(t *testing.T) *lab.MailSink {
	t.Helper()
	s, err := lab.StartMailSink(lab.MailSinkOptions{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func adapter(t *testing.T, addr string) *smtpdest.Adapter {
	t.Helper()
	a, err := smtpdest.New(smtpdest.Options{Addr: addr, From: "Courier <courier@example.com>", To: []string{"ops@example.com"}})
	require.NoError(t, err)
	return a
}

func request(payload string) destination.Request {
	return destination.Request{Key: key, Destination: "mail", Operation: "notify", BusinessID: "order-1042",
		Payload: json.RawMessage(payload), Attempt: 1}
}

func deliver(t *testing.T, a *smtpdest.Adapter, payload string) destination.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return a.Deliver(ctx, request(payload))
}

const payload = `{"subject": "Order 1042 shipped ✓", "text": "It left the warehouse.\n.\nTracking follows."}`

func TestCreated(t *testing.T) {
	s := sink(t)
	out := deliver(t, adapter(t, s.Addr), payload)
	require.Equal(t, destination.Created, out.Class, out.Error)
	require.Equal(t, key+"@courier.invalid", out.Receipt.ResourceID)
	require.Equal(t, 1, s.Count(out.Receipt.ResourceID))

	m := s.Messages()[0]
	require.Equal(t, "courier@example.com", m.From)
	require.Equal(t, []string{"ops@example.com"}, m.To)
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	require.NoError(t, err)
	require.Equal(t, "<"+key+"@courier.invalid>", msg.Header.Get("Message-ID"))
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	require.NoError(t, err)
	require.Equal(t, "Order 1042 shipped ✓", subject)
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	require.NoError(t, err)
	require.Equal(t, "It left the warehouse.\r\n.\r\nTracking follows.\r\n", string(body), "a lone dot is content, not the end")
}

func TestPayloadRecipients(t *testing.T) {
	s := sink(t)
	out := deliver(t, adapter(t, s.Addr), `{"to": ["a@example.com", "B <b@example.com>"], "subject": "s"}`)
	require.Equal(t, destination.Created, out.Class, out.Error)
	require.Equal(t, []string{"a@example.com", "b@example.com"}, s.Messages()[0].To)
}

// TestLostAnswerAfterData: the server keeps the mail and the connection
// drops before its 250: one mail, and the adapter cannot know it.
func TestLostAnswerAfterData(t *testing.T) {
	s := sink(t)
	s.Inject(lab.MailDropAfterData)
	out := deliver(t, adapter(t, s.Addr), payload)
	require.Equal(t, destination.Unknown, out.Class, out.Error)
	require.Contains(t, out.Error, "after the request was written")
	require.Equal(t, 1, s.Count(key+"@courier.invalid"))
}

func TestRefusedDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	out := deliver(t, adapter(t, addr), payload)
	require.Equal(t, destination.NotSent, out.Class, out.Error)
	require.Contains(t, out.Error, "not sent, failed before the request was written: dial tcp "+addr+": connect: connection refused")
}

func TestRecipientRefused(t *testing.T) {
	s := sink(t)
	s.Inject(lab.MailRejectRecipient)
	out := deliver(t, adapter(t, s.Addr), payload)
	require.Equal(t, destination.Rejected, out.Class, out.Error)
	require.Equal(t, 550, out.StatusCode)
	require.Equal(t, "the server refused RCPT TO ops@example.com, nothing sent: SMTP error 550: no such mailbox: ops@example.com", out.Error)
	require.Empty(t, s.Messages())

	s.Inject(lab.MailDeferRecipient)
	out = deliver(t, adapter(t, s.Addr), payload)
	require.Equal(t, destination.Throttled, out.Class, out.Error)
	require.Equal(t, "the server refused RCPT TO ops@example.com for now, nothing sent: SMTP error 450: mailbox busy: ops@example.com", out.Error)
	require.Empty(t, s.Messages())
}

// TestAnswerAfterData: the server's own answer to the message's end is
// what the attempt did: 4xx took nothing for now, 5xx refused it.
func TestAnswerAfterData(t *testing.T) {
	s := sink(t)
	a := adapter(t, s.Addr)
	s.Inject(lab.MailDeferData)
	out := deliver(t, a, payload)
	require.Equal(t, destination.Throttled, out.Class, out.Error)
	require.Equal(t, "the server did not accept the message for now: SMTP error 451: mailbox full, try later", out.Error)
	s.Inject(lab.MailRefuseData)
	out = deliver(t, a, payload)
	require.Equal(t, destination.Rejected, out.Class, out.Error)
	require.Equal(t, "the server refused the message: SMTP error 554: message refused", out.Error)
	require.Empty(t, s.Messages())
}

// TestAttemptDeadline: a server that never greets holds the attempt only
// until its context ends, and nothing was sent.
func TestAttemptDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	out := adapter(t, ln.Addr().String()).Deliver(ctx, request(payload))
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, destination.NotSent, out.Class, out.Error)
	require.Contains(t, out.Error, "context deadline exceeded")
}

// TestPayloadRejected: a payload that does not fit is refused before any
// connection (the address here takes none: a dial would be not sent).
func TestPayloadRejected(t *testing.T) {
	a := adapter(t, "127.0.0.1:1")
	cases := []struct{ payload, want string }{
		{`{"subject": "s", "cc": ["x@example.com"]}`, `payload: json: unknown field "cc"; the smtp destination takes {"to": ["a@example.com"] (optional), "subject": "...", "text": "..."}`},
		{`{"text": "t"}`, "payload: subject: required"},
		{`{"subject": "a\r\nBcc: x@example.com"}`, "payload: subject: must be one line"},
		{`{"subject": "s", "to": []}`, "payload: to: empty; name the recipients, or leave to out for the destination's"},
		{`{"subject": "s", "to": ["nobody"]}`, `payload: to: [0]: "nobody" is not an email address (mail: missing '@' or angle-addr), e.g. ops@example.com or "Ops <ops@example.com>"`},
		{`[1]`, "payload: json: cannot unmarshal array into Go value of type smtpdest.Payload"},
	}
	for _, c := range cases {
		out := deliver(t, a, c.payload)
		require.Equal(t, destination.Rejected, out.Class, c.payload)
		require.Contains(t, out.Error, c.want)
	}
	none, err := smtpdest.New(smtpdest.Options{Addr: "127.0.0.1:1", From: "courier@example.com"})
	require.NoError(t, err)
	out := deliver(t, none, `{"subject": "s"}`)
	require.Equal(t, destination.Rejected, out.Class)
	require.Equal(t, `payload: to: no recipients: the destination names none, so the payload must ("to": ["a@example.com"])`, out.Error)
}

func TestOptionsBad(t *testing.T) {
	_, err := smtpdest.New(smtpdest.Options{Addr: "mail.example.com", From: "courier", Domain: "-x y"})
	require.EqualError(t, err, "smtp destination: addr: \"mail.example.com\" is not host:port, e.g. mail.example.com:587\n"+
		"from: \"courier\" is not an email address (mail: missing '@' or angle-addr), e.g. ops@example.com or \"Ops <ops@example.com>\"\n"+
		"domain: \"-x y\" is not a domain name such as example.com")
}

// TestStartTLS: with TLS set, the mail goes over STARTTLS to a server whose
// certificate the adapter trusts, and nothing goes to one it does not.
func TestStartTLS(t *testing.T) {
	ca, caKey := testcert.New(t, nil, nil, "courier test CA", nil)
	cert, key := testcert.New(t, ca, caKey, "mail", []string{"127.0.0.1"})
	s, err := lab.StartMailSink(lab.MailSinkOptions{TLS: &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: key}}}})
	require.NoError(t, err)
	defer s.Close()
	with := func(roots *x509.CertPool) *smtpdest.Adapter {
		a, err := smtpdest.New(smtpdest.Options{Addr: s.Addr, From: "courier@example.com", To: []string{"ops@example.com"},
			TLS: &tls.Config{RootCAs: roots}})
		require.NoError(t, err)
		return a
	}
	trusted := x509.NewCertPool()
	trusted.AddCert(ca)
	out := deliver(t, with(trusted), payload)
	require.Equal(t, destination.Created, out.Class, out.Error)
	require.True(t, s.Messages()[0].TLS)

	out = deliver(t, with(x509.NewCertPool()), payload)
	require.Equal(t, destination.NotSent, out.Class, out.Error)
	require.Contains(t, out.Error, "not sent, greeting, EHLO or STARTTLS failed: tls: failed to verify certificate")
	require.Len(t, s.Messages(), 1, "nothing sent to a server the adapter does not trust")

	plain := sink(t)
	a, err := smtpdest.New(smtpdest.Options{Addr: plain.Addr, From: "courier@example.com", To: []string{"ops@example.com"},
		TLS: &tls.Config{RootCAs: trusted}})
	require.NoError(t, err)
	out = deliver(t, a, payload)
	require.Equal(t, destination.NotSent, out.Class, out.Error)
	require.Equal(t, "not sent, greeting, EHLO or STARTTLS failed: smtp: server doesn't support STARTTLS", out.Error)
	require.Empty(t, plain.Messages(), "nothing sent in the clear")
}
