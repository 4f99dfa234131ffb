// Package destinationtest checks from go test that a destination adapter
// keeps the contract it declares. It runs the seed fault cases against the
// adapter, with the faults injected around it (a lost response after the
// effect committed, a timeout before it, a worker that dies between the
// commit and the answer, concurrent attempts with one key, the same key
// with another payload, an invalid payload, a repeat near and past the key
// retention), through Courier's real Delivery workflow: the SDK's test
// environment by default, a real server when Subject.Client is set. Only the
// concurrent attempts go straight to the adapter, as do, on a real server,
// those with another payload (the server refuses them before any attempt).
//
// What a case expects follows from the declared contract and the one
// decision table (contract.Next): an adapter that classifies honestly and
// deduplicates as it declares passes; one that declares more than it does
// fails, with a message that names the case, the contract and what
// happened, and says what to change.
//
//	func TestLedgerKeepsItsContract(t *testing.T) {
//		destinationtest.Run(t, destinationtest.Subject{
//			Adapter:  ledger,
//			Contract: contract.Contract{Dedup: contract.DedupKey, Retry: retry},
//			Count:    ledger.Count,
//		})
//	}
package destinationtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destinations"
)

// Subject is the adapter under test and what the kit needs to see its
// effects.
type Subject struct {
	// Name is the destination's name; empty: "subject".
	Name string
	// Adapter is the adapter under test. For dedup lookup it must implement
	// destination.Lookuper.
	Adapter destination.Adapter
	// Destination is the destination as the destinations file declares it;
	// nil: {Adapter: "go", Contract: Contract}. It is validated exactly as
	// the file is (destinations.Config.Declare).
	Destination *destinations.Destination
	// Contract is the declared contract, used when Destination is nil.
	Contract contract.Contract
	// Count returns how many effects exist at the real destination for a
	// key (destination.Request.Key): read from the destination's own
	// store, never from what the adapter believes. Required.
	Count func(ctx context.Context, key string) (int, error)
	// Payload returns a valid payload, a different one for each n; nil:
	// {"n": n}.
	Payload func(n int) json.RawMessage
	// Invalid, when set, is a payload the destination refuses as invalid:
	// the rejection case runs with it.
	Invalid json.RawMessage
	// Client, when set, runs the deliveries on a real Temporal server, in
	// the client's namespace (with Courier's search attributes), through a
	// worker the kit starts there: no other Courier worker may poll that
	// namespace while the kit runs. nil: the SDK's test environment.
	Client client.Client
}

// Failure is a way the adapter does not keep its contract.
type Failure struct {
	// Case is the seed's name of the fault case.
	Case string
	// Message names the declared contract, says what happened and what to
	// change.
	Message string
}

// String is the failure as Run reports it: the case, then the message.
func (f Failure) String() string { return f.Case + ": " + f.Message }

// Run runs every case that applies to the subject's contract as a subtest,
// and reports each Failure as a test error. A case that does not apply (20
// concurrent attempts at a destination that does not deduplicate) is
// skipped, saying why.
func Run(t *testing.T, s Subject) {
	t.Helper()
	k, err := newKit(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if why := c.skip(k); why != "" {
				t.Skip(why)
			}
			k.logf = t.Logf
			msgs, err := c.run(t.Context(), k)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				t.Error(m)
			}
		})
	}
}

// Check runs every case that applies and returns the failures: findings
// about the adapter, not errors. An error means a case could not run (an
// invalid subject, Count failing, the server unreachable).
func Check(ctx context.Context, s Subject) ([]Failure, error) {
	k, err := newKit(ctx, s)
	if err != nil {
		return nil, err
	}
	defer k.close()
	var out []Failure
	for _, c := range cases {
		if c.skip(k) != "" {
			continue
		}
		msgs, err := c.run(ctx, k)
		if err != nil {
			return out, fmt.Errorf("case %s: %w", c.name, err)
		}
		for _, m := range msgs {
			out = append(out, Failure{Case: c.name, Message: m})
		}
	}
	return out, nil
}

// kit is one run of the cases against one subject.
type kit struct {
	s        Subject
	name     string
	contract contract.Contract
	cfg      destinations.Config
	faults   *faulty
	deliver  deliverer
	run      string // makes business ids unique to this run
	tenant   string
	n        int
	// logf, under Run, logs what a case could not exercise.
	logf func(format string, args ...any)
}

func newKit(ctx context.Context, s Subject) (*kit, error) {
	if s.Adapter == nil {
		return nil, errors.New("destinationtest: Subject.Adapter is nil: give the adapter under test")
	}
	if s.Count == nil {
		return nil, errors.New("destinationtest: Subject.Count is nil: give a function that counts the effects the destination " +
			"stored for a key, read from the destination itself")
	}
	k := &kit{s: s, name: s.Name, run: uuid.NewString()[:8]}
	if k.name == "" {
		k.name = "subject"
	}
	d := destinations.Destination{Adapter: destinations.AdapterGo, Contract: s.Contract}
	if s.Destination != nil {
		d = *s.Destination
	}
	if err := k.cfg.Declare(k.name, d); err != nil {
		return nil, fmt.Errorf("destinationtest: %w", err)
	}
	decl := k.cfg.Destinations[k.name]
	k.contract = decl.Contract
	if _, ok := s.Adapter.(destination.Lookuper); k.contract.Dedup == contract.DedupLookup && !ok {
		return nil, fmt.Errorf("destinationtest: contract.dedup: lookup, but %T has no Lookup method (destination.Lookuper)", s.Adapter)
	}
	// The kit answers every review itself, so it needs no reviewers' keys.
	decl.Reviewers = nil
	k.cfg.Destinations[k.name] = decl
	if len(decl.Tenants) > 0 {
		k.tenant = decl.Tenants[0] // a tenant the destination serves
	}
	k.faults = &faulty{inner: s.Adapter, count: s.Count, plans: map[string]*plan{}}
	var err error
	if s.Client != nil {
		k.deliver, err = startReal(ctx, s.Client, k.cfg, k.faults)
	} else {
		k.deliver = newTestEnv(k.cfg, k.faults)
	}
	return k, err
}

func (k *kit) close() {
	if k.deliver != nil {
		k.deliver.close()
	}
}

// payload is the n-th valid payload.
func (k *kit) payload(n int) json.RawMessage {
	if k.s.Payload != nil {
		return k.s.Payload(n)
	}
	return json.RawMessage(`{"n": ` + strconv.Itoa(n) + `}`)
}

// next numbers a case's delivery: its business id and its payload.
func (k *kit) next() int {
	k.n++
	return k.n
}

// note logs what a case could not exercise, under Run.
func (k *kit) note(format string, args ...any) {
	if k.logf != nil {
		k.logf(format, args...)
	}
}

// declared names the contract in a failure's message.
func (k *kit) declared() string {
	s := "declared dedup " + string(k.contract.Dedup)
	if r := k.contract.KeyRetention; r > 0 && k.contract.Dedup == contract.DedupKey {
		s += " with key_retention " + time.Duration(r).String()
	}
	return s
}
