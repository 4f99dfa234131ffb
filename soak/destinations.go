package soak

import (
	"time"

	"github.com/abde64c9/courier/contract"
)

// The soak's destinations: one per dedup kind. The HTTP ones are sandbox
// services of the matching mode; the ledger is a SQLite file both worker
// processes write.
const (
	DestKey    = "helpdesk" // honours Idempotency-Key, replays with a marker
	DestUnique = "ledger"   // SQL, key under a UNIQUE constraint
	DestLookup = "crm"      // no dedup, effects found by key
	DestNone   = "legacy"   // nothing: an unknown outcome needs a review
)

const (
	// attemptTimeout bounds one attempt; faultDelay is past it, so a
	// delayed answer is an unknown outcome.
	attemptTimeout = 2 * time.Second
	faultDelay     = 2 * attemptTimeout
)

// Destinations is the soak's destinations file for a sandbox at sandboxURL
// and a ledger database at ledgerPath. Budgets are generous: the soak is
// about what faults and crashes do, not about running out of attempts.
func Destinations(sandboxURL, ledgerPath string) contract.Config {
	retry := contract.Retry{
		MaxAttempts: 12, InitialInterval: contract.Duration(200 * time.Millisecond),
		MaxInterval: contract.Duration(2 * time.Second), Backoff: 2,
		AttemptTimeout: contract.Duration(attemptTimeout), Deadline: contract.Duration(10 * time.Minute),
	}
	httpDest := func(path string, c contract.Contract) contract.Destination {
		return contract.Destination{Adapter: contract.AdapterHTTP, URL: sandboxURL + "/" + path + "/tickets", Contract: c}
	}
	cfg := contract.Config{Destinations: map[string]contract.Destination{
		DestKey: httpDest("helpdesk", contract.Contract{Dedup: contract.DedupKey, KeyHeader: "Idempotency-Key",
			ReplayMarker: &contract.ReplayMarker{Header: "Idempotent-Replayed", Value: "true"}, Retry: retry}),
		DestLookup: httpDest("crm", contract.Contract{Dedup: contract.DedupLookup, KeyHeader: "Idempotency-Key", Retry: retry}),
		DestNone:   httpDest("legacy", contract.Contract{Dedup: contract.DedupNone, Retry: retry}),
		DestUnique: {Adapter: contract.AdapterSQL, Driver: "sqlite", DSN: ledgerPath, Table: "ledger_entries",
			Contract: contract.Contract{Dedup: contract.DedupUniqueCommit, Retry: retry}},
	}}
	crm := cfg.Destinations[DestLookup]
	crm.LookupURL = sandboxURL + "/crm/tickets?key={key}"
	cfg.Destinations[DestLookup] = crm
	for name, d := range cfg.Destinations {
		d.Contract = d.Contract.WithDefaults()
		cfg.Destinations[name] = d
	}
	return cfg
}

// sandboxName is the sandbox service behind an HTTP destination.
var sandboxName = map[string]string{DestKey: "helpdesk", DestLookup: "crm", DestNone: "legacy"}
