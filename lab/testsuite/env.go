package testsuite

import (
	"context"
	"path/filepath"

	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/activities/ledger"
	"github.com/abde64c9/courier/activities/ledger/sqlstore"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/faults"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/worker"
)

// Env is the real destinations of the fault cases (the lab's table): the
// sandbox ticket service on a loopback port and the SQLite ledger, with the
// adapters a worker in this process uses. Effects are counted from their
// own stores.
type Env struct {
	Sandbox    *lab.Sandbox
	SandboxURL string
	LedgerPath string
	Config     destinations.Config
	Adapters   *worker.Adapters
	Activities *activities.Activities
	// Faults wrap every adapter, for the cases that inject one in the
	// adapter rather than at the sandbox (a lost SQL acknowledgement).
	Faults map[string]*faults.Adapter
	// Outcomes is the outcome ledger a worker on a real server keeps (a
	// SQLite file beside the destinations'); the test environment's
	// single runs need none.
	Outcomes ledger.Store
	effects  *lab.Effects
}

// NewEnv starts the destinations with their data files under dir.
func NewEnv(dir string) (_ *Env, err error) {
	e := &Env{LedgerPath: filepath.Join(dir, lab.LedgerDB)}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if e.Sandbox, err = lab.StartSandbox(filepath.Join(dir, lab.SandboxDB), "", nil); err != nil {
		return e, err
	}
	e.SandboxURL = e.Sandbox.URL
	e.Config = lab.Destinations(e.SandboxURL, e.LedgerPath, lab.CaseBudget)
	if e.Adapters, err = worker.OpenAdapters(e.Config, nil); err != nil {
		return e, err
	}
	if e.effects, err = lab.OpenEffects(e.Sandbox.Server, e.Config); err != nil {
		return e, err
	}
	e.Faults = map[string]*faults.Adapter{}
	for name, ad := range e.Adapters.ByName {
		e.Faults[name] = faults.Wrap(ad)
		e.Adapters.ByName[name] = e.Faults[name]
	}
	if e.Outcomes, err = sqlstore.Open(context.Background(), "sqlite:"+filepath.Join(dir, lab.OutcomesDB)); err != nil {
		return e, err
	}
	// The test environment runs each delivery once: it has no earlier runs.
	e.Activities = worker.NewActivities(nil, e.Config, e.Adapters)
	e.Activities.Runs = noEarlierRuns{}
	return e, nil
}

// WorkerActivities are the activities for a worker on a real server, which
// reads a delivery's earlier runs through c.
func (e *Env) WorkerActivities(c client.Client) *activities.Activities {
	acts := worker.NewActivities(c, e.Config, e.Adapters)
	acts.Ledger = e.Outcomes
	return acts
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
	if e.effects != nil {
		e.effects.Close()
	}
	if e.Outcomes != nil {
		_ = e.Outcomes.Close()
	}
	if e.Sandbox != nil {
		_ = e.Sandbox.Close()
	}
}

// Effects counts the effects the destination stored for one business id.
func (e *Env) Effects(dest, businessID string) (int, error) {
	return e.effects.Count(context.Background(), dest, businessID)
}

// Inject stages a fault at the sandbox service behind a destination.
func (e *Env) Inject(dest string, f sandbox.Fault) error {
	return e.Sandbox.Inject(lab.SandboxService(e.Config.Destinations[dest]), f)
}
