# The pinned Temporal CLI (dev server 1.29.1, UI 2.42.1), built from source.
TEMPORAL_CLI_VERSION := v1.5.1
TEMPORAL := $(CURDIR)/bin/temporal
# The web UI server courier-lab dev serves (the UI the CLI bundles, with settings).
UI_SERVER_VERSION := v2.42.1
UI_SERVER := $(CURDIR)/bin/ui-server/server
WORKFLOWCHECK_VERSION := v0.6.0
WORKFLOWCHECK := $(CURDIR)/bin/workflowcheck

# The Temporal server and temporal-sql-tool of the native production
# topology (lab/topology): the server compose pins. Both commands are
# named by their package (server, sql), so each gets a folder.
TEMPORAL_SERVER_VERSION := v1.29.1
TEMPORAL_SERVER := $(CURDIR)/bin/temporal-server/server
TEMPORAL_SQL_TOOL := $(CURDIR)/bin/temporal-sql-tool/sql
NODES ?= 1

.PHONY: dev test test-long temporal ui-server temporal-server temporal-sql-tool faultlab vet lint soak histories topology-up topology-down topology-test topology-bench

## dev: run Courier locally (dev server with SQLite, web UI, worker, sandbox destinations); Ctrl-C stops it
# DEV_FLAGS are more flags for courier-lab dev, e.g. DEV_FLAGS='--port 7234 --ui-port 8234'.
dev: $(TEMPORAL) $(UI_SERVER)
	go run ./cmd/courier-lab dev $(DEV_FLAGS)

# The long runs: the five-minute outage, deciding 200 parked deliveries in
# one batch, the bench's smoke run and the soaks. CI runs them beside make test.
LONG_TESTS := ^(TestBreakerHoldsDuringOutage|TestReviewAll|TestSmoke|TestShortSoak|TestSoakExternalServer)$$

## test: vet, check workflow determinism, test everything but the long runs (builds the Temporal CLI and server once)
test: $(TEMPORAL) $(UI_SERVER) $(TEMPORAL_SERVER) vet lint
	go test -count=1 -timeout 20m -skip '$(LONG_TESTS)' ./...

## test-long: the long runs make test leaves out (CI runs both)
test-long: $(TEMPORAL) $(UI_SERVER) $(TEMPORAL_SERVER)
	go test -count=1 -timeout 30m -run '$(LONG_TESTS)' ./...

vet:
	go vet ./...

## lint: workflowcheck, the SDK's static check that workflow code is deterministic
lint: $(WORKFLOWCHECK)
	$(WORKFLOWCHECK) ./workflows/... ./worker/... ./gate/... ./courierwf/... ./examples/...

$(WORKFLOWCHECK):
	GOBIN=$(CURDIR)/bin go install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION)

## faultlab: print the seed fault-case report
faultlab:
	go run ./cmd/courier-lab faultlab

## soak: chaos soak, 500 deliveries (a few minutes)
soak: $(TEMPORAL)
	go run ./cmd/courier-lab soak

## histories: record a set of replay histories into workflows/testdata/histories, SET=name (a new set after a workflow change; never an older one); GATE=1 for the destination gate's scenarios; TRUST=1 for the Delivery scenarios off the happy path; VERIFIED=1 for reviewers with keys
histories: $(TEMPORAL)
	go run ./lab/testsuite/record -set $(SET) $(if $(GATE),-gate) $(if $(TRUST),-trust) $(if $(VERIFIED),-verified)

## temporal: build the pinned Temporal CLI into bin/
temporal: $(TEMPORAL)

$(TEMPORAL):
	GOBIN=$(CURDIR)/bin go install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

## ui-server: build the pinned web UI server into bin/ui-server/
ui-server: $(UI_SERVER)

$(UI_SERVER):
	GOBIN=$(CURDIR)/bin/ui-server go install github.com/temporalio/ui-server/v2/cmd/server@$(UI_SERVER_VERSION)

## temporal-server: build the pinned Temporal server into bin/temporal-server/
temporal-server: $(TEMPORAL_SERVER)

$(TEMPORAL_SERVER):
	GOBIN=$(CURDIR)/bin/temporal-server go install go.temporal.io/server/cmd/server@$(TEMPORAL_SERVER_VERSION)

## temporal-sql-tool: build the pinned temporal-sql-tool into bin/temporal-sql-tool/
temporal-sql-tool: $(TEMPORAL_SQL_TOOL)

$(TEMPORAL_SQL_TOOL):
	GOBIN=$(CURDIR)/bin/temporal-sql-tool go install go.temporal.io/server/cmd/tools/sql@$(TEMPORAL_SERVER_VERSION)

## topology-up: the production topology without Docker, NODES=1|2 (PostgreSQL, the token issuer, Temporal server nodes checking callers, sandbox, 3 workers)
topology-up: $(TEMPORAL_SERVER) $(TEMPORAL_SQL_TOOL)
	go run ./lab/topology up --nodes $(NODES)

## topology-down: stop every process topology-up started, by PID, then its PostgreSQL
topology-down:
	go run ./lab/topology down

## topology-bench: the bench's throughput phase on the topology with 1 node, then 2, one right after the other (every node's CPU and work summed); then down. BENCH_FLAGS replace the bench's flags
topology-bench: $(TEMPORAL_SERVER) $(TEMPORAL_SQL_TOOL)
	go run ./lab/topology bench -- $(BENCH_FLAGS)

## topology-test: from nothing, 2 nodes: callers checked by role, the HTTP API, faultlab, the chaos soak with a node SIGKILLed, a node kill under load; then down
topology-test: $(TEMPORAL_SERVER) $(TEMPORAL_SQL_TOOL)
	go run ./lab/topology test
