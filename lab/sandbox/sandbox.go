// Package sandbox is a real loopback HTTP ticket service ("helpdesk") for
// tests, local development and benchmarks. Each destination behaves like one
// kind of real provider (honours idempotency keys, ignores them, has none, or
// can be searched by key), tickets persist in a SQLite file across restarts,
// and faults such as "commit, then drop the connection" can be queued per
// destination to reproduce the seed labs' cases. Lab only: the dev stack,
// the tests, the bench and the soak import it.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Mode is how a destination treats idempotency keys.
type Mode string

const (
	// ModeHonoursKeys stores each key with its payload hash in the ticket's
	// transaction and replays the first receipt for a repeat.
	ModeHonoursKeys Mode = "honours-keys"
	// ModeIgnoresKeys accepts the key header and ignores it: every POST
	// creates a ticket.
	ModeIgnoresKeys Mode = "ignores-keys"
	// ModeNoKeys knows nothing about keys: every POST creates a ticket.
	ModeNoKeys Mode = "no-keys"
	// ModeLookup does not deduplicate but stores the key with the ticket,
	// so GET /{dest}/tickets?key=K can find it.
	ModeLookup Mode = "lookup"
)

// KeyHeader carries the idempotency key; ReplayedHeader marks a replayed receipt.
const (
	KeyHeader      = "Idempotency-Key"
	ReplayedHeader = "Idempotent-Replayed"
)

// maxRequestLog bounds each destination's in-memory request log.
const maxRequestLog = 10_000

// maxBody bounds a request body.
const maxBody = 1 << 20

// DefaultModes is one destination of each mode.
func DefaultModes() map[string]Mode {
	return map[string]Mode{
		"helpdesk": ModeHonoursKeys,
		"ignoring": ModeIgnoresKeys,
		"legacy":   ModeNoKeys,
		"crm":      ModeLookup,
	}
}

// Result is what the service did with one request, in the seed's words.
type Result string

const (
	ResultWrittenThenClosed  Result = "written_then_connection_closed"
	ResultWrittenThenReceipt Result = "written_then_receipt_sent"
	ResultWrittenThenDelayed Result = "written_then_delayed"
	ResultCachedReceipt      Result = "cached_receipt"
	ResultValidationRejected Result = "validation_rejected"
	ResultKeyReused          Result = "key_reused"
	ResultInFlight           Result = "in_flight"
	ResultUnavailable        Result = "unavailable"
	ResultDelayedThenClosed  Result = "delayed_then_closed"
)

// RequestLog is one POST as the service saw it (the seed's observed.requests).
type RequestLog struct {
	Request  int     `json:"request"`
	Key      *string `json:"key"`
	Write    bool    `json:"write"`
	CacheHit bool    `json:"cache_hit"`
	Result   Result  `json:"result"`
}

// FaultKind is a transport failure the service can stage.
type FaultKind string

const (
	// FaultCloseAfterCommit commits the ticket, then closes the TCP
	// connection without a byte of response: the effect exists, the client
	// cannot know it.
	FaultCloseAfterCommit FaultKind = "close_after_commit"
	// FaultDelayAfterCommit commits, then waits Delay before answering, so
	// a client with a shorter timeout gives up after the effect.
	FaultDelayAfterCommit FaultKind = "delay_after_commit"
	// FaultDelayBeforeCommit waits Delay, then closes the connection
	// without writing anything: a timeout before any effect.
	FaultDelayBeforeCommit FaultKind = "delay_before_commit"
	// FaultFail503 answers 503 before any write, with Retry-After: Delay
	// in whole seconds (1 when shorter).
	FaultFail503 FaultKind = "fail_503"
	// FaultGarbledLookup answers a lookup (GET) 200 with an HTML
	// maintenance page: a success status over an answer that says nothing
	// about the key, which a lookup must not read as "not found".
	FaultGarbledLookup FaultKind = "garbled_lookup"
	// The echo kinds answer with what they were sent, headers (as sent,
	// base64 and URL-encoded) and body, as debugging proxies, some
	// partners' errors and many test doubles do: Courier must keep its
	// credentials out of what it records of such an answer.
	// FaultEcho400 and FaultEcho500 answer before any write;
	// FaultEchoCreated writes the ticket and adds the echo to its receipt.
	FaultEcho400     FaultKind = "echo_400"
	FaultEcho500     FaultKind = "echo_500"
	FaultEchoCreated FaultKind = "echo_created"
)

// Fault is queued per destination and consumed by the next Count POSTs, in
// order; a lookup fault (garbled_lookup) by the next Count lookups
// instead, in a queue of its own, so creates and lookups never spend each
// other's faults. A POST consumes one fault even when it does not apply:
// the after-commit kinds only act on a POST that writes a ticket, so a
// replay, an in-flight answer or a rejection spends them without effect.
type Fault struct {
	Kind  FaultKind
	Count int           // requests it applies to; 0 means 1
	Delay time.Duration // for the delay kinds; fail_503's Retry-After
}

// forLookup reports whether the fault is spent by lookups, not creates.
func (f Fault) forLookup() bool { return f.Kind == FaultGarbledLookup }

func (f Fault) validate() error {
	switch f.Kind {
	case FaultCloseAfterCommit, FaultFail503, FaultGarbledLookup, FaultEcho400, FaultEcho500, FaultEchoCreated:
	case FaultDelayAfterCommit, FaultDelayBeforeCommit:
		if f.Delay <= 0 {
			return fmt.Errorf("fault %s needs a positive delay", f.Kind)
		}
	default:
		return fmt.Errorf("unknown fault %q; use close_after_commit, delay_after_commit, delay_before_commit, fail_503, garbled_lookup, echo_400, echo_500 or echo_created", f.Kind)
	}
	if f.Count < 0 {
		return errors.New("fault count must not be negative")
	}
	return nil
}

// Server is the ticket service. Create it with Open.
type Server struct {
	store *store
	modes map[string]Mode
	mux   *http.ServeMux

	stopOnce sync.Once
	stopped  chan struct{} // closed on Close: cuts staged delays short

	mu           sync.Mutex
	faults       map[string][]Fault // spent by creates
	lookupFaults map[string][]Fault // spent by lookups
	logs         map[string]*requestLog
	inFlight     map[inFlightKey]bool
}

type inFlightKey struct{ dest, key string }

type requestLog struct {
	next    int
	entries []RequestLog
}

// Open opens (or creates) the SQLite file at dbPath and serves the given
// destinations. Tickets already in the file are kept.
func Open(dbPath string, modes map[string]Mode) (*Server, error) {
	for name, m := range modes {
		if personalities[m] == nil {
			return nil, fmt.Errorf("sandbox: destination %q: unknown mode %q", name, m)
		}
	}
	st, err := openStore(dbPath)
	if err != nil {
		return nil, err
	}
	s := &Server{
		store:        st,
		modes:        maps.Clone(modes),
		stopped:      make(chan struct{}),
		faults:       map[string][]Fault{},
		lookupFaults: map[string][]Fault{},
		logs:         map[string]*requestLog{},
		inFlight:     map[inFlightKey]bool{},
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /admin/faults", s.handleFaults)
	s.mux.HandleFunc("GET /admin/records", s.handleRecords)
	s.mux.HandleFunc("GET /admin/requests", s.handleRequests)
	s.mux.HandleFunc("POST /admin/reset", s.handleReset)
	s.mux.HandleFunc("/{dest}/{rest...}", s.handleCreate)
	// A GET at a lookup route is more specific than the create catch-all,
	// so it is served here at every destination; one that cannot be
	// searched there refuses it.
	for _, route := range lookupRoutes() {
		s.mux.HandleFunc("GET /{dest}"+route, s.lookupAt(route))
	}
	return s, nil
}

// Handler serves the ticket and admin routes.
func (s *Server) Handler() http.Handler { return s.mux }

// Close ends staged delays and closes the database.
func (s *Server) Close() error {
	s.stop()
	return s.store.close()
}

func (s *Server) stop() { s.stopOnce.Do(func() { close(s.stopped) }) }

// Records lists the destination's stored tickets, oldest first.
func (s *Server) Records(dest string) ([]Record, error) {
	return s.store.records(context.Background(), dest)
}

// Requests lists the destination's request log, oldest first (the last
// 10,000 requests).
func (s *Server) Requests(dest string) []RequestLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[dest]
	if l == nil {
		return []RequestLog{}
	}
	out := slices.Clone(l.entries[max(0, len(l.entries)-maxRequestLog):])
	// Entries are appended when a request's result is decided, so requests
	// racing each other may be out of arrival order.
	slices.SortFunc(out, func(a, b RequestLog) int { return a.Request - b.Request })
	return out
}

// Inject queues a fault for the destination's next POSTs, or for its next
// lookups (garbled_lookup).
func (s *Server) Inject(dest string, f Fault) error {
	mode, ok := s.modes[dest]
	if !ok {
		return fmt.Errorf("sandbox: unknown destination %q", dest)
	}
	if err := f.validate(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if f.forLookup() && personalities[mode].lookupRoute == "" {
		// No lookup would ever spend it.
		return fmt.Errorf("sandbox: fault %s: destination %q (%s) has no lookup", f.Kind, dest, mode)
	}
	f.Count = max(f.Count, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.forLookup() {
		s.lookupFaults[dest] = append(s.lookupFaults[dest], f)
	} else {
		s.faults[dest] = append(s.faults[dest], f)
	}
	return nil
}

// Reset deletes the destination's tickets, keys, request log and queued
// faults, so ticket numbering starts again at ticket-1.
func (s *Server) Reset(dest string) error {
	if _, ok := s.modes[dest]; !ok {
		return fmt.Errorf("sandbox: unknown destination %q", dest)
	}
	s.mu.Lock()
	delete(s.logs, dest)
	delete(s.faults, dest)
	delete(s.lookupFaults, dest)
	s.mu.Unlock()
	return s.store.reset(context.Background(), dest)
}

// arrive numbers a POST and takes its fault, if one is queued.
func (s *Server) arrive(dest string) (int, *Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[dest]
	if l == nil {
		l = &requestLog{}
		s.logs[dest] = l
	}
	l.next++
	return l.next, take(s.faults, dest)
}

// arriveLookup takes a lookup's fault, if one is queued.
func (s *Server) arriveLookup(dest string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return take(s.lookupFaults, dest)
}

// take spends one use of the destination's first queued fault; s.mu held.
func take(faults map[string][]Fault, dest string) *Fault {
	q := faults[dest]
	if len(q) == 0 {
		return nil
	}
	f := q[0]
	if q[0].Count--; q[0].Count == 0 {
		faults[dest] = q[1:]
	}
	return &f
}

func (s *Server) record(dest string, e RequestLog) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[dest]
	if l == nil { // reset while the request was being handled
		l = &requestLog{}
		s.logs[dest] = l
	}
	l.entries = append(l.entries, e)
	// Trim in batches so appending stays cheap.
	if len(l.entries) >= 2*maxRequestLog {
		l.entries = slices.Clone(l.entries[len(l.entries)-maxRequestLog:])
	}
}

// claim marks a key as being processed; false if it already is.
func (s *Server) claim(dest, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := inFlightKey{dest, key}
	if s.inFlight[k] {
		return false
	}
	s.inFlight[k] = true
	return true
}

func (s *Server) release(dest, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inFlight, inFlightKey{dest, key})
}

// sleep waits d, or less if the client goes away or the server closes.
func (s *Server) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.stopped:
	}
}

// ListenAndServe serves the sandbox at addr, with tickets in dbPath, until
// ctx is done, then shuts down gracefully.
func ListenAndServe(ctx context.Context, addr, dbPath string, modes map[string]Mode) error {
	s, err := Open(dbPath, modes)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sandbox: listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	slog.Info("sandbox listening", "addr", ln.Addr().String(), "db", dbPath)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("sandbox: serve: %w", err)
	case <-ctx.Done():
	}
	s.stop() // wake staged delays so Shutdown does not wait them out
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("sandbox: shutdown: %w", err)
	}
	return nil
}
