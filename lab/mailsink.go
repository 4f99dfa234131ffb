package lab

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// MailFault is a failure the mail sink stages for its next message.
type MailFault string

const (
	// MailDropAfterData stores the next message, then closes the
	// connection before the server's 250 reaches the client: the mail is
	// delivered and the sender cannot know it.
	MailDropAfterData MailFault = "drop_after_data"
	// MailRejectRecipient answers the next RCPT TO with 550: no mailbox,
	// nothing delivered.
	MailRejectRecipient MailFault = "reject_recipient"
	// MailDeferRecipient answers the next RCPT TO with 450: not now,
	// nothing delivered.
	MailDeferRecipient MailFault = "defer_recipient"
	// MailDeferData and MailRefuseData answer the next message's end
	// with 451 and 554: not taken, nothing delivered.
	MailDeferData  MailFault = "defer_data"
	MailRefuseData MailFault = "refuse_data"
)

// Mail is one message the sink accepted.
type Mail struct {
	// MessageID is its Message-ID header without the angle brackets.
	MessageID string
	// From and To are the envelope's; a message read back from its file
	// has none.
	From string
	To   []string
	Data []byte
	// TLS: it arrived over STARTTLS.
	TLS bool
}

// MailSink is an SMTP server on loopback that keeps every message it
// accepts: in memory, and as files under its directory when it has one
// (read back when it starts again, so its count survives a restart).
type MailSink struct {
	// Addr is where it listens, host:port.
	Addr   string
	dir    string
	delay  time.Duration
	server *smtp.Server

	mu     sync.Mutex
	mails  []Mail
	faults map[MailFault]int
}

// MailSinkOptions configure a mail sink.
type MailSinkOptions struct {
	// Addr is where it listens; empty: a free loopback port.
	Addr string
	// Dir, when set, keeps every message as a file there too.
	Dir string
	// TLS, when set, is offered to clients with STARTTLS.
	TLS *tls.Config
	// AnswerDelay holds every answer to a message's end this long after
	// the message is kept: a server slow to confirm what it took.
	AnswerDelay time.Duration
}

// StartMailSink serves a mail sink.
func StartMailSink(o MailSinkOptions) (*MailSink, error) {
	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s := &MailSink{dir: o.Dir, delay: o.AnswerDelay, faults: map[MailFault]int{}}
	if s.dir != "" {
		if err := s.load(); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mail sink: cannot listen on %s: %w", addr, err)
	}
	s.Addr = ln.Addr().String()
	s.server = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &sinkSession{sink: s, conn: c}, nil
	}))
	s.server.Domain = "courier-lab"
	s.server.TLSConfig = o.TLS
	s.server.ReadTimeout, s.server.WriteTimeout = time.Minute, time.Minute
	s.server.ErrorLog = log.New(io.Discard, "", 0) // the dropped connections are on purpose
	go func() { _ = s.server.Serve(ln) }()
	return s, nil
}

// Inject stages f for the next message.
func (s *MailSink) Inject(f MailFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[f]++
}

// take consumes a staged f, saying whether there was one.
func (s *MailSink) take(f MailFault) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults[f] == 0 {
		return false
	}
	s.faults[f]--
	return true
}

// Messages are the accepted messages, oldest first.
func (s *MailSink) Messages() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mails)
}

// Count is how many accepted messages carry messageID (with or without its
// angle brackets).
func (s *MailSink) Count(messageID string) int {
	id := bareID(messageID)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.mails {
		if m.MessageID == id {
			n++
		}
	}
	return n
}

// Close stops serving.
func (s *MailSink) Close() error { return s.server.Close() }

func (s *MailSink) keep(m Mail) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir != "" {
		name := filepath.Join(s.dir, fmt.Sprintf("%06d.eml", len(s.mails)+1))
		if err := os.WriteFile(name, m.Data, 0o600); err != nil {
			return err
		}
	}
	s.mails = append(s.mails, m)
	return nil
}

// load reads the messages kept under the sink's directory.
func (s *MailSink) load() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("mail sink: %w", err)
	}
	names, err := filepath.Glob(filepath.Join(s.dir, "*.eml"))
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return fmt.Errorf("mail sink: %w", err)
		}
		m := Mail{Data: b}
		if msg, err := mail.ReadMessage(bytes.NewReader(b)); err == nil {
			m.MessageID = bareID(msg.Header.Get("Message-ID"))
		}
		s.mails = append(s.mails, m)
	}
	return nil
}

func bareID(id string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(id), "<"), ">")
}

// sinkSession is one client's transaction.
type sinkSession struct {
	sink *MailSink
	conn *smtp.Conn
	from string
	to   []string
}

func (ss *sinkSession) Mail(from string, _ *smtp.MailOptions) error {
	ss.from = from
	return nil
}

func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if ss.sink.take(MailRejectRecipient) {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox: " + to}
	}
	if ss.sink.take(MailDeferRecipient) {
		return &smtp.SMTPError{Code: 450, EnhancedCode: smtp.EnhancedCode{4, 2, 1}, Message: "mailbox busy: " + to}
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *sinkSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if ss.sink.take(MailDeferData) {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 1}, Message: "mailbox full, try later"}
	}
	if ss.sink.take(MailRefuseData) {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "message refused"}
	}
	_, overTLS := ss.conn.TLSConnectionState()
	m := Mail{From: ss.from, To: ss.to, Data: b, TLS: overTLS}
	msg, err := mail.ReadMessage(bytes.NewReader(b))
	if err != nil {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "not a message: " + err.Error()}
	}
	m.MessageID = bareID(msg.Header.Get("Message-ID"))
	if err := ss.sink.keep(m); err != nil {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "cannot keep the message"}
	}
	if ss.sink.take(MailDropAfterData) {
		// Stored, and the reply will find no connection to go to.
		_ = ss.conn.Conn().Close()
		return nil
	}
	time.Sleep(ss.sink.delay)
	return nil
}

func (ss *sinkSession) Reset() { ss.from, ss.to = "", nil }

func (ss *sinkSession) Logout() error { return nil }
