package destinationtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/worker/destinationtest"
)

// memory is an in-memory destination: a list of effects, each under a key.
// honoursKeys makes it recognise a key it has seen (for forgetAfter, when
// set); blind makes its lookup never find anything.
type memory struct {
	honoursKeys, blind bool
	forgetAfter        time.Duration

	mu      sync.Mutex
	effects []stored
}

type stored struct {
	key, fingerprint, id string
	at                   time.Time
}

func (m *memory) Deliver(_ context.Context, req destination.Request) destination.Outcome {
	var p struct {
		Invalid bool `json:"invalid"`
	}
	if err := json.Unmarshal(req.Payload, &p); err != nil || p.Invalid {
		return destination.Outcome{Class: destination.Rejected, Error: "invalid payload"}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.honoursKeys {
		for _, e := range m.effects {
			if e.key != req.Key || m.forgetAfter > 0 && time.Since(e.at) > m.forgetAfter {
				continue
			}
			if e.fingerprint != req.Fingerprint {
				return destination.Outcome{Class: destination.Conflict, Error: "key used with another payload"}
			}
			return destination.Outcome{Class: destination.Replayed, Receipt: &destination.Receipt{ResourceID: e.id, Replayed: true}}
		}
	}
	e := stored{key: req.Key, fingerprint: req.Fingerprint, id: fmt.Sprintf("m-%d", len(m.effects)+1), at: time.Now()}
	m.effects = append(m.effects, e)
	return destination.Outcome{Class: destination.Created, Receipt: &destination.Receipt{ResourceID: e.id}}
}

func (m *memory) Lookup(_ context.Context, req destination.Request) (destination.Found, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.effects {
		if e.key == req.Key && !m.blind {
			return destination.Found{Found: true, Receipt: &destination.Receipt{ResourceID: e.id}}, nil
		}
	}
	return destination.Found{}, nil
}

func (m *memory) Count(_ context.Context, key string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.effects {
		if e.key == key {
			n++
		}
	}
	return n, nil
}

var retry = contract.Retry{MaxAttempts: 4, InitialInterval: contract.Duration(100 * time.Millisecond),
	AttemptTimeout: contract.Duration(10 * time.Second), Deadline: contract.Duration(time.Minute)}

func subject(m *memory, dedup contract.Dedup) destinationtest.Subject {
	return destinationtest.Subject{Adapter: m, Count: m.Count, Invalid: json.RawMessage(`{"invalid": true}`),
		Contract: contract.Contract{Dedup: dedup, Retry: retry}}
}

// TestHonestAdaptersPass: a store that keeps the contract it declares
// passes every case that applies, at every dedup kind.
func TestHonestAdaptersPass(t *testing.T) {
	for _, dedup := range []contract.Dedup{contract.DedupKey, contract.DedupUniqueCommit, contract.DedupLookup, contract.DedupNone} {
		t.Run(string(dedup), func(t *testing.T) {
			destinationtest.Run(t, subject(&memory{honoursKeys: dedup == contract.DedupKey || dedup == contract.DedupUniqueCommit}, dedup))
		})
	}
	t.Run("key with a short retention", func(t *testing.T) {
		s := subject(&memory{honoursKeys: true}, contract.DedupKey)
		s.Contract.KeyRetention = contract.Duration(3 * time.Second)
		s.Contract.Retry.AttemptTimeout = contract.Duration(2 * time.Second)
		destinationtest.Run(t, s)
	})
	// A retry could reach it after its retention: a lost response parks.
	t.Run("key with a retention shorter than an attempt", func(t *testing.T) {
		s := subject(&memory{honoursKeys: true}, contract.DedupKey)
		s.Contract.KeyRetention = contract.Duration(2 * time.Second)
		destinationtest.Run(t, s)
	})
	t.Run("declared for one tenant", func(t *testing.T) {
		s := subject(&memory{honoursKeys: true}, contract.DedupKey)
		s.Destination = &destinations.Destination{Adapter: destinations.AdapterGo, Tenants: []string{"acme"}, Contract: s.Contract}
		destinationtest.Run(t, s)
	})
}

// failures runs Check and returns its failures by case.
func failures(t *testing.T, s destinationtest.Subject) map[string]string {
	t.Helper()
	fs, err := destinationtest.Check(t.Context(), s)
	require.NoError(t, err)
	byCase := map[string]string{}
	for _, f := range fs {
		t.Log(f)
		byCase[f.Case] += f.Message
	}
	return byCase
}

// TestLyingAdapterFails: a store that declares dedup key and ignores keys
// fails the kit, naming the case and what to do.
func TestLyingAdapterFails(t *testing.T) {
	byCase := failures(t, subject(&memory{}, contract.DedupKey))
	require.Contains(t, byCase["lost_response_same_key"],
		"declared dedup key, but a repeat with the same key after a lost response made a second effect: declare dedup none until it honours keys")
	require.Contains(t, byCase["20 concurrent requests"], "declared dedup key, but 20 concurrent attempts with one key made 20 effects")
	require.Contains(t, byCase["same_key_changed_payload"], "declared dedup key, but the same key with another payload ended created")
}

// TestBlindLookupFails: a lookup that never finds what exists fails the kit.
func TestBlindLookupFails(t *testing.T) {
	byCase := failures(t, subject(&memory{blind: true}, contract.DedupLookup))
	msg := byCase["lost_response_same_key"]
	require.Contains(t, msg, "declared dedup lookup, but after a lost response the lookup did not find the effect that exists (1 effect for key ")
	require.True(t, strings.HasSuffix(msg, "the delivery then made 2 effects and ended created"), msg)
}

// TestForgetfulKeysFail: a store that forgets keys sooner than the key
// retention it declares fails the repeat within the retention.
func TestForgetfulKeysFail(t *testing.T) {
	s := subject(&memory{honoursKeys: true, forgetAfter: 500 * time.Millisecond}, contract.DedupKey)
	s.Contract.KeyRetention = contract.Duration(3 * time.Second)
	s.Contract.Retry.AttemptTimeout = contract.Duration(2 * time.Second)
	byCase := failures(t, s)
	require.Contains(t, byCase["repeat around key_retention"],
		"declared dedup key with key_retention 3s, but a repeat with the same key 1.1s after a lost response, within the key retention, made a second effect: "+
			"declare a key_retention no longer than the destination keeps keys, or dedup none")
}

// slowAnswer stores the effect, then takes up to answerIn to answer. With
// lie, when its context ends meanwhile, it says nothing was written; with
// block, it answers only after answerIn whatever its context.
type slowAnswer struct {
	*memory
	answerIn   time.Duration
	lie, block bool
}

func (s slowAnswer) Deliver(ctx context.Context, req destination.Request) destination.Outcome {
	out := s.memory.Deliver(ctx, req)
	if out.Class != destination.Created {
		return out
	}
	if s.block {
		time.Sleep(s.answerIn)
		if err := ctx.Err(); err != nil {
			return destination.Failed(err, true)
		}
		return out
	}
	select {
	case <-ctx.Done():
		return destination.Failed(ctx.Err(), !s.lie)
	case <-time.After(s.answerIn):
		return out
	}
}

// TestCrashedAttemptsFail: an adapter that says nothing was sent when its
// context ends after the commit, and one that answers long after its
// context ended, fail the crashed-worker case.
func TestCrashedAttemptsFail(t *testing.T) {
	const crash = "commit then process crash then new process retry"
	t.Run("not sent after the commit", func(t *testing.T) {
		s := subject(&memory{}, contract.DedupNone)
		s.Adapter = slowAnswer{memory: s.Adapter.(*memory), answerIn: 200 * time.Millisecond, lie: true}
		require.Contains(t, failures(t, s)[crash], "declared dedup none, but when its context ended between the commit and the answer "+
			"the adapter answered not_sent (not sent, failed before the request was written: context canceled), which says nothing was applied, "+
			"and the retry made a second effect (2 for key ")
	})
	t.Run("blocks past its context", func(t *testing.T) {
		s := subject(&memory{honoursKeys: true}, contract.DedupKey)
		s.Adapter = slowAnswer{memory: s.Adapter.(*memory), answerIn: 1500 * time.Millisecond, block: true}
		require.Contains(t, failures(t, s)[crash], "declared dedup key, but Deliver returned 1.")
	})
}

// TestInvalidSubject: the subject's destination is checked as the
// destinations file is, before any case runs.
func TestInvalidSubject(t *testing.T) {
	m := &memory{}
	_, err := destinationtest.Check(t.Context(), destinationtest.Subject{Adapter: m, Count: m.Count,
		Contract: contract.Contract{Dedup: contract.DedupKey}})
	require.ErrorContains(t, err, `destination "subject" (declared in code): contract.retry.max_attempts`)
	_, err = destinationtest.Check(t.Context(), destinationtest.Subject{Adapter: m,
		Contract: contract.Contract{Dedup: contract.DedupKey, Retry: retry}})
	require.ErrorContains(t, err, "Subject.Count is nil")
}
