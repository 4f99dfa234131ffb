package lab

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
)

// The lab's destinations: one per way a destination deduplicates, and the
// seeds' variants. The HTTP ones are sandbox services; the ledger is a
// SQLite file.
const (
	DestHelpdesk     = "helpdesk"      // honours keys, replays with a marker
	DestHelpdeskOnce = "helpdesk-once" // the same service, a one-attempt budget
	DestIgnoring     = "ignoring"      // declares key support it does not have
	DestLegacy       = "legacy"        // no keys at all: an unknown outcome needs a review
	DestCRM          = "crm"           // no dedup, but effects can be looked up by key
	DestLedger       = "ledger"        // SQL, key under a UNIQUE constraint
)

// Budget is the retry budget of every lab destination.
type Budget struct {
	// AttemptTimeout bounds one attempt; the lab's injected delays are
	// longer, so a delayed answer is an unknown outcome.
	AttemptTimeout time.Duration
	// MaxAttempts, when set, replaces each destination's own (the seeds'
	// max_attempts).
	MaxAttempts int
	// Deadline bounds a delivery; InitialInterval and MaxInterval its
	// backoff (doubling).
	Deadline, InitialInterval, MaxInterval time.Duration
	// Settle is the lookup destination's settle time; zero: the default.
	// The sandbox commits before it answers, so a short one is honest.
	Settle time.Duration
}

// CaseBudget is the fault cases' budget: short, so faults resolve quickly.
var CaseBudget = Budget{AttemptTimeout: 700 * time.Millisecond, Deadline: time.Minute,
	InitialInterval: 100 * time.Millisecond, MaxInterval: time.Second, Settle: 200 * time.Millisecond}

// OneOfEachDedup are the lab destinations a run about faults and crashes
// delivers to: one per way a destination deduplicates. The others are the
// seeds' variants (DestIgnoring creates duplicates by design).
var OneOfEachDedup = []string{DestCRM, DestHelpdesk, DestLedger, DestLegacy}

// OutageBudget is generous: a run about faults, crashes and lost nodes,
// not about running out of attempts.
var OutageBudget = Budget{AttemptTimeout: 2 * time.Second, MaxAttempts: 12, Deadline: 10 * time.Minute,
	InitialInterval: 200 * time.Millisecond, MaxInterval: 2 * time.Second, Settle: time.Second}

// seedAttempts are the seeds' max_attempts per destination.
var seedAttempts = map[string]int{DestHelpdesk: 3, DestHelpdeskOnce: 1, DestIgnoring: 3, DestLegacy: 3, DestCRM: 2, DestLedger: 3}

// Destinations is the lab's destinations file for a sandbox at sandboxURL
// and a ledger database at ledgerPath.
func Destinations(sandboxURL, ledgerPath string, b Budget) destinations.Config {
	marker := &contract.ReplayMarker{Header: "Idempotent-Replayed", Value: "true"}
	httpDest := func(service string, c contract.Contract) destinations.Destination {
		return destinations.Destination{Adapter: destinations.AdapterHTTP, URL: sandboxURL + "/" + service + "/tickets", Contract: c}
	}
	keyed := contract.Contract{Dedup: contract.DedupKey, KeyHeader: "Idempotency-Key", ReplayMarker: marker}
	cfg := destinations.Config{Destinations: map[string]destinations.Destination{
		DestHelpdesk:     httpDest("helpdesk", keyed),
		DestHelpdeskOnce: httpDest("helpdesk", keyed),
		DestIgnoring:     httpDest("ignoring", keyed),
		DestLegacy:       httpDest("legacy", contract.Contract{Dedup: contract.DedupNone}),
		DestCRM:          httpDest("crm", contract.Contract{Dedup: contract.DedupLookup, KeyHeader: "Idempotency-Key"}),
		DestLedger: {Adapter: destinations.AdapterSQL, Driver: "sqlite", DSN: ledgerPath, Table: "ledger_entries",
			Contract: contract.Contract{Dedup: contract.DedupUniqueCommit}},
	}}
	crm := cfg.Destinations[DestCRM]
	crm.LookupURL = sandboxURL + "/crm/tickets?key={key}"
	cfg.Destinations[DestCRM] = crm
	for name, d := range cfg.Destinations {
		attempts := seedAttempts[name]
		if b.MaxAttempts != 0 {
			attempts = b.MaxAttempts
		}
		d.Contract.Retry = contract.Retry{
			MaxAttempts: attempts, InitialInterval: contract.Duration(b.InitialInterval),
			MaxInterval: contract.Duration(b.MaxInterval), Backoff: 2,
			AttemptTimeout: contract.Duration(b.AttemptTimeout), Deadline: contract.Duration(b.Deadline),
		}
		if d.Contract.Dedup == contract.DedupLookup && b.Settle > 0 {
			settle := contract.Duration(b.Settle)
			d.Contract.Settle = &settle
		}
		d.Contract = d.Contract.WithDefaults()
		cfg.Destinations[name] = d
	}
	return cfg
}

// WriteDestinations writes cfg as a workers' destinations file and reads it
// back the way a worker will, so a lab never runs on a file workers refuse.
func WriteDestinations(path string, cfg destinations.Config) error {
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	if _, err := destinations.Load(path); err != nil {
		return fmt.Errorf("lab destinations: %w", err)
	}
	return nil
}

// SandboxService is the sandbox service an HTTP destination's URL points
// at (".../{service}/tickets"); empty for any other destination.
func SandboxService(d destinations.Destination) string {
	if d.Adapter != destinations.AdapterHTTP {
		return ""
	}
	u, err := url.Parse(d.URL)
	if err != nil {
		return ""
	}
	return strings.Split(strings.Trim(u.Path, "/"), "/")[0]
}
