// Package smtpdest is a destination that sends email through SMTP, one
// message per delivery. It is written on Courier's public destination API
// alone, as a team writes its own. Courier's worker opens one for each
// destination with adapter smtp in the destinations file; a worker binary
// of a team's own can also register it by name (adapter go).
//
// SMTP cannot deduplicate: a server that accepted a message and lost the
// connection before its answer reached Courier has delivered it, and a
// resend would deliver it twice. Declare the destination with dedup none,
// so such an unknown outcome parks for a person's review. The message's
// Message-ID is derived from the delivery's key (MessageID), so the
// reviewer can search the mailbox for it and name it as the resource id.
//
// The payload is a JSON object:
//
//	{"to": ["ops@example.com"], "subject": "Order 1042 shipped", "text": "..."}
//
// subject is required (one line); text is the plain-text body; to, when
// present, replaces the destination's recipients. Any other field, or a
// value that does not fit, rejects the delivery before anything is sent.
package smtpdest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/abde64c9/courier/destination"
)

// DefaultDomain is the right-hand side of the Message-IDs when Options
// name none: reserved, so it can never be mistaken for a real host.
const DefaultDomain = "courier.invalid"

// Options configure an Adapter.
type Options struct {
	// Addr is the SMTP server's host:port, e.g. "mail.example.com:587".
	Addr string
	// From is the envelope sender and the From header, e.g.
	// "Courier <courier@example.com>".
	From string
	// To are the recipients of a payload that names none.
	To []string
	// Domain is the right-hand side of every Message-ID; empty:
	// DefaultDomain.
	Domain string
	// Hello is the name the adapter gives in EHLO; empty: "localhost".
	Hello string
	// TLS, when set, makes the adapter switch to TLS with STARTTLS before
	// it names the sender, and send nothing to a server that does not
	// offer it. Its ServerName, when empty, is Addr's host.
	TLS *tls.Config
}

// Adapter sends one message per attempt. It holds no connection between
// attempts.
type Adapter struct {
	addr   string
	from   *mail.Address
	to     []*mail.Address
	domain string
	hello  string
	tls    *tls.Config
	dialer net.Dialer
}

// New checks o and returns its adapter.
func New(o Options) (*Adapter, error) {
	a, err := o.adapter()
	if err != nil {
		return nil, fmt.Errorf("smtp destination: %w", err)
	}
	return a, nil
}

// Check reports every way o is not usable, each naming its field.
func (o Options) Check() error {
	_, err := o.adapter()
	return err
}

func (o Options) adapter() (*Adapter, error) {
	var errs []error
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil || port == "" {
		errs = append(errs, fmt.Errorf("addr: %q is not host:port, e.g. mail.example.com:587", o.Addr))
	}
	from, err := address(o.From)
	if err != nil {
		errs = append(errs, fmt.Errorf("from: %w", err))
	}
	to, err := addresses(o.To)
	if err != nil {
		errs = append(errs, fmt.Errorf("to: %w", err))
	}
	a := &Adapter{addr: o.Addr, from: from, to: to, domain: o.Domain, hello: o.Hello, tls: o.TLS}
	if a.tls != nil && a.tls.ServerName == "" {
		a.tls = a.tls.Clone()
		a.tls.ServerName = host
	}
	if a.domain == "" {
		a.domain = DefaultDomain
	}
	if !dotAtom(a.domain) {
		errs = append(errs, fmt.Errorf("domain: %q is not a domain name such as example.com", o.Domain))
	}
	if a.hello == "" {
		a.hello = "localhost"
	}
	if !dotAtom(a.hello) {
		errs = append(errs, fmt.Errorf("hello: %q is not a host name", o.Hello))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return a, nil
}

// MessageID is the Message-ID (without its angle brackets) of the mail
// for key, with domain as its right-hand side: the receipt's resource id.
func MessageID(key, domain string) string { return key + "@" + domain }

// MessageID is the Message-ID of the mail for key at this adapter.
func (a *Adapter) MessageID(key string) string { return MessageID(key, a.domain) }

// Payload is the JSON a delivery to an SMTP destination carries.
type Payload struct {
	// To, when present, replaces the destination's recipients.
	To      []string `json:"to,omitempty"`
	Subject string   `json:"subject"`
	Text    string   `json:"text,omitempty"`
}

// quitTimeout bounds the wait for the answer to QUIT.
const quitTimeout = time.Second

// maxSubject keeps the Subject header within SMTP's line limit.
const maxSubject = 900

// Deliver sends req's mail once. Every failure before the message's final
// "." is written leaves no mail (NotSent, or the server's 4xx Throttled and
// 5xx Rejected); after it, only the server's answer tells, and without one
// the outcome is Unknown.
func (a *Adapter) Deliver(ctx context.Context, req destination.Request) destination.Outcome {
	to, msg, err := a.compose(req)
	if err != nil {
		return destination.Outcome{Class: destination.Rejected, Error: "payload: " + err.Error()}
	}
	conn, err := a.dialer.DialContext(ctx, "tcp", a.addr)
	if err != nil {
		return destination.Failed(err, false)
	}
	// The client sets its own deadlines per command: the attempt's end
	// closes the connection instead.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	var c *smtp.Client
	if a.tls == nil {
		c = smtp.NewClient(conn)
	} else if c, err = smtp.NewClientStartTLS(conn, a.tls); err != nil {
		return beforeData(ctx, stepHello, err)
	}
	defer c.Close()
	// Over TLS, the handshake happens here, with the EHLO after STARTTLS.
	if err := c.Hello(a.hello); err != nil {
		return beforeData(ctx, stepHello, err)
	}
	opts := &smtp.MailOptions{UTF8: !ascii(a.from.Address), Size: int64(len(msg))}
	for _, r := range to {
		opts.UTF8 = opts.UTF8 || !ascii(r.Address)
	}
	if err := c.Mail(a.from.Address, opts); err != nil {
		return beforeData(ctx, "MAIL FROM", err)
	}
	for _, r := range to {
		if err := c.Rcpt(r.Address, nil); err != nil {
			return beforeData(ctx, "RCPT TO "+r.Address, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return beforeData(ctx, "DATA", err)
	}
	if _, err := w.Write(msg); err != nil {
		// The final "." was not written: the server cannot have taken it.
		return beforeData(ctx, "the message's content", err)
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		return afterData(ctx, err)
	}
	// The mail is delivered: a slow goodbye must not hold the answer back.
	c.CommandTimeout = quitTimeout
	_ = c.Quit()
	id := a.MessageID(req.Key)
	body, _ := json.Marshal(map[string]string{"message_id": id, "reply": excerpt(resp.StatusText)})
	return destination.Outcome{Class: destination.Created, StatusCode: 250, Receipt: &destination.Receipt{
		ResourceID: id, Status: "accepted", StatusCode: 250, Body: body}}
}

// stepHello is the greeting, EHLO and STARTTLS: a 5xx there refuses the
// client, not this mail, so it is no reason to reject the delivery.
const stepHello = "greeting, EHLO or STARTTLS"

// beforeData classifies a failure before the message's end was written:
// the server's own refusal as it says, anything else as not sent.
func beforeData(ctx context.Context, step string, err error) destination.Outcome {
	var reply *smtp.SMTPError
	if errors.As(err, &reply) {
		switch reply.Code / 100 {
		case 4:
			return destination.Outcome{Class: destination.Throttled, StatusCode: reply.Code,
				Error: fmt.Sprintf("the server refused %s for now, nothing sent: %v", step, reply)}
		case 5:
			if step != stepHello {
				return destination.Outcome{Class: destination.Rejected, StatusCode: reply.Code,
					Error: fmt.Sprintf("the server refused %s, nothing sent: %v", step, reply)}
			}
		}
	}
	return destination.Outcome{Class: destination.NotSent, Error: fmt.Sprintf("not sent, %s failed: %v", step, cause(ctx, err))}
}

// afterData classifies a failure once the message's final "." may have
// been written: the server's answer when it gave one, else Unknown.
func afterData(ctx context.Context, err error) destination.Outcome {
	var reply *smtp.SMTPError
	if errors.As(err, &reply) {
		switch reply.Code / 100 {
		case 4:
			return destination.Outcome{Class: destination.Throttled, StatusCode: reply.Code,
				Error: fmt.Sprintf("the server did not accept the message for now: %v", reply)}
		case 5:
			return destination.Outcome{Class: destination.Rejected, StatusCode: reply.Code,
				Error: fmt.Sprintf("the server refused the message: %v", reply)}
		}
	}
	return destination.Outcome{Class: destination.Unknown, Error: destination.AfterWrite(cause(ctx, err))}
}

// cause names the attempt's end when it is what broke the connection.
func cause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// compose reads the payload and writes the message: its recipients and
// its text, headers first.
func (a *Adapter) compose(req destination.Request) ([]*mail.Address, []byte, error) {
	dec := json.NewDecoder(bytes.NewReader(req.Payload))
	dec.DisallowUnknownFields()
	var p Payload
	if err := dec.Decode(&p); err != nil {
		return nil, nil, fmt.Errorf(`%w; the smtp destination takes {"to": ["a@example.com"] (optional), "subject": "...", "text": "..."}`, err)
	}
	var errs []error
	to := a.to
	if p.To != nil {
		var err error
		if to, err = addresses(p.To); err != nil {
			errs = append(errs, fmt.Errorf("to: %w", err))
		}
	}
	switch {
	case p.To != nil && len(p.To) == 0:
		errs = append(errs, errors.New("to: empty; name the recipients, or leave to out for the destination's"))
	case len(to) == 0 && p.To == nil:
		errs = append(errs, errors.New(`to: no recipients: the destination names none, so the payload must ("to": ["a@example.com"])`))
	}
	switch {
	case strings.TrimSpace(p.Subject) == "":
		errs = append(errs, errors.New("subject: required"))
	case strings.ContainsAny(p.Subject, "\r\n"):
		errs = append(errs, errors.New("subject: must be one line"))
	case len(p.Subject) > maxSubject:
		errs = append(errs, fmt.Errorf("subject: %d bytes, at most %d", len(p.Subject), maxSubject))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	var msg bytes.Buffer
	header := func(name, value string) { fmt.Fprintf(&msg, "%s: %s\r\n", name, value) }
	header("Message-ID", "<"+a.MessageID(req.Key)+">")
	header("Date", time.Now().Format(time.RFC1123Z))
	header("From", a.from.String())
	names := make([]string, len(to))
	for i, r := range to {
		names[i] = r.String()
	}
	header("To", strings.Join(names, ", "))
	header("Subject", mime.QEncoding.Encode("utf-8", p.Subject))
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	msg.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&msg)
	_, _ = qp.Write([]byte(p.Text))
	_ = qp.Close()
	return to, msg.Bytes(), nil
}

func address(s string) (*mail.Address, error) {
	a, err := mail.ParseAddress(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not an email address (%v), e.g. ops@example.com or \"Ops <ops@example.com>\"", s, err)
	}
	return a, nil
}

func addresses(ss []string) ([]*mail.Address, error) {
	out := make([]*mail.Address, 0, len(ss))
	var errs []error
	for i, s := range ss {
		a, err := address(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("[%d]: %w", i, err))
			continue
		}
		out = append(out, a)
	}
	return out, errors.Join(errs...)
}

// dotAtom says whether s is a plain domain-like name: what a Message-ID's
// right-hand side and EHLO's argument may be.
func dotAtom(s string) bool {
	if s == "" || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// maxReply bounds the server's reply a receipt keeps.
const maxReply = 200

func excerpt(s string) string {
	if len(s) <= maxReply {
		return s
	}
	return strings.ToValidUTF8(s[:maxReply], "") + "…"
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
