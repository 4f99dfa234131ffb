package lab

import (
	"io"
	"net"
	"sync"
)

// Link is a TCP relay between a process and a server, which the lab can cut
// at a moment of its choosing: whatever the process sends after the cut
// never arrives (a network partition at a known instant).
type Link struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

// NewLink relays a loopback port of its own to target.
func NewLink(target string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{ln: ln, target: target}
	go l.accept()
	return l, nil
}

// Addr is the address to connect to instead of the target.
func (l *Link) Addr() string { return l.ln.Addr().String() }

func (l *Link) accept() {
	acceptRelays(l.ln, l.target, func(c, up net.Conn) {
		if l.track(c, up) {
			go relay(c, up)
			go relay(up, c)
		}
	})
}

// acceptRelays accepts connections on ln until it is closed, dials target
// for each, and hands both ends to serve.
func acceptRelays(ln net.Listener, target string, serve func(client, up net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		serve(c, up)
	}
}

func (l *Link) track(cs ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	l.conns = append(l.conns, cs...)
	return true
}

func relay(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// Cut closes every relayed connection and refuses new ones.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// Close cuts the link and stops listening.
func (l *Link) Close() error {
	l.Cut()
	return l.ln.Close()
}
