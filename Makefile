# The pinned Temporal CLI (dev server 1.29.1, UI 2.42.1), built from source.
TEMPORAL_CLI_VERSION := v1.5.1
TEMPORAL := $(CURDIR)/bin/temporal

.PHONY: dev test temporal faultlab vet

## dev: run Courier locally (dev server with SQLite, web UI, worker, sandbox destinations)
dev: $(TEMPORAL)
	go run ./cmd/courier dev

## test: vet and test everything (builds the Temporal CLI once)
test: $(TEMPORAL) vet
	go test -count=1 -timeout 30m ./...

vet:
	go vet ./...

## faultlab: print the seed fault-case report
faultlab:
	go run ./cmd/courier faultlab

## temporal: build the pinned Temporal CLI into bin/
temporal: $(TEMPORAL)

$(TEMPORAL):
	GOBIN=$(CURDIR)/bin go install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)
