package testsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/activities/sqldest"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/internal/lab/faults"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/sandbox"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// Env is the real destinations of the fault cases: the sandbox ticket
// service on a loopback port and the SQLite ledger, with the adapters a
// worker would use. Effects are counted from their own stores.
type Env struct {
	Sandbox    *sandbox.Server
	SandboxURL string
	LedgerPath string
	Config     contract.Config
	Adapters   *worker.Adapters
	Activities *activities.Activities
	// Faults wrap every adapter, for the cases that inject one in the
	// adapter rather than at the sandbox (a lost SQL acknowledgement).
	Faults map[string]*faults.Adapter
	sql    map[string]*sqldest.Adapter

	http *httptest.Server
}

// NewEnv starts the destinations with their data files under dir.
func NewEnv(dir string) (*Env, error) {
	sb, err := sandbox.Open(filepath.Join(dir, "sandbox.db"), sandbox.DefaultModes())
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	e := &Env{Sandbox: sb, LedgerPath: filepath.Join(dir, "ledger.db")}
	e.http = httptest.NewServer(sb.Handler())
	e.SandboxURL = e.http.URL
	e.Config = Destinations(e.SandboxURL, e.LedgerPath)
	if e.Adapters, err = worker.OpenAdapters(e.Config); err != nil {
		e.Close()
		return nil, err
	}
	e.Faults, e.sql = map[string]*faults.Adapter{}, map[string]*sqldest.Adapter{}
	for name, ad := range e.Adapters.ByName {
		if sq, ok := ad.(*sqldest.Adapter); ok {
			e.sql[name] = sq
		}
		e.Faults[name] = faults.Wrap(ad)
		e.Adapters.ByName[name] = e.Faults[name]
	}
	// The test environment runs each delivery once: it has no earlier runs.
	e.Activities = worker.NewActivities(nil, e.Config, e.Adapters)
	e.Activities.Runs = noEarlierRuns{}
	return e, nil
}

// WorkerActivities are the activities for a worker on a real server, which
// reads a delivery's earlier runs through c.
func (e *Env) WorkerActivities(c client.Client) *activities.Activities {
	return worker.NewActivities(c, e.Config, e.Adapters)
}

// noEarlierRuns is the test environment's answer: one run per delivery.
type noEarlierRuns struct{}

func (noEarlierRuns) Earlier(context.Context, string, string) ([]activities.EarlierRun, error) {
	return nil, nil
}

// Close stops the destinations.
func (e *Env) Close() {
	if e.Adapters != nil {
		_ = e.Adapters.Close()
	}
	e.http.CloseClientConnections()
	e.http.Close()
	_ = e.Sandbox.Close()
}

// Effects counts the effects the destination stored for one business id.
func (e *Env) Effects(dest, businessID string) (int, error) {
	if sq, ok := e.sql[dest]; ok {
		rows, err := sq.Rows(context.Background())
		if err != nil {
			return 0, err
		}
		n := 0
		for _, r := range rows {
			if r.BusinessID == businessID {
				n++
			}
		}
		return n, nil
	}
	recs, err := e.Sandbox.Records(sandboxPath(e.Config.Destinations[dest]))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range recs {
		var p struct {
			RequestID string `json:"request_id"`
		}
		if json.Unmarshal(r.Payload, &p) == nil && p.RequestID == businessID {
			n++
		}
	}
	return n, nil
}

// Inject stages a fault at the sandbox service behind a destination.
func (e *Env) Inject(dest string, f sandbox.Fault) error {
	return e.Sandbox.Inject(sandboxPath(e.Config.Destinations[dest]), f)
}

// sandboxPath is the sandbox destination a configured URL points at:
// ".../{path}/tickets".
func sandboxPath(d contract.Destination) string {
	u, err := url.Parse(d.URL)
	if err != nil {
		return ""
	}
	return strings.Split(strings.Trim(u.Path, "/"), "/")[0]
}

// Ticket is a sandbox payload for one business id.
func Ticket(businessID, subject string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"request_id": businessID, "subject": subject})
	return b
}

// Input is a delivery of payload for (acme, dest, create-ticket, id).
func Input(dest, id string, payload json.RawMessage) workflows.DeliveryInput {
	return workflows.DeliveryInput{
		Operation: opkey.Operation{Tenant: "acme", Destination: dest, Operation: "create-ticket", BusinessID: id},
		Payload:   payload,
	}
}
