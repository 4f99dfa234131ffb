// Package worker wires Courier together: destination adapters and the
// Temporal workers that run deliveries. Only the courier program (and the
// lab, which runs what it runs) imports it.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/activities/notify"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destination/httpdest"
	"github.com/abde64c9/courier/destination/sqldest"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/internal/redact"
	"github.com/abde64c9/courier/worker/callers"
	"github.com/abde64c9/courier/workflows"
)

// Adapters holds one open adapter per destination, and the notifiers of
// those that have one.
type Adapters struct {
	ByName    map[string]destination.Adapter
	Notifiers map[string]activities.Notifier
	// Redactor holds every secret the adapters loaded; Warnings name those
	// too short to redact, for the worker's log.
	Redactor *redact.Redactor
	Warnings []string
	closers  []func() error
}

// Close releases the adapters' connections.
func (a *Adapters) Close() error {
	var errs []error
	for _, c := range a.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// OpenAdapters opens every destination's adapter: the file's HTTP and SQL
// destinations', and for each destination with adapter go the one own
// registers by its name (a team's own worker binary; nil: none). A missing
// secret, an unusable database or a Go destination without its adapter
// stops the worker here, before it takes any task.
func OpenAdapters(cfg destinations.Config, own map[string]destination.Adapter) (*Adapters, error) {
	out := &Adapters{ByName: map[string]destination.Adapter{}, Notifiers: map[string]activities.Notifier{}}
	out.Redactor, out.Warnings = Redactor(cfg)
	var errs []error
	webhooks := map[*destinations.Notifier]*notify.Webhook{} // the file's notifier is built once
	for _, name := range cfg.Names() {
		if n := cfg.NotifierFor(name); n != nil {
			w, ok := webhooks[n]
			if !ok {
				var err error
				if w, err = notify.New(*n, out.Redactor); err != nil {
					errs = append(errs, fmt.Errorf("destination %q: %w", name, err))
				}
				webhooks[n] = w
			}
			if w != nil {
				out.Notifiers[name] = w
			}
		}
		ad, err := openAdapter(name, cfg.Destinations[name], out.Redactor, own)
		if err != nil {
			errs = append(errs, fmt.Errorf("destination %q: %w", name, err))
			continue
		}
		out.ByName[name] = ad
		if c, ok := ad.(interface{ Close() error }); ok {
			out.closers = append(out.closers, c.Close)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(own)) {
		if d, ok := cfg.Destinations[name]; !ok || d.Adapter != destinations.AdapterGo {
			errs = append(errs, fmt.Errorf("destination %q: an adapter is registered for it, but the destinations file has no destination %q with adapter go; "+
				"declare it there (or with destinations.Config.Declare) with its contract", name, name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		_ = out.Close()
		return nil, err
	}
	return out, nil
}

func openAdapter(name string, d destinations.Destination, red *redact.Redactor, own map[string]destination.Adapter) (destination.Adapter, error) {
	switch d.Adapter {
	case destinations.AdapterSQL:
		return sqldest.Open(name, d, red)
	case destinations.AdapterNATS:
		return openNATS(d)
	case destinations.AdapterSMTP:
		return openSMTP(d)
	case destinations.AdapterGo:
		ad := own[name]
		if ad == nil {
			return nil, fmt.Errorf("adapter go, but this worker registers no adapter by that name; run a worker binary built with "+
				"Courier's worker package that registers one (worker.ProcessOptions.Adapters[%q]): the courier program registers none", name)
		}
		if _, ok := ad.(destination.Lookuper); d.Contract.Dedup == contract.DedupLookup && !ok {
			return nil, fmt.Errorf("contract.dedup: lookup, but the registered adapter %T has no Lookup method (destination.Lookuper)", ad)
		}
		return ad, nil
	}
	return httpdest.New(name, d, red)
}

// Register puts the Delivery workflow and Courier's activities on a worker,
// with the gates' recovery when acts reads the gates.
func Register(r sdkworker.Registry, cfg destinations.Config, acts *activities.Activities) {
	RegisterWorkflow(r, cfg)
	r.RegisterActivity(acts)
	if g, ok := acts.Gate.(*gateclient.Cache); ok {
		registerGates(r, g)
	}
}

// registerGates puts the gates' own activities (recovery, report and
// probe checks) on a worker: they read the server, never a caller.
func registerGates(r sdkworker.ActivityRegistry, g *gateclient.Cache) {
	r.RegisterActivityWithOptions(g.Recover, activity.RegisterOptions{Name: gate.ActivityRecover})
	r.RegisterActivityWithOptions(g.VerifyReport, activity.RegisterOptions{Name: gate.ActivityVerifyReport})
	r.RegisterActivityWithOptions(g.VerifyProbe, activity.RegisterOptions{Name: gate.ActivityVerifyProbe})
}

// RegisterWorkflow registers only the workflows (the Delivery and the
// destination's gate), for replayers.
func RegisterWorkflow(r sdkworker.WorkflowRegistry, cfg destinations.Config) {
	r.RegisterWorkflowWithOptions(Deliveries(cfg).Delivery,
		workflow.RegisterOptions{Name: workflows.WorkflowType})
	r.RegisterWorkflowWithOptions(gate.Destination,
		workflow.RegisterOptions{Name: gate.WorkflowType})
}

// Deliveries is the Delivery workflow for cfg's destinations. The workflow
// gets only what it routes by, so it links none of the file's parsing.
func Deliveries(cfg destinations.Config) *workflows.Deliveries {
	routes := make(map[string]workflows.Route, len(cfg.Destinations))
	for name, d := range cfg.Destinations {
		routes[name] = workflows.Route{RateLimit: d.RateLimit, Contract: d.Contract}
	}
	return workflows.NewDeliveries(routes, cfg.Reviewers.Names())
}

// JoinSlots is how many joins one process waits on at once: a wait holds a
// goroutine and a long poll, none of the attempts' slots or connections.
const JoinSlots = 1000

// joinPollers poll the joins' task queue in each process.
const joinPollers = 2

// New returns the workers of one process: the main one on the courier task
// queue, the joins' on theirs (JoinSlots, whatever opts say of activity
// slots), and one activity-only worker per rate-limited destination. Every
// activity they run first checks the run that scheduled it (genuine).
func New(c client.Client, cfg destinations.Config, acts *activities.Activities, opts sdkworker.Options) []sdkworker.Worker {
	opts.Interceptors = append(slices.Clone(opts.Interceptors), &genuine{})
	main := sdkworker.New(c, workflows.TaskQueue, opts)
	Register(main, cfg, acts)
	if _, ok := acts.Gate.(*gateclient.Cache); !ok {
		// Attempts that consult no gate still run the gates, whose
		// recovery and checks need these.
		registerGates(main, gateclient.NewCache(c, "", nil, cfg, client.MetricsNopHandler, slog.New(slog.DiscardHandler)))
	}
	main.RegisterActivityWithOptions(callers.NewBriefJoin(c).JoinDelivery,
		activity.RegisterOptions{Name: workflows.ActivityJoinDelivery})
	jo := opts
	jo.DisableWorkflowWorker, jo.MaxConcurrentActivityExecutionSize = true, JoinSlots
	// A join is taken once and waits long: two pollers take them as fast
	// as callers come, and keep few long polls open on an idle queue.
	jo.MaxConcurrentActivityTaskPollers, jo.ActivityTaskPollerBehavior = joinPollers, nil
	joins := sdkworker.New(c, workflows.JoinTaskQueue, jo)
	joins.RegisterActivityWithOptions(callers.NewJoin(c).JoinDelivery,
		activity.RegisterOptions{Name: workflows.ActivityJoinDelivery})
	workers := []sdkworker.Worker{main, joins}
	for _, name := range cfg.Names() {
		d := cfg.Destinations[name]
		if d.RateLimit <= 0 {
			continue
		}
		o := opts
		o.DisableWorkflowWorker = true
		// Enforced by the server for the whole queue, so it holds however
		// many workers run.
		o.TaskQueueActivitiesPerSecond = d.RateLimit
		w := sdkworker.New(c, workflows.ActivityTaskQueue(name, d.RateLimit), o)
		w.RegisterActivity(acts)
		workers = append(workers, w)
	}
	return workers
}

// NexusWorkers serve Courier's Nexus service on each tenant's task queue
// (workflows.NexusTaskQueue), where that tenant's endpoint sends its
// requests. They run Nexus tasks only: the deliveries they start run on
// the courier task queue. A tenant may deliver only to the destinations
// cfg lets it use.
func NexusWorkers(c client.Client, cfg destinations.Config, tenants []string, opts sdkworker.Options) ([]sdkworker.Worker, error) {
	var workers []sdkworker.Worker
	for _, t := range tenants {
		if err := callers.CheckTenant(t); err != nil {
			return nil, err
		}
		o := opts
		o.DisableWorkflowWorker, o.LocalActivityWorkerOnly = true, true
		w := sdkworker.New(c, workflows.NexusTaskQueue(t), o)
		w.RegisterNexusService(callers.NexusService(c, allows(cfg)))
		workers = append(workers, w)
	}
	return workers, nil
}

// Run starts the workers and blocks until ctx is done.
func Run(ctx context.Context, workers []sdkworker.Worker) error {
	for i, w := range workers {
		if err := w.Start(); err != nil {
			for _, started := range workers[:i] {
				started.Stop()
			}
			return fmt.Errorf("start worker: %w", err)
		}
	}
	<-ctx.Done()
	for _, w := range workers {
		w.Stop()
	}
	return nil
}

// allows says whether a tenant may deliver to a destination: one the file
// does not name is left to the delivery, which parks or refuses it.
func allows(cfg destinations.Config) func(dest, tenant string) bool {
	return func(dest, tenant string) bool {
		d, ok := cfg.Destinations[dest]
		return !ok || d.Allows(tenant)
	}
}
