// Package testsuite reproduces every case of the seed lab reports, in the
// Temporal test environment and against a real dev server, and reports them
// in the seeds' own shape (see faultlab).
package testsuite

import (
	"fmt"
	"time"

	"github.com/abde64c9/courier/contract"
)

// The destinations every fault case runs against. Timeouts are short so
// faults resolve quickly; budgets are the seeds' own max_attempts.
const (
	DestHelpdesk     = "helpdesk"      // honours keys, replays with a marker
	DestHelpdeskOnce = "helpdesk-once" // the same service, a one-attempt budget
	DestIgnoring     = "ignoring"      // declares key support it does not have
	DestLegacy       = "legacy"        // no keys at all
	DestCRM          = "crm"           // no dedup, but effects can be looked up
	DestLedger       = "ledger"        // SQL, key under a UNIQUE constraint
)

// AttemptTimeout bounds one attempt in the fault cases; injected delays are
// longer than this.
const AttemptTimeout = 700 * time.Millisecond

// Destinations is the destinations file of the fault cases, for a sandbox at
// sandboxURL and a ledger database at ledgerPath.
func Destinations(sandboxURL, ledgerPath string) contract.Config {
	retry := func(attempts int) contract.Retry {
		return contract.Retry{
			MaxAttempts: attempts, InitialInterval: contract.Duration(100 * time.Millisecond),
			MaxInterval: contract.Duration(time.Second), Backoff: 2,
			AttemptTimeout: contract.Duration(AttemptTimeout), Deadline: contract.Duration(time.Minute),
		}
	}
	marker := &contract.ReplayMarker{Header: "Idempotent-Replayed", Value: "true"}
	httpDest := func(path string, c contract.Contract) contract.Destination {
		return contract.Destination{Adapter: contract.AdapterHTTP, URL: fmt.Sprintf("%s/%s/tickets", sandboxURL, path), Contract: c}
	}
	cfg := contract.Config{Destinations: map[string]contract.Destination{
		DestHelpdesk: httpDest("helpdesk", contract.Contract{
			Dedup: contract.DedupKey, KeyHeader: "Idempotency-Key", ReplayMarker: marker, Retry: retry(3)}),
		DestHelpdeskOnce: httpDest("helpdesk", contract.Contract{
			Dedup: contract.DedupKey, KeyHeader: "Idempotency-Key", ReplayMarker: marker, Retry: retry(1)}),
		DestIgnoring: httpDest("ignoring", contract.Contract{
			Dedup: contract.DedupKey, KeyHeader: "Idempotency-Key", ReplayMarker: marker, Retry: retry(3)}),
		DestLegacy: httpDest("legacy", contract.Contract{Dedup: contract.DedupNone, Retry: retry(3)}),
		DestCRM:    httpDest("crm", contract.Contract{Dedup: contract.DedupLookup, KeyHeader: "Idempotency-Key", Retry: retry(2)}),
		DestLedger: {Adapter: contract.AdapterSQL, Driver: "sqlite", DSN: ledgerPath, Table: "ledger_entries",
			Contract: contract.Contract{Dedup: contract.DedupUniqueCommit, Retry: retry(3)}},
	}}
	crm := cfg.Destinations[DestCRM]
	crm.LookupURL = sandboxURL + "/crm/tickets?key={key}"
	cfg.Destinations[DestCRM] = crm
	for name, d := range cfg.Destinations {
		d.Contract = d.Contract.WithDefaults()
		cfg.Destinations[name] = d
	}
	return cfg
}
