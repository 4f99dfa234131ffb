package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/abde64c9/courier/activities/ledger"
	"github.com/abde64c9/courier/activities/ledger/sqlstore"
	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/worker/callers"
	"github.com/abde64c9/courier/workflows"
)

// Defaults of a worker process.
const (
	// DefaultReviewPoll is how often the awaiting-review gauge is refreshed.
	DefaultReviewPoll = 15 * time.Second
	// DefaultStopTimeout lets in-flight attempts finish on a graceful stop;
	// an attempt cut short is an unknown outcome the workflow must resolve.
	DefaultStopTimeout = 10 * time.Second
	dialTimeout        = 10 * time.Second
	// stopMargin is left of the stop timeout for a cut-short attempt to
	// report before the worker exits.
	stopMargin = 2 * time.Second
)

// ProcessOptions configures a worker process: what `courier worker` and
// `courier-lab dev` run.
type ProcessOptions struct {
	// Config is the destinations (destinations.Load or destinations.Parse,
	// and destinations.Config.Declare for those declared in code).
	Config destinations.Config
	// Adapters are a team's own adapters, by destination name: each serves
	// the Config's destination of that name, which has adapter go.
	Adapters map[string]destination.Adapter
	// Logger receives Courier's and the SDK's logs; nil is slog.Default().
	Logger *slog.Logger
	// Client is how to reach Temporal; nil reads Temporal's standard client
	// environment (connect.ClientOptions).
	Client *client.Options
	// MetricsAddr, when set, serves Prometheus metrics on /metrics and
	// readiness on /healthz, e.g. ":9090": 200 while the workers run and
	// reach Temporal, 503 with the reason otherwise.
	MetricsAddr string
	// ReviewPoll is how often the awaiting-review gauge is refreshed.
	ReviewPoll time.Duration
	// Worker options for every worker of the process.
	Worker sdkworker.Options
	// NexusTenants are the tenants whose Nexus endpoints this process
	// serves (see NexusWorkers); none: no Nexus.
	NexusTenants []string
	// CacheSize is how many workflows the process keeps in memory between
	// their tasks; 0 is DefaultCacheSize.
	CacheSize int
	// Ledger is the outcome ledger's URL (ledger.Open): sqlite:PATH for
	// workers on one host, postgres://... once they run on several. Empty:
	// none, and a repeat is recognised only while the namespace keeps its
	// run. LedgerRetention, when set, is how long the ledger keeps a row;
	// zero keeps them for ever.
	Ledger          string
	LedgerRetention time.Duration
}

// Process is a running worker process: its Temporal client, its workers
// and its metrics endpoint.
type Process struct {
	log      *slog.Logger
	client   client.Client
	adapters *Adapters
	ledger   ledger.Store
	workers  []sdkworker.Worker
	metrics  *Metrics
	http     *http.Server
	addr     string
	ready    atomic.Bool
	reach    *reachability
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
	stopErr  error
}

// StartProcess opens the destinations, connects to Temporal and starts the
// workers. Everything that can be wrong with the setup (a missing secret, a
// taken metrics port, an unreachable server) is an error here, before any
// task is taken.
func StartProcess(ctx context.Context, o ProcessOptions) (_ *Process, err error) {
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if len(o.Config.Destinations) == 0 {
		return nil, errors.New("no destinations configured")
	}
	for _, t := range o.NexusTenants {
		if err := callers.CheckTenant(t); err != nil {
			return nil, err
		}
	}
	p := &Process{log: logger, metrics: NewMetrics(logger, o.Config.Names()...)}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.adapters, err = OpenAdapters(o.Config, o.Adapters); err != nil {
		return nil, err
	}
	for _, w := range append(o.Config.Warnings(), p.adapters.Warnings...) {
		logger.Warn(w)
	}
	if names := o.Config.Unproven(); len(names) > 0 {
		logger.Warn("reviews at these destinations carry no proof: their reviewers have no keys, so any name typed as a reviewer's decides; "+
			"give them keys (courier review keygen) where a decision must be proven", "destinations", names)
	}
	if o.MetricsAddr != "" {
		if err := p.listenMetrics(o.MetricsAddr); err != nil {
			return nil, err
		}
	}

	var co client.Options
	if o.Client != nil {
		co = *o.Client
	} else if co, err = connect.ClientOptions(logger); err != nil {
		return nil, err
	}
	if co.HostPort == "" {
		co.HostPort = client.DefaultHostPort
	}
	if co.Namespace == "" {
		co.Namespace = client.DefaultNamespace
	}
	co.Logger = sdklog.NewStructuredLogger(logger)
	co.MetricsHandler = p.metrics.Handler
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if p.client, err = connect.DialWith(dctx, co); err != nil {
		return nil, err
	}
	p.checkSearchAttributes(ctx, co.Namespace)
	retention := p.retention(ctx, co.Namespace)

	cache := o.CacheSize
	if cache <= 0 {
		cache = DefaultCacheSize
	}
	// Process-wide in the SDK: it takes effect before the first worker starts.
	sdkworker.SetStickyWorkflowCacheSize(cache)
	wo := WithDefaultPollers(o.Worker)
	if wo.WorkerStopTimeout == 0 {
		wo.WorkerStopTimeout = DefaultStopTimeout
	}
	acts := NewActivities(p.client, o.Config, p.adapters)
	if o.Ledger != "" {
		if p.ledger, err = sqlstore.Open(ctx, o.Ledger); err != nil {
			return nil, fmt.Errorf("outcome ledger: %w", err)
		}
		acts.Ledger, acts.LedgerConverter = p.ledger, co.DataConverter
	}
	gates := gateclient.NewCache(p.client, co.Namespace, co.DataConverter, o.Config, p.metrics.Handler, logger)
	acts.Gate = gates
	acts.StopGrace = max(wo.WorkerStopTimeout-stopMargin, wo.WorkerStopTimeout/2)
	workers := New(p.client, o.Config, acts, wo)
	nexusWorkers, err := NexusWorkers(p.client, o.Config, o.NexusTenants, wo)
	if err != nil {
		return nil, err
	}
	workers = append(workers, nexusWorkers...)
	for i, w := range workers {
		if err := w.Start(); err != nil {
			for _, started := range workers[:i] {
				started.Stop()
			}
			return nil, fmt.Errorf("start worker: %w", err)
		}
	}
	p.workers = workers

	every := o.ReviewPoll
	if every <= 0 {
		every = DefaultReviewPoll
	}
	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = wcancel
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		watchAwaitingReview(wctx, p.client, co.Namespace, o.Config.Names(), p.metrics.Handler, every, logger)
	}()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		gates.Watch(wctx)
	}()
	p.reach = newReachability(co.HostPort, co.Namespace, p.metrics.Handler, logger, time.Now())
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.reach.watch(wctx, p.client)
	}()
	p.ready.Store(true)
	logger.Info("courier worker running", "temporal", co.HostPort, "namespace", co.Namespace,
		"task_queue", workflows.TaskQueue, "destinations", o.Config.Names(), "metrics", p.addr, "nexus_tenants", o.NexusTenants)
	p.logHorizon(co.Namespace, retention, o)
	if p.ledger != nil && o.LedgerRetention > 0 {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			purgeLedger(wctx, p.ledger, o.LedgerRetention, logger)
		}()
	}
	return p, nil
}

// DefaultPollers is how many pollers a worker runs per task queue when its
// options set none. With the SDK's two, a burst of tasks finds no poller
// waiting and the server writes each to the queue's backlog to read it back
// later (docs/performance.md has the measurement).
const DefaultPollers = 8

// DefaultCacheSize bounds the workflows kept in memory. A parked delivery
// held there may wait for a person for days, and the SDK's default of
// 10,000 lets parked ones fill the worker's memory. One evicted from the
// cache is replayed from its short history when its review comes.
// Deliveries in flight are recent, so they stay cached.
const DefaultCacheSize = 1000

// WithDefaultPollers sets DefaultPollers where o leaves the pollers unset.
func WithDefaultPollers(o sdkworker.Options) sdkworker.Options {
	if o.MaxConcurrentWorkflowTaskPollers == 0 && o.WorkflowTaskPollerBehavior == nil {
		o.MaxConcurrentWorkflowTaskPollers = DefaultPollers
	}
	if o.MaxConcurrentActivityTaskPollers == 0 && o.ActivityTaskPollerBehavior == nil {
		o.MaxConcurrentActivityTaskPollers = DefaultPollers
	}
	return o
}

func (p *Process) listenMetrics(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: cannot listen on %s: %w (pick another address with --metrics)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", p.metrics.HTTPHandler())
	// Ready once the workers run, and while they can reach Temporal.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !p.ready.Load() {
			http.Error(w, "starting or stopping", http.StatusServiceUnavailable)
			return
		}
		if problem := p.reach.problem(); problem != "" {
			http.Error(w, problem, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	p.addr = ln.Addr().String()
	p.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := p.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("metrics: serve", "error", err)
		}
	}()
	return nil
}

// checkSearchAttributes warns when the namespace lacks Courier's search
// attributes: deliveries could not be started or listed by state.
func (p *Process) checkSearchAttributes(ctx context.Context, namespace string) {
	resp, err := p.client.OperatorService().ListSearchAttributes(ctx,
		&operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		p.log.Debug("cannot list search attributes", "error", err)
		return
	}
	var missing []string
	for _, name := range workflows.SearchAttributeNames {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		p.log.Warn("namespace lacks Courier's search attributes: deliveries cannot start until they exist; "+
			"create them with `temporal operator search-attribute create --name NAME --type Keyword` for each",
			"namespace", namespace, "missing", missing)
	}
}

// retention is the namespace's retention of finished workflows; 0 when it
// cannot be read.
func (p *Process) retention(ctx context.Context, namespace string) time.Duration {
	desc, err := p.client.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		p.log.Debug("cannot describe namespace", "namespace", namespace, "error", err)
		return 0
	}
	return desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration()
}

// Client is the process's Temporal client.
func (p *Process) Client() client.Client { return p.client }

// MetricsAddr is the address metrics are served on, empty when they are not.
func (p *Process) MetricsAddr() string { return p.addr }

// Stop stops taking tasks, lets in-flight attempts finish (up to the worker
// stop timeout) and closes everything. It is safe to call more than once.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		p.ready.Store(false)
		for _, w := range p.workers {
			w.Stop()
		}
		p.stopErr = p.close()
	})
	return p.stopErr
}

func (p *Process) close() error {
	var errs []error
	if p.cancel != nil {
		p.cancel()
	}
	if p.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		errs = append(errs, p.http.Shutdown(ctx))
	}
	p.wg.Wait()
	if p.client != nil {
		p.client.Close()
	}
	if p.adapters != nil {
		errs = append(errs, p.adapters.Close())
	}
	if p.ledger != nil {
		errs = append(errs, p.ledger.Close())
	}
	errs = append(errs, p.metrics.Close())
	return errors.Join(errs...)
}

// Serve runs a worker process until ctx is done, then stops it gracefully.
func Serve(ctx context.Context, o ProcessOptions) error {
	p, err := StartProcess(ctx, o)
	if err != nil {
		return err
	}
	<-ctx.Done()
	p.log.Info("stopping: letting in-flight attempts finish")
	return p.Stop()
}

// logHorizon says at start for how long this worker recognises a repeat of
// an operation whose destination would not: while the ledger keeps its row,
// else while the namespace keeps its run.
func (p *Process) logHorizon(namespace string, retention time.Duration, o ProcessOptions) {
	if p.ledger != nil {
		p.log.Info(Horizon(true, o.LedgerRetention, retention), "ledger", p.ledger.Where())
		return
	}
	// Past it a repeated request starts a new delivery, which only a
	// destination's own dedup stops.
	p.log.Warn(Horizon(false, 0, retention), "namespace", namespace)
}

// The environment that names the outcome ledger and its retention, for the
// worker and the commands that read what the workers keep.
const (
	EnvLedger          = "COURIER_LEDGER"
	EnvLedgerRetention = "COURIER_LEDGER_RETENTION"
)

// Horizon says for how long a repeat of an operation is recognised: while
// the outcome ledger keeps it (for ever, or ledgerRetention), else while
// the namespace keeps its run (namespace, when known).
func Horizon(ledger bool, ledgerRetention, namespace time.Duration) string {
	switch {
	case ledger && ledgerRetention > 0:
		return fmt.Sprintf("a repeat answers its first outcome for %s (the outcome ledger's retention, $%s)", ledgerRetention, EnvLedgerRetention)
	case ledger:
		return "a repeat answers its first outcome for ever (the outcome ledger, $" + EnvLedger + ")"
	case namespace > 0:
		return fmt.Sprintf("no outcome ledger ($%s): a repeat is recognised only while the namespace keeps its run (%s)", EnvLedger, namespace)
	}
	return fmt.Sprintf("no outcome ledger ($%s): a repeat is recognised only while the namespace keeps its run", EnvLedger)
}

// ledgerPurgeEvery paces the ledger's retention sweep.
const ledgerPurgeEvery = time.Hour

// purgeLedger removes the ledger's rows older than retention, now and then
// every ledgerPurgeEvery, until ctx is done. Every worker sweeps; a sweep
// deletes what another already did, harmlessly.
func purgeLedger(ctx context.Context, l ledger.Store, retention time.Duration, log *slog.Logger) {
	for {
		if n, err := l.Purge(ctx, time.Now().Add(-retention)); err != nil {
			log.Warn("outcome ledger: retention sweep failed", "error", err)
		} else if n > 0 {
			log.Info("outcome ledger: rows past their retention removed", "rows", n, "retention", retention.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(ledgerPurgeEvery):
		}
	}
}
