package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/abde64c9/courier/deploy"
	"github.com/abde64c9/courier/lab/bench"
)

// benchWithin bounds one bench run.
const benchWithin = 30 * time.Minute

// benchNamespace is the namespace the bench runs in, apart from the
// topology's own.
const benchNamespace = "bench"

// benchDefaults are the bench's flags when none are given: the throughput
// phase at the concurrencies the performance notes compare.
var benchDefaults = []string{"--phases", "throughput", "--rounds", "2", "--concurrency", "1,16,64"}

// benchSides are the sides the table compares.
var benchSides = []string{bench.SideBare, bench.SideKey}

// bench brings the topology up with each node count in turn, one right
// after the other, runs `courier-lab bench` against it with every node's
// PID and metrics endpoint (so the server's CPU time and work are all its
// nodes'), and brings it down between runs and at the end, also on
// failure. It prints each run's report, then bare and courier-key side by
// side.
func (t *topo) bench(ctx context.Context, nodeCounts []int, flags []string) error {
	if up := t.anyRunning(); len(up) > 0 {
		return fmt.Errorf("the topology is up (%s): the bench brings it up with each node count itself; make topology-down first",
			strings.Join(up, ", "))
	}
	defer func() {
		if err := t.down(); err != nil {
			say("%v", err)
		}
	}()
	if len(flags) == 0 {
		flags = benchDefaults
	}
	courierLab := filepath.Join(t.dir, "courier-lab") // built by up, beside the courier it runs
	var reports []bench.Report
	for i, nodes := range nodeCounts {
		if i > 0 {
			if err := t.down(); err != nil {
				return err
			}
		}
		rep, err := t.benchRun(ctx, courierLab, nodes, flags)
		if err != nil {
			return err
		}
		reports = append(reports, rep)
	}
	printBenchTable(os.Stdout, nodeCounts, reports)
	return nil
}

// benchRun brings the topology up with this many nodes and runs the bench
// against it, its JSON report kept in the state folder.
func (t *topo) benchRun(ctx context.Context, courierLab string, nodes int, flags []string) (bench.Report, error) {
	var rep bench.Report
	if err := t.up(ctx, nodes, false); err != nil {
		return rep, err
	}
	env, err := t.labEnv(benchNamespace)
	if err != nil {
		return rep, err
	}
	var pids, metrics []string
	for n := 1; n <= nodes; n++ {
		node, _ := deploy.TopologyNode(n)
		pids = append(pids, strconv.Itoa(t.pid(nodeName(n))))
		metrics = append(metrics, node.MetricsURL())
	}
	name := fmt.Sprintf("bench-%dnodes", nodes)
	out := t.procFile(name, "json")
	if err := os.Remove(out); err != nil && !errors.Is(err, os.ErrNotExist) {
		return rep, err
	}
	argv := append([]string{courierLab, "bench", "--server-pid", strings.Join(pids, ","),
		"--server-metrics", strings.Join(metrics, ","), "--json-out", out}, flags...)
	ctx, cancel := context.WithTimeout(ctx, benchWithin)
	defer cancel()
	md, runErr := t.runLab(ctx, name, env, argv...)
	fmt.Printf("\n# On %s\n\n%s", nodesName(nodes), md)
	raw, err := os.ReadFile(out)
	if err != nil {
		// No report: the bench could not run (a failed target still writes one).
		return rep, fmt.Errorf("bench on %d node(s): %w; see %s", nodes, errors.Join(runErr, err), t.procFile(name, "log"))
	}
	if runErr != nil {
		say("bench on %d node(s): %v (a target failed; the report above says which)", nodes, runErr)
	}
	return rep, json.Unmarshal(raw, &rep)
}

// printBenchTable prints bare and courier-key at each concurrency, one
// column group per node count, and courier-key's ratios to bare.
func printBenchTable(w io.Writer, nodeCounts []int, reports []bench.Report) {
	find := func(r bench.Report, side string, conc int) bench.Summary {
		for _, s := range r.Throughput {
			if s.Side == side && s.Concurrency == conc {
				return s
			}
		}
		return bench.Summary{}
	}
	head, rule := "| concurrency | side |", "| ---: | --- |"
	ratioHead, ratioRule := "| concurrency |", "| ---: |"
	for _, n := range nodeCounts {
		head += fmt.Sprintf(" %s ops/s | p50 / p99 ms | server CPU ms/op |", nodesName(n))
		rule += " ---: | ---: | ---: |"
		ratioHead += fmt.Sprintf(" %s: throughput | CPU per delivery |", nodesName(n))
		ratioRule += " ---: | ---: |"
	}
	fmt.Fprintf(w, "\n%s\n%s\n", head, rule)
	concs := reports[0].Setup.Concurrency
	for _, c := range concs {
		for _, side := range benchSides {
			line := fmt.Sprintf("| %d | %s |", c, side)
			for _, r := range reports {
				s := find(r, side, c)
				line += fmt.Sprintf(" %.1f | %s / %s | %.1f |", s.PerSecond, millis(s.P50ms), millis(s.P99ms), s.CPUms.Server)
			}
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintf(w, "\ncourier-key / bare:\n\n%s\n%s\n", ratioHead, ratioRule)
	for _, c := range concs {
		line := fmt.Sprintf("| %d |", c)
		for _, r := range reports {
			key, bare := find(r, bench.SideKey, c), find(r, bench.SideBare, c)
			line += fmt.Sprintf(" %.2f | %.2f |", key.PerSecond/bare.PerSecond, key.CPUms.Server/bare.CPUms.Server)
		}
		fmt.Fprintln(w, line)
	}
}

// millis is a whole number of milliseconds with its thousands grouped, as
// the performance notes write them: 1,003.
func millis(v float64) string {
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func nodesName(n int) string {
	if n == 1 {
		return "1 node"
	}
	return strconv.Itoa(n) + " nodes"
}
