package worker

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"time"
	"unicode"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"github.com/abde64c9/courier/workflows"
)

// Courier's own metrics, next to the SDK's temporal_* ones. The counters
// are the workflow's (see workflows); counters are exported with a _total
// suffix (courier_deliveries_total, ...).
const (
	MetricDeliveries      = workflows.MetricDeliveries
	MetricAttempts        = workflows.MetricAttempts
	MetricUnknownOutcomes = workflows.MetricUnknownOutcomes
	// MetricAwaitingReview is a gauge of the deliveries parked for a human
	// decision, by destination, read from the visibility store.
	MetricAwaitingReview = "courier_deliveries_awaiting_review"
)

// Metrics is a Prometheus registry that the Temporal client and Courier
// report into through the SDK's metrics handler.
type Metrics struct {
	// Handler goes in client.Options.MetricsHandler.
	Handler client.MetricsHandler
	http    http.Handler
	scope   io.Closer
}

// reportEvery is how often tally hands its values to the Prometheus registry.
const reportEvery = time.Second

// NewMetrics makes a registry of its own, so that several workers can live
// in one process (tests, `courier-lab dev`) without clashing. Given the
// configured destinations, a destination label any other name would take
// (a caller's input names it) reads "unconfigured", so that outsiders
// cannot grow the registry with a series per name they make up.
func NewMetrics(logger *slog.Logger, destinations ...string) *Metrics {
	if logger == nil {
		logger = slog.Default()
	}
	// Names and keys as Prometheus requires; values as they are, since a
	// label value may hold any text: a destination named stripe-eu is
	// stripe-eu on the gauge, not stripe_eu.
	sanitize := sdktally.PrometheusSanitizeOptions
	sanitize.ValueCharacters = tally.ValidCharacters{Ranges: []tally.SanitizeRange{{0, unicode.MaxRune}}}
	reg := prom.NewRegistry()
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer: reg,
		// The default panics; a metric registered twice with other tags
		// must not take the worker down.
		OnRegisterError: func(err error) { logger.Warn("metrics: register", "error", err) },
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sanitize,
	}, reportEvery)
	var h client.MetricsHandler = sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope))
	if len(destinations) > 0 {
		known := make(map[string]bool, len(destinations))
		for _, d := range destinations {
			known[d] = true
		}
		h = knownDestinations{MetricsHandler: h, known: known}
	}
	return &Metrics{Handler: h, http: reporter.HTTPHandler(), scope: closer}
}

// Unconfigured is the destination label of every destination the worker's
// file does not name.
const Unconfigured = "unconfigured"

// knownDestinations bounds the destination label to the configured names.
type knownDestinations struct {
	client.MetricsHandler
	known map[string]bool
}

func (k knownDestinations) WithTags(tags map[string]string) client.MetricsHandler {
	if d, ok := tags["destination"]; ok && !k.known[d] {
		tags = maps.Clone(tags)
		tags["destination"] = Unconfigured
	}
	return knownDestinations{MetricsHandler: k.MetricsHandler.WithTags(tags), known: k.known}
}

// HTTPHandler serves the registry in the Prometheus text format.
func (m *Metrics) HTTPHandler() http.Handler { return m.http }

// Close flushes the last values.
func (m *Metrics) Close() error { return m.scope.Close() }

// watchAwaitingReview keeps the awaiting-review gauge current until ctx is
// done. The count comes from the visibility store, not from events this
// process saw: a parked delivery may have been parked by another worker, or
// before this one started, and stays parked across restarts. Every worker
// reports the same cluster-wide value, so aggregate with max(), not sum().
func watchAwaitingReview(ctx context.Context, c client.Client, namespace string, destinations []string,
	h client.MetricsHandler, every time.Duration, logger *slog.Logger) {
	gauges := make(map[string]client.MetricsGauge, len(destinations))
	for _, d := range destinations {
		gauges[d] = h.WithTags(map[string]string{"namespace": namespace, "destination": d}).Gauge(MetricAwaitingReview)
	}
	failing := false
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		var err error
		for _, d := range destinations {
			var resp *workflowservice.CountWorkflowExecutionsResponse
			resp, err = c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
				Namespace: namespace, Query: workflows.ParkedQuery(d),
			})
			if err != nil {
				break
			}
			gauges[d].Update(float64(resp.GetCount()))
		}
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			// Once per failure streak: the visibility store may be briefly
			// unavailable, and the gauge keeps its last value meanwhile.
			logger.Warn("metrics: cannot count deliveries awaiting review", "error", err)
			failing = true
		case err == nil && failing:
			logger.Info("metrics: counting deliveries awaiting review again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
