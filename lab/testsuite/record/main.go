// Command record runs every seed fault case against a real Temporal dev
// server (in memory, started for the run) and writes the history of every
// Delivery workflow each case ran into a new set under
// workflows/testdata/histories, as the JSON the SDK's replayer reads.
// With -gate it runs the destination gate's scenarios instead (gate.go)
// and writes the Destination workflows' histories; with -trust, a few
// Delivery scenarios off the happy path instead (trust.go).
// workflows/replay_test.go replays every set.
//
// From the repository root, with bin/temporal built (make temporal):
//
//	go run ./lab/testsuite/record -set NAME [-gate | -trust | -verified]
//
// Record a new set when the workflow changes what its histories hold (name
// it after the change), or re-record the newest set when a case is added
// or changed. Never re-record an older set to make it pass: the committed
// sets are what running deliveries look like, and must keep replaying; a
// change to the command sequence goes behind workflow.GetVersion.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/internal/visibility"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/testsuite"
	"github.com/abde64c9/courier/lab/wftest"
	"github.com/abde64c9/courier/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := record(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func record(ctx context.Context) error {
	set := flag.String("set", "", "the history set to write: a folder under "+wftest.HistoriesDir+"; required")
	gate := flag.Bool("gate", false, "record the destination gate's scenarios instead of the fault cases")
	trust := flag.Bool("trust", false, "record the Delivery scenarios off the happy path (caller-set attributes, cancels, a retry past the key retention, one held past it) instead of the fault cases")
	verified := flag.Bool("verified", false, "record the Delivery scenarios of reviewers with keys (signed decisions, good and bad)")
	flag.Parse()
	if n := btoi(*gate) + btoi(*trust) + btoi(*verified); n > 1 {
		return fmt.Errorf("-gate, -trust and -verified record different sets: choose one")
	}
	if *set == "" || strings.ContainsAny(*set, `/\.`) {
		return fmt.Errorf("-set NAME is required: the folder under " + wftest.HistoriesDir + " to write " +
			"(a new one after a workflow change; never an older set)")
	}
	root, err := devserver.RepoRoot()
	if err != nil {
		return err
	}
	out := filepath.Join(root, filepath.FromSlash(wftest.HistoriesDir), *set)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if *gate {
		tmp, err := lab.StartTemporal(ctx, lab.TemporalOptions{Log: os.Stderr, Logger: logger})
		if err != nil {
			return err
		}
		defer tmp.Close()
		files, index, err := recordGates(ctx, tmp.Client(), logger)
		if err != nil {
			return err
		}
		return write(out, files, index)
	}
	dir, err := os.MkdirTemp("", "courier-record-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The process cases run `courier worker` and `courier deliver`.
	courier, err := lab.BuildCourier(dir)
	if err != nil {
		return err
	}
	tmp, err := lab.StartTemporal(ctx, lab.TemporalOptions{Log: os.Stderr, Logger: logger})
	if err != nil {
		return err
	}
	defer tmp.Close()
	if *verified {
		files, index, err := recordVerified(ctx, tmp, courier, dir, logger)
		if err != nil {
			return err
		}
		return write(out, files, index)
	}
	if *trust {
		files, index, err := recordTrust(ctx, tmp, courier, dir, logger)
		if err != nil {
			return err
		}
		return write(out, files, index)
	}

	c := tmp.Client()
	rl := &testsuite.RealLab{
		Temporal: tmp, Courier: courier, Dir: dir, Log: os.Stderr,
		// A fixed run id keeps workflow IDs stable across regenerations; the
		// server is fresh, so nothing earlier can be joined.
		RunID: "rec",
		// Parked deliveries are closed by an abandon update, so their
		// histories are complete and cover the update path too.
		AbandonParked: true,
	}
	seen := map[string]bool{}
	var index []wftest.RecordedCase
	files := map[string][]byte{}
	for _, cs := range testsuite.RealCases() {
		rep, err := rl.Execute(ctx, cs)
		if err != nil {
			return fmt.Errorf("case %q: %w", cs.Name, err)
		}
		if !rep.Passed {
			b, _ := json.MarshalIndent(rep, "", "  ")
			return fmt.Errorf("case %q failed; not recording a failing case:\n%s", cs.Name, b)
		}
		execs, err := newExecutions(ctx, c, seen)
		if err != nil {
			return fmt.Errorf("case %q: %w", cs.Name, err)
		}
		if len(execs) == 0 {
			return fmt.Errorf("case %q ran no Delivery workflow", cs.Name)
		}
		rc := wftest.RecordedCase{Seed: cs.Seed, Case: cs.Name}
		for i, e := range execs {
			b, err := history(ctx, c, e)
			if err != nil {
				return fmt.Errorf("case %q: %w", cs.Name, err)
			}
			name := fileName(cs.Seed, cs.Name, i)
			files[name] = b
			rc.Histories = append(rc.Histories, wftest.RecordedHistory{File: name, WorkflowID: e.id, RunID: e.runID})
		}
		index = append(index, rc)
		logger.Warn("recorded", "case", cs.Name, "workflows", len(execs))
	}
	return write(out, files, index)
}

// newExecutions lists the Delivery workflows not seen before, oldest first.
// Visibility lags a moment behind the workflows, so it lists until two
// listings a second apart agree.
func newExecutions(ctx context.Context, c client.Client, seen map[string]bool) ([]*workflowExecution, error) {
	var last []*workflowExecution
	for range 30 {
		var got []*workflowExecution
		for e, err := range visibility.Executions(ctx, c, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowType = %q", workflows.WorkflowType)}) {
			if err != nil {
				return nil, fmt.Errorf("list workflows: %w", err)
			}
			id := e.GetExecution().GetWorkflowId() + "/" + e.GetExecution().GetRunId()
			if !seen[id] {
				got = append(got, &workflowExecution{id: e.GetExecution().GetWorkflowId(),
					runID: e.GetExecution().GetRunId(), started: e.GetStartTime().AsTime()})
			}
		}
		if last != nil && len(got) == len(last) {
			slices.SortFunc(got, func(a, b *workflowExecution) int { return a.started.Compare(b.started) })
			for _, e := range got {
				seen[e.id+"/"+e.runID] = true
			}
			return got, nil
		}
		last = got
		time.Sleep(time.Second)
	}
	return nil, fmt.Errorf("visibility did not settle")
}

// fileName is the i-th workflow of a case: seed.case-slug[-i].json.
func fileName(seed, name string, i int) string {
	slug := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
	slug = strings.Trim(slug, "-")
	for strings.Contains(slug, "--") {
		slug = strings.ReplaceAll(slug, "--", "-")
	}
	if i > 0 {
		slug += fmt.Sprintf("-%d", i+1)
	}
	return seed + "." + slug + ".json"
}

type workflowExecution struct {
	id, runID string
	started   time.Time
}

// history waits for the workflow to close and returns its history as JSON.
func history(ctx context.Context, c client.Client, e *workflowExecution) ([]byte, error) {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// Every case ends its deliveries (parked ones by abandon); the result
	// itself does not matter here.
	err := c.GetWorkflow(wctx, e.id, e.runID).Get(wctx, nil)
	if _, ok := workflows.UndeliveredResult(err); ok || temporal.IsCanceledError(err) {
		err = nil // closed without delivering; or a gate, cancelled
	}
	if app := (*temporal.ApplicationError)(nil); errors.As(err, &app) && app.Type() == gate.ErrWrongName {
		err = nil // a gate that refused itself for its name
	}
	if err != nil {
		return nil, fmt.Errorf("workflow %s did not close: %w", e.id, err)
	}
	h := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, e.id, e.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", e.id, err)
		}
		h.Events = append(h.Events, ev)
	}
	return protojson.Marshal(h)
}

// write replaces the folder's histories with these.
func write(dir string, files map[string][]byte, index []wftest.RecordedCase) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	total := 0
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
			return err
		}
		total += len(b)
	}
	b, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, wftest.HistoryIndexFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %d histories of %d cases (%d KB) to %s\n",
		len(files), len(index), total/1024, strings.TrimSuffix(dir, "/"))
	return nil
}
