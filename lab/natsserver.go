package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The lab's NATS destination: a stream that captures one subject.
const (
	NATSStream  = "COURIER"
	NATSSubject = "courier.deliveries"
)

// NATS is an embedded NATS server with JetStream on a loopback port, and a
// connection of the lab's own that reads what the streams stored.
type NATS struct {
	// URL is where clients connect, e.g. nats://127.0.0.1:4222.
	URL string
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

// StartNATS starts a NATS server on addr (empty: a free loopback port)
// that keeps its streams under dir, with the lab's stream (NATSStream,
// capturing NATSSubject) whose duplicate window is window; a stream kept
// from an earlier start is taken as it is, its window set to window.
func StartNATS(addr, dir string, window time.Duration) (_ *NATS, err error) {
	host, port := "127.0.0.1", server.RANDOM_PORT
	if addr != "" {
		h, p, err := net.SplitHostPort(addr)
		n, perr := strconv.Atoi(p)
		if err != nil || perr != nil {
			return nil, fmt.Errorf("nats server: %q is not host:port, e.g. 127.0.0.1:14222", addr)
		}
		if host, port = h, n; port == 0 {
			port = server.RANDOM_PORT
		}
	}
	srv, err := server.NewServer(&server.Options{Host: host, Port: port,
		JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	srv.Start()
	n := &NATS{URL: srv.ClientURL(), srv: srv}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if !srv.ReadyForConnections(10 * time.Second) {
		return n, errors.New("nats server: not ready for connections after 10s")
	}
	if n.nc, err = nats.Connect(n.URL, nats.Name("courier-lab")); err != nil {
		return n, fmt.Errorf("nats server: %w", err)
	}
	if n.js, err = jetstream.New(n.nc); err != nil {
		return n, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: NATSStream, Subjects: []string{NATSSubject}, Duplicates: window}); err != nil {
		return n, fmt.Errorf("nats server: stream %s: %w", NATSStream, err)
	}
	return n, nil
}

// CreateStream adds a stream; its Duplicates is how long it remembers
// message ids.
func (n *NATS) CreateStream(ctx context.Context, cfg jetstream.StreamConfig) error {
	if _, err := n.js.CreateStream(ctx, cfg); err != nil {
		return fmt.Errorf("create stream %s: %w", cfg.Name, err)
	}
	return nil
}

// DeleteStream removes a stream and its messages.
func (n *NATS) DeleteStream(ctx context.Context, name string) error {
	return n.js.DeleteStream(ctx, name)
}

// Sequences are the stream sequences of the messages stream holds with
// message id key, the Nats-Msg-Id a NATS destination publishes the
// delivery's key as.
func (n *NATS) Sequences(ctx context.Context, stream, key string) ([]uint64, error) {
	s, err := n.js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	state := s.CachedInfo().State
	var seqs []uint64
	for seq := state.FirstSeq; state.Msgs > 0 && seq <= state.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted
		}
		if err != nil {
			return nil, err
		}
		if m.Header.Get(jetstream.MsgIDHeader) == key {
			seqs = append(seqs, seq)
		}
	}
	return seqs, nil
}

// Count is how many messages the lab's stream holds for key: the effects
// of the deliveries with that key.
func (n *NATS) Count(ctx context.Context, key string) (int, error) {
	seqs, err := n.Sequences(ctx, NATSStream, key)
	return len(seqs), err
}

// Publish publishes data to subject with message id key from the lab's
// own connection, and says whether the stream took it as a duplicate.
func (n *NATS) Publish(ctx context.Context, subject, key string, data []byte) (*jetstream.PubAck, error) {
	return n.js.Publish(ctx, subject, data, jetstream.WithMsgID(key))
}

// Close stops the server.
func (n *NATS) Close() {
	if n.nc != nil {
		n.nc.Close()
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}

// NATSLink relays a client's connections to a NATS server and can lose the
// acknowledgement of a publish after the server received it: the lost
// answer of a message bus.
type NATSLink struct {
	ln     net.Listener
	target string

	mu   sync.Mutex
	lose *loseAck
	late time.Duration
}

// loseAck is a staged loss: the next publish to subject.
type loseAck struct {
	subject []byte
	hold    time.Duration
	after   func()
}

// NewNATSLink relays a loopback port of its own to the server at url.
func NewNATSLink(serverURL string) (*NATSLink, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Scheme != "nats" || u.Host == "" {
		return nil, fmt.Errorf("nats link: %q is not a nats://host:port URL", serverURL)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &NATSLink{ln: ln, target: u.Host}
	go l.accept()
	return l, nil
}

// URL is where a client connects instead of the server.
func (l *NATSLink) URL() string { return "nats://" + l.ln.Addr().String() }

// LoseNextAck stages the loss of the next publish's acknowledgement: the
// publish to subject reaches the server, and from then on nothing the
// server sends on that connection reaches the client. after, if set, runs
// once the publish is forwarded (to wait until the stream stored it); hold
// after it returns the link cuts the connection, and the client
// reconnects through the link.
func (l *NATSLink) LoseNextAck(subject string, hold time.Duration, after func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lose = &loseAck{subject: []byte("PUB " + subject + " "), hold: hold, after: after}
}

// AnswerLate delays everything the server sends by late: a publish's
// acknowledgement comes that long after the stream stored the message.
func (l *NATSLink) AnswerLate(late time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.late = late
}

func (l *NATSLink) lateness() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.late
}

// take returns the staged loss if chunk publishes to its subject.
func (l *NATSLink) take(chunk []byte) *loseAck {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.lose
	if f == nil || !bytes.Contains(chunk, f.subject) {
		return nil
	}
	l.lose = nil
	return f
}

// Close stops listening; relayed connections end with their peers.
func (l *NATSLink) Close() error { return l.ln.Close() }

func (l *NATSLink) accept() {
	acceptRelays(l.ln, l.target, func(c, up net.Conn) {
		var deaf sync.Once
		muted := make(chan struct{})
		go l.toServer(c, up, func() { deaf.Do(func() { close(muted) }) })
		go l.toClient(up, c, muted)
	})
}

// toServer copies the client's bytes to the server, losing the answers
// from the staged publish on.
func (l *NATSLink) toServer(c, up net.Conn, mute func()) {
	defer c.Close()
	defer up.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			f := l.take(buf[:n])
			if f != nil {
				mute() // before the server can answer
			}
			if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				if f.after != nil {
					f.after()
				}
				time.Sleep(f.hold)
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// toClient copies the server's bytes to the client, late if the link
// answers late, until muted.
func (l *NATSLink) toClient(up, c net.Conn, muted <-chan struct{}) {
	defer c.Close()
	defer up.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		select {
		case <-muted: // read and lost, until the connection is cut
		default:
			time.Sleep(l.lateness())
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
