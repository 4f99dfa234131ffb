package destinationtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination/httpdest"
	"github.com/abde64c9/courier/destination/sqldest"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/worker/destinationtest"
)

// courierDestinations are the lab's destinations: the sandbox ticket
// service on a loopback port and a SQLite ledger, fresh for each test.
func courierDestinations(t *testing.T) (*lab.Sandbox, destinations.Config) {
	t.Helper()
	dir := t.TempDir()
	sb, err := lab.StartSandbox(filepath.Join(dir, lab.SandboxDB), "", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	return sb, lab.Destinations(sb.URL, filepath.Join(dir, lab.LedgerDB), lab.CaseBudget)
}

// httpSubject is a sandbox destination of the lab, its effects counted
// from the sandbox's own log of the tickets it wrote, by the key each
// request carried (a service that ignores keys keeps none with the ticket).
func httpSubject(t *testing.T, sb *lab.Sandbox, cfg destinations.Config, name string) destinationtest.Subject {
	t.Helper()
	d := cfg.Destinations[name]
	ad, err := httpdest.New(name, d, nil)
	require.NoError(t, err)
	return destinationtest.Subject{
		Name: name, Adapter: ad, Destination: &d,
		Count: func(_ context.Context, key string) (int, error) {
			n := 0
			for _, r := range sb.Requests(lab.SandboxService(d)) {
				if r.Write && r.Key != nil && *r.Key == key {
					n++
				}
			}
			return n, nil
		},
		Payload: func(n int) json.RawMessage { return lab.Ticket(fmt.Sprintf("kit-%d", n), "conformance") },
		Invalid: json.RawMessage(`{"subject": ""}`),
	}
}

// TestCourierHTTPAdapterKeepsItsContract: Courier's HTTP adapter passes the
// kit at the sandbox's key and lookup destinations, as the lab declares
// them.
func TestCourierHTTPAdapterKeepsItsContract(t *testing.T) {
	for _, name := range []string{lab.DestHelpdesk, lab.DestCRM} {
		t.Run(name, func(t *testing.T) {
			sb, cfg := courierDestinations(t)
			destinationtest.Run(t, httpSubject(t, sb, cfg, name))
		})
	}
	// Answers that come a while after the commit let the kit end an
	// attempt's context between the two, as a worker dying there would.
	t.Run(lab.DestHelpdesk+" answering late", func(t *testing.T) {
		sb, cfg := courierDestinations(t)
		require.NoError(t, sb.Inject(lab.SandboxService(cfg.Destinations[lab.DestHelpdesk]),
			sandbox.Fault{Kind: sandbox.FaultDelayAfterCommit, Count: 100, Delay: 200 * time.Millisecond}))
		destinationtest.Run(t, httpSubject(t, sb, cfg, lab.DestHelpdesk))
	})
	// Declared to keep keys for less time than the service does: a repeat
	// within that time replays, a lost response past it parks. A retry
	// (its wait, then its attempt's time) fits within the retention.
	t.Run(lab.DestHelpdesk+" with a short key retention", func(t *testing.T) {
		sb, cfg := courierDestinations(t)
		d := cfg.Destinations[lab.DestHelpdesk]
		d.Contract.KeyRetention = contract.Duration(3 * time.Second)
		d.Contract.Retry.AttemptTimeout = contract.Duration(2 * time.Second)
		cfg.Destinations[lab.DestHelpdesk] = d
		destinationtest.Run(t, httpSubject(t, sb, cfg, lab.DestHelpdesk))
	})
}

// TestIgnoringDestinationFailsTheKit: the sandbox's service that accepts
// the key header and ignores it fails the kit through Courier's own HTTP
// adapter, as it fails courier probe.
func TestIgnoringDestinationFailsTheKit(t *testing.T) {
	sb, cfg := courierDestinations(t)
	fs, err := destinationtest.Check(t.Context(), httpSubject(t, sb, cfg, lab.DestIgnoring))
	require.NoError(t, err)
	byCase := map[string]string{}
	for _, f := range fs {
		t.Log(f)
		byCase[f.Case] += f.Message
	}
	require.Contains(t, byCase["lost_response_same_key"],
		"declared dedup key, but a repeat with the same key after a lost response made a second effect: declare dedup none until it honours keys")
}

// TestCourierSQLAdapterKeepsItsContract: Courier's SQL adapter passes the
// kit on a SQLite table with its declared unique-commit, its effects read
// back through a connection of their own.
func TestCourierSQLAdapterKeepsItsContract(t *testing.T) {
	_, cfg := courierDestinations(t)
	d := cfg.Destinations[lab.DestLedger]
	ad, err := sqldest.Open(lab.DestLedger, d, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ad.Close() })
	reader, err := sqldest.Open(lab.DestLedger, d, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reader.Close() })
	destinationtest.Run(t, destinationtest.Subject{
		Name: lab.DestLedger, Adapter: ad, Destination: &d,
		Count: func(ctx context.Context, key string) (int, error) {
			rows, err := reader.Rows(ctx)
			n := 0
			for _, r := range rows {
				if r.Key == key {
					n++
				}
			}
			return n, err
		},
	})
}
