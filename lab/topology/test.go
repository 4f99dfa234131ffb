package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/abde64c9/courier/deploy"
	"github.com/abde64c9/courier/lab"
)

// Bounds of the test's phases.
const (
	faultlabWithin = 20 * time.Minute
	soakWithin     = 30 * time.Minute
	splitWithin    = 15 * time.Minute
)

// phaseNames are the test's phases, in the order they run.
var phaseNames = []string{"auth", "api", "faultlab", "soak", "split"}

// testFailed: the test ran and its table says what failed.
type testFailed struct{}

func (testFailed) Error() string { return "the topology test found violations" }

// row is one phase's line of the summary table.
type row struct {
	phase, deliveries, kills, takeover string
	duplicates, lost                   string
	pass                               bool
	notes                              []string
}

// test brings the topology up from nothing with two nodes, runs each
// phase in a namespace of its own, brings it down (also on failure) and
// prints the table.
func (t *topo) test(ctx context.Context, phases []string) error {
	if up := t.anyRunning(); len(up) > 0 {
		return fmt.Errorf("the topology is up (%s): the test starts from nothing; make topology-down first", strings.Join(up, ", "))
	}
	began := time.Now()
	defer func() {
		if err := t.down(); err != nil {
			say("%v", err)
		}
	}()
	if err := t.up(ctx, 2, true); err != nil {
		return err
	}
	upTook := time.Since(began)
	courierLab := filepath.Join(t.dir, "courier-lab") // built by up, beside the courier it runs
	var rows []row
	for _, p := range phases {
		switch p {
		case "auth":
			rows = append(rows, t.auth(ctx))
		case "api":
			rows = append(rows, t.apiPhase(ctx))
		case "faultlab":
			rows = append(rows, t.faultlab(ctx, courierLab))
		case "soak":
			rows = append(rows, t.soak(ctx, courierLab))
		case "split":
			rows = append(rows, t.split(ctx))
		}
	}
	pass := printTable(os.Stdout, rows)
	fmt.Printf("\nup (2 nodes, from nothing) took %s; the whole test %s.\n",
		upTook.Round(100*time.Millisecond), time.Since(began).Round(time.Second))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !pass {
		return testFailed{}
	}
	return nil
}

// labEnv is a lab command's environment: node 1's frontend, namespace ns,
// the admin's token. The lab commands are harnesses: they create their
// namespace, start deliveries, run workers and decide reviews.
func (t *topo) labEnv(ns string) ([]string, error) {
	admin, err := lab.ReadToken(t.issuerDir(), "admin")
	if err != nil {
		return nil, err
	}
	n, _ := deploy.TopologyNode(1)
	return append(append(cleanEnv(), "TEMPORAL_ADDRESS="+n.FrontendAddr(), "TEMPORAL_NAMESPACE="+ns), lab.ClientEnv(admin)...), nil
}

// runLab runs a courier lab command with stdout captured and stderr in
// NAME.log.
func (t *topo) runLab(ctx context.Context, name string, env []string, argv ...string) ([]byte, error) {
	logf, err := t.openLog(name)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = t.root, env
	cmd.Stdout, cmd.Stderr = &out, logf
	cmd.WaitDelay = 30 * time.Second
	say("%s: %s (log %s)", name, strings.Join(argv[1:], " "), t.procFile(name, "log"))
	err = cmd.Run()
	return out.Bytes(), err
}

// faultlab: every seed fault case against node 1, in courier-faultlab.
func (t *topo) faultlab(ctx context.Context, courierLab string) row {
	r := row{phase: "faultlab --mode real", kills: "the cases' own", takeover: "-", duplicates: "-", lost: "-"}
	ctx, cancel := context.WithTimeout(ctx, faultlabWithin)
	defer cancel()
	env, err := t.labEnv("courier-faultlab")
	if err != nil {
		r.notes = append(r.notes, err.Error())
		return r
	}
	out, err := t.runLab(ctx, "faultlab", env, courierLab, "faultlab", "--mode", "real")
	var rep struct {
		Status string `json:"status"`
		Cases  []struct {
			Case   string `json:"case"`
			Passed bool   `json:"passed"`
		} `json:"cases"`
	}
	if jerr := json.Unmarshal(out, &rep); jerr != nil {
		r.deliveries = "?"
		r.notes = append(r.notes, fmt.Sprintf("faultlab: no report (%v, %v); see %s", err, jerr, t.procFile("faultlab", "log")))
		return r
	}
	passed := 0
	for _, c := range rep.Cases {
		if c.Passed {
			passed++
		} else {
			r.notes = append(r.notes, "faultlab: case failed: "+c.Case)
		}
	}
	r.deliveries = fmt.Sprintf("%d/%d cases", passed, len(rep.Cases))
	r.pass = err == nil && rep.Status == "PASS" && len(rep.Cases) > 0 && passed == len(rep.Cases)
	return r
}

// soakDeliveries is the chaos soak's size.
const soakDeliveries = 500

// soak: the chaos soak against node 1, in courier-soak, with node 1
// SIGKILLed and started again where the soak would restart its dev server.
func (t *topo) soak(ctx context.Context, courierLab string) row {
	r := row{phase: "chaos soak (node 1 SIGKILLed)", deliveries: fmt.Sprint(soakDeliveries)}
	ctx, cancel := context.WithTimeout(ctx, soakWithin)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		r.notes = append(r.notes, err.Error())
		return r
	}
	if help, _ := exec.CommandContext(ctx, courierLab, "soak", "-h").CombinedOutput(); !bytes.Contains(help, []byte("--restart-server")) {
		r.kills, r.takeover, r.duplicates, r.lost = "-", "-", "-", "-"
		r.notes = append(r.notes, "soak: `courier-lab soak` has no --restart-server flag: it cannot run against the topology and restart a node")
		return r
	}
	dir := filepath.Join(t.dir, "soak")
	if err := os.RemoveAll(dir); err != nil {
		r.notes = append(r.notes, err.Error())
		return r
	}
	env, err := t.labEnv("courier-soak")
	if err != nil {
		r.notes = append(r.notes, err.Error())
		return r
	}
	began := time.Now()
	restart := shellQuote(self) + " restart-node 1"
	out, err := t.runLab(ctx, "soak", env, courierLab, "soak",
		"--deliveries", fmt.Sprint(soakDeliveries), "--json", "--dir", dir, "--restart-server", restart)
	var sum struct {
		Deliveries  int            `json:"deliveries"`
		Statuses    map[string]int `json:"statuses"`
		WorkerKills int            `json:"worker_kills"`
		Duplicates  int            `json:"duplicates"`
		Lost        int            `json:"lost"`
		Violations  []string       `json:"violations"`
	}
	if jerr := json.Unmarshal(out, &sum); jerr != nil {
		r.duplicates, r.lost, r.kills, r.takeover = "?", "?", "?", "?"
		r.notes = append(r.notes, fmt.Sprintf("soak: no summary (%v); see %s:\n%s", err, t.procFile("soak", "log"), t.logTail("soak")))
		return r
	}
	kills, terr := t.takeoversSince(began)
	if terr != nil {
		r.notes = append(r.notes, terr.Error())
	}
	r.deliveries = fmt.Sprint(sum.Deliveries)
	r.kills = fmt.Sprintf("%d worker, %d node", sum.WorkerKills, len(kills))
	r.takeover = takeoverCell(kills)
	r.duplicates, r.lost = fmt.Sprint(sum.Duplicates), fmt.Sprint(sum.Lost)
	for _, v := range sum.Violations {
		r.notes = append(r.notes, "soak: "+v)
	}
	if len(kills) == 0 {
		r.notes = append(r.notes, "soak: node 1 was never killed (restart-node recorded nothing)")
	} else {
		r.notes = append(r.notes, "soak: node 1 is started again at once; its shards are owned again (by it or by node 2) within the time shown")
	}
	r.notes = append(r.notes, "soak statuses: "+statusLine(sum.Statuses))
	r.pass = err == nil && sum.Duplicates == 0 && sum.Lost == 0 && len(sum.Violations) == 0 && len(kills) > 0
	return r
}

// takeoverCell is the node kills' shard takeover times.
func takeoverCell(ks []takeover) string {
	if len(ks) == 0 {
		return "-"
	}
	var s []string
	for _, k := range ks {
		s = append(s, takeoverText(k.Seconds, k.Shards))
	}
	return strings.Join(s, ", ")
}

// takeoverText is one takeover: its time and how many shards moved.
func takeoverText(seconds float64, shards int) string {
	noun := "shards"
	if shards == 1 {
		noun = "shard"
	}
	return fmt.Sprintf("%.1f s (%d %s)", seconds, shards, noun)
}

func statusLine(m map[string]int) string {
	var s []string
	for _, k := range sortedKeys(m) {
		s = append(s, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(s, ", ")
}

// printTable prints the summary as a Markdown table, then the notes; it
// reports whether every phase passed.
func printTable(w *os.File, rows []row) bool {
	pass := true
	fmt.Fprintln(w, "\n| phase | deliveries | kills | shard takeover | duplicates | lost | result |")
	fmt.Fprintln(w, "|---|---:|---|---|---:|---:|---|")
	for _, r := range rows {
		res := "PASS"
		if !r.pass {
			res, pass = "FAIL", false
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.phase, r.deliveries, r.kills, r.takeover, r.duplicates, r.lost, res)
	}
	for _, r := range rows {
		for _, n := range r.notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	return pass
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
