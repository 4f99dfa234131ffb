// Command topology runs Courier's production topology on this machine
// without Docker: PostgreSQL, one or two Temporal server nodes built from
// the pinned module (their configuration is docker-compose's,
// deploy/temporal/courier.yaml, checking every caller's token), the issuer
// that signs those tokens, the sandbox destinations, three
// `courier worker` processes and one `courier api` (the HTTP front door), everything on 127.0.0.1 in 23000-23499. Its
// processes outlive it, each stopped by the PID it records in the state
// folder (.topology/ in the checkout). It is lab code: nothing in
// production imports it.
//
//	topology up [--nodes 1|2]     bring it up (again: what runs is kept)
//	topology down                 stop every process, then PostgreSQL
//	topology restart-node N       SIGKILL node N and start it again
//	topology test                 up with 2 nodes, the failure tests, down
//	topology bench [--nodes 1,2] [-- bench flags]
//	                              up with 1 node, the bench, down; the same with 2
//
// The Makefile runs it: make topology-up NODES=2, make topology-down,
// make topology-test, make topology-bench.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/abde64c9/courier/deploy"
	"github.com/abde64c9/courier/lab/devserver"
)

// topo is the topology of one checkout: its binaries and state folder.
type topo struct {
	root string // the checkout
	dir  string // the state folder
	// server and sqlTool are the pinned Temporal server and
	// temporal-sql-tool (both named by their commands, hence a folder each).
	server, sqlTool string
	// ledger is the workers' outcome ledger, once up has set it up.
	ledger string
}

// stateDir is the state folder, in the checkout's root (git-ignored).
const stateDir = ".topology"

const usage = `usage: topology COMMAND
  up [--nodes 1|2]    PostgreSQL, the token issuer, the Temporal server nodes, the
                      default namespace, the sandbox, three courier workers and courier api
                      (kept running)
  down                stop them all by PID, then the topology's PostgreSQL
  restart-node N      SIGKILL node N and start it again (the soak's server restart)
  test [--phases P,..] from nothing: up with 2 nodes, callers checked by role (auth),
                      the HTTP API (api), faultlab, the chaos soak and a node kill under load, each in a
                      namespace of its own; then down
  bench [--nodes 1,2] [-- FLAGS]
                      for each node count, one right after the other: up, courier-lab bench
                      in namespace bench with every node's PID and metrics endpoint, down;
                      then bare and courier-key side by side (FLAGS replace the bench's
                      default --phases throughput --rounds 2 --concurrency 1,16,64)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	var failed testFailed
	switch {
	case errors.As(err, &failed):
		os.Exit(1)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "topology:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return flag.ErrHelp
	}
	t, err := open()
	if err != nil {
		return err
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	switch cmd {
	case "up":
		nodes := fs.Int("nodes", 1, "server nodes: 1 or 2")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if *nodes < 1 || *nodes > deploy.MaxNodes {
			return fmt.Errorf("--nodes %d: use 1 or %d", *nodes, deploy.MaxNodes)
		}
		return t.up(ctx, *nodes, false)
	case "down":
		if err := fs.Parse(args); err != nil {
			return err
		}
		return t.down()
	case "restart-node":
		if err := fs.Parse(args); err != nil {
			return err
		}
		n, err := strconv.Atoi(fs.Arg(0))
		if fs.NArg() != 1 || err != nil {
			return fmt.Errorf("restart-node takes the node's number, e.g. `topology restart-node 1`")
		}
		return t.restartNode(ctx, n)
	case "test":
		phases := fs.String("phases", strings.Join(phaseNames, ","), "the phases to run, comma-separated")
		if err := fs.Parse(args); err != nil {
			return err
		}
		var run []string
		for _, p := range strings.Split(*phases, ",") {
			if !slices.Contains(phaseNames, p) {
				return fmt.Errorf("--phases: unknown phase %q; the phases are %s", p, strings.Join(phaseNames, ", "))
			}
			run = append(run, p)
		}
		return t.test(ctx, run)
	case "bench":
		nodes := fs.String("nodes", "1,2", "the node counts to run, one after the other, comma-separated")
		if err := fs.Parse(args); err != nil {
			return err
		}
		var counts []int
		for _, f := range strings.Split(*nodes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > deploy.MaxNodes {
				return fmt.Errorf("--nodes: %q is not a node count; use 1 to %d, e.g. --nodes 1,2", f, deploy.MaxNodes)
			}
			counts = append(counts, n)
		}
		return t.bench(ctx, counts, fs.Args())
	case "-h", "--help", "help":
		fmt.Fprint(os.Stderr, usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// open finds the checkout and the pinned server binaries the Makefile
// builds.
func open() (*topo, error) {
	root, err := devserver.RepoRoot()
	if err != nil {
		return nil, fmt.Errorf("%w: run topology from the Courier checkout", err)
	}
	t := &topo{root: root, dir: filepath.Join(root, stateDir),
		server:  filepath.Join(root, "bin", "temporal-server", "server"),
		sqlTool: filepath.Join(root, "bin", "temporal-sql-tool", "sql")}
	return t, os.MkdirAll(t.dir, 0o755)
}

// needBinaries checks that the server binaries are built.
func (t *topo) needBinaries() error {
	for _, b := range []struct{ path, rule string }{{t.server, "temporal-server"}, {t.sqlTool, "temporal-sql-tool"}} {
		if _, err := os.Stat(b.path); err != nil {
			return fmt.Errorf("%s not found: build it with `make %s` (Temporal server %s)", b.path, b.rule, deploy.ServerVersion)
		}
	}
	return nil
}

// cleanEnv is this process's environment without Temporal client settings
// (an API key or TLS for another server would break the local one) and
// without the server config's variables, so each child gets only its own.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TEMPORAL_") || strings.HasPrefix(k, "SQL_") || serverVar[k] {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// serverVar are the variables deploy/temporal/courier.yaml reads.
var serverVar = func() map[string]bool {
	n, _ := deploy.TopologyNode(1)
	m := map[string]bool{}
	for _, kv := range n.Env() {
		k, _, _ := strings.Cut(kv, "=")
		m[k] = true
	}
	return m
}()
