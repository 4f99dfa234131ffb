package starter_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination/httpdest"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/lab/testsuite"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// fx is what every test and example of this package runs against: one real
// dev server, a Courier worker in this process, the sandbox destinations
// of the fault cases, and "lossy", a destination without dedup whose every
// response is lost right after the commit (for the review example).
var fx struct {
	addr   string
	client client.Client
	env    *testsuite.Env
}

// DestLossy loses every response after committing the ticket.
const DestLossy = "lossy"

// TestMain starts the fixture and points Temporal's standard client
// environment at it, so the examples connect as a service would.
func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starter tests:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "courier-starter-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{
		ClientOptions:     client.Options{Logger: sdklog.NewStructuredLogger(logger)},
		KeywordAttributes: workflows.SearchAttributeNames,
	})
	if err != nil {
		return 0, fmt.Errorf("%w (%s)", err, devserver.BuildHint)
	}
	defer func() { _ = srv.Stop() }()

	env, err := testsuite.NewEnv(dir)
	if err != nil {
		return 0, err
	}
	defer env.Close()

	lossy, err := sandbox.Open(filepath.Join(dir, "lossy.db"), map[string]sandbox.Mode{DestLossy: sandbox.ModeNoKeys})
	if err != nil {
		return 0, err
	}
	defer lossy.Close()
	if err := lossy.Inject(DestLossy, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit, Count: 1 << 20}); err != nil {
		return 0, err
	}
	hs := httptest.NewServer(lossy.Handler())
	defer hs.Close()

	cfg := env.Config
	cfg.Destinations = maps.Clone(cfg.Destinations)
	cfg.Destinations[DestLossy] = destinations.Destination{
		Adapter: destinations.AdapterHTTP, URL: hs.URL + "/" + DestLossy + "/tickets",
		Contract: contract.Contract{Dedup: contract.DedupNone, Retry: contract.Retry{
			MaxAttempts: 3, AttemptTimeout: contract.Duration(lab.CaseBudget.AttemptTimeout), Deadline: contract.Duration(time.Minute),
		}}.WithDefaults(),
	}
	ad, err := httpdest.New(DestLossy, cfg.Destinations[DestLossy], nil)
	if err != nil {
		return 0, err
	}
	adapters := maps.Clone(env.Adapters.ByName)
	adapters[DestLossy] = ad

	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(wctx, worker.New(srv.Client(), cfg, &activities.Activities{Adapters: adapters, Contracts: cfg.Contracts(), Runs: env.WorkerActivities(srv.Client()).Runs}, sdkworker.Options{}))
	}()
	defer func() { stop(); <-done }()

	fx.addr, fx.client, fx.env = srv.FrontendHostPort(), srv.Client(), env
	os.Setenv("TEMPORAL_ADDRESS", fx.addr)
	os.Setenv("TEMPORAL_NAMESPACE", "default")
	return m.Run(), nil
}
