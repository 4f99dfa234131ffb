package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/abde64c9/courier/activities/ledger/sqlstore"
	"github.com/abde64c9/courier/deploy"
	"github.com/abde64c9/courier/lab"
)

// Bounds of the waits (a shared 2-core machine may be slow).
const (
	serveWithin   = 2 * time.Minute  // a node's frontend, after its start
	setupWithin   = 2 * time.Minute  // the namespace and its search attributes
	sandboxWithin = 30 * time.Second // the sandbox's HTTP
	workerGrace   = 30 * time.Second // a worker finishing its attempts on SIGTERM
	serverGrace   = 30 * time.Second // a node shutting down on SIGTERM
	// restartWithin bounds restart-node: the soak allows its restart
	// command two minutes.
	restartWithin = 110 * time.Second
)

// workerCount is how many `courier worker` processes the topology runs.
const workerCount = 3

// budget is the topology's destinations' retry budget: long enough to ride
// out a node's death and its shards moving to another, with the seeds'
// max_attempts.
var budget = func() lab.Budget { b := lab.OutageBudget; b.MaxAttempts = 0; return b }()

// state is what `up` brought up, for down, restart-node and test.
type state struct {
	Nodes int `json:"nodes"`
	// Via is the node each worker's frontend is on.
	Via map[string]int `json:"via"`
}

func (t *topo) readState() (state, error) {
	var s state
	b, err := os.ReadFile(filepath.Join(t.dir, "state.json"))
	if err != nil {
		return s, fmt.Errorf("no topology is up here (%s has no state.json): make topology-up first", t.dir)
	}
	return s, json.Unmarshal(b, &s)
}

func (t *topo) writeState(s state) error {
	b, _ := json.Marshal(s)
	return os.WriteFile(filepath.Join(t.dir, "state.json"), b, 0o644)
}

func nodeName(n int) string   { return "node" + strconv.Itoa(n) }
func workerName(i int) string { return "worker" + strconv.Itoa(i) }

// up brings the topology up with this many nodes, keeping what already
// runs. fresh drops Temporal's databases first (a run from nothing).
func (t *topo) up(ctx context.Context, nodes int, fresh bool) error {
	began := time.Now()
	if err := t.needBinaries(); err != nil {
		return err
	}
	for n := nodes + 1; n <= deploy.MaxNodes; n++ {
		if t.pid(nodeName(n)) != 0 {
			return fmt.Errorf("node %d runs: the topology is up with more nodes than %d; make topology-down first", n, nodes)
		}
	}
	say("PostgreSQL via .ci/postgres.sh on 127.0.0.1:%d", deploy.PostgresPort)
	pg, err := t.postgres(ctx, fresh)
	if err != nil {
		return err
	}
	say("Temporal's schemas (temporal-sql-tool)")
	if err := t.schemas(ctx); err != nil {
		return err
	}
	// The nodes read the issuer's keys when they start: it comes first.
	say("courier and courier-lab binaries; the issuer (JWKS %s, a token per role in %s)", deploy.JWKSURL(), t.issuerDir())
	courier, courierLab, err := lab.BuildPrograms(t.dir)
	if err != nil {
		return err
	}
	if err := t.ensureIssuer(ctx, courierLab); err != nil {
		return err
	}
	admin, err := lab.ReadToken(t.issuerDir(), "admin")
	if err != nil {
		return err
	}
	worker, err := lab.ReadToken(t.issuerDir(), "worker")
	if err != nil {
		return err
	}
	prev, _ := t.readState() // none on a first up
	st := state{Nodes: nodes, Via: map[string]int{}}
	if err := t.writeState(st); err != nil {
		return err
	}
	var ns []deploy.Node
	for i := 1; i <= nodes; i++ {
		n, _ := deploy.TopologyNode(i)
		ns = append(ns, n)
		if err := t.ensureNode(ctx, n); err != nil {
			return err
		}
	}
	say("namespace default with Courier's search attributes")
	tmp, err := connectLab(ctx, ns[0], "default", admin)
	if err != nil {
		return err
	}
	defer tmp.Close()
	// Services run in a namespace of their own and reach Courier through
	// its Nexus endpoint: only the workers and operators hold write on
	// Courier's namespace, the role that polls its task queues.
	say("namespace %s for services; Nexus endpoint %s to Courier's workers", lab.CallerNamespace, lab.NexusEndpoint(lab.NexusTenant))
	if err := lab.EnsureCallerNamespace(ctx, tmp.Client(), lab.CallerNamespace); err != nil {
		return err
	}
	if _, err := lab.EnsureNexusEndpoint(ctx, tmp.Client(), "default", lab.NexusTenant); err != nil {
		return err
	}
	say("sandbox, %d workers (the worker token)", workerCount)
	sandboxURL, err := t.ensureSandbox(ctx, courierLab)
	if err != nil {
		return err
	}
	// The setup step creates the ledger's table, as it does Temporal's
	// schemas: the workers' role need not create anything.
	if err := sqlstore.Init(ctx, pg.ledger); err != nil {
		return fmt.Errorf("outcome ledger: %w", err)
	}
	t.ledger = pg.ledger
	dests := filepath.Join(t.dir, lab.DestinationsFile)
	if err := lab.WriteDestinations(dests, lab.Destinations(sandboxURL, filepath.Join(t.dir, lab.LedgerDB), budget)); err != nil {
		return err
	}
	for i := 1; i <= workerCount; i++ {
		n := ns[(i-1)%len(ns)]
		if err := t.ensureWorker(ctx, i, n, prev.Via[workerName(i)] == n.N, courier, dests, pg.ledger, tmp, worker); err != nil {
			return err
		}
		st.Via[workerName(i)] = n.N
		if err := t.writeState(st); err != nil {
			return err
		}
	}
	say("courier api on 127.0.0.1:%d via node 1 (the %s token; tenant %s's token in %s)", deploy.APIPort, deploy.APIRole, lab.NexusTenant, filepath.Join(t.dir, apiTokenFile))
	if err := t.ensureAPI(ctx, courier, dests, ns[0]); err != nil {
		return err
	}
	t.print(ns, pg, sandboxURL, time.Since(began))
	return nil
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "topology: "+format+"\n", args...) }

// ensureNode starts node n unless it runs, and waits until its frontend
// serves.
func (t *topo) ensureNode(ctx context.Context, n deploy.Node) error {
	if pid := t.pid(nodeName(n.N)); pid != 0 {
		say("node %d runs (pid %d)", n.N, pid)
		return awaitFrontend(ctx, n, pid, t)
	}
	say("node %d: Temporal server, frontend %s", n.N, n.FrontendAddr())
	_, err := t.startNode(ctx, n)
	return err
}

// startNode starts node n's server process and waits until its frontend
// serves.
func (t *topo) startNode(ctx context.Context, n deploy.Node) (int, error) {
	for _, p := range n.Ports() {
		if err := awaitFreePort(p); err != nil {
			return 0, fmt.Errorf("node %d: port %d is taken by another process (the topology uses 23000-23499 on 127.0.0.1): %w", n.N, p, err)
		}
	}
	// The config folder is joined to --root; --env names the file in it.
	argv := append([]string{t.server}, deploy.ServerArgs(t.root)...)
	pid, err := t.spawn(nodeName(n.N), argv, append(cleanEnv(), n.Env()...))
	if err != nil {
		return 0, err
	}
	return pid, awaitFrontend(ctx, n, pid, t)
}

// awaitFreePort waits briefly for a port to be free: a node just killed
// holds its sockets until its last thread has exited.
func awaitFreePort(port int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			return ln.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// awaitFrontend waits until node n's frontend answers a health check.
func awaitFrontend(ctx context.Context, n deploy.Node, pid int, t *topo) error {
	ctx, cancel := context.WithTimeout(ctx, serveWithin)
	defer cancel()
	for {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := client.DialContext(dctx, client.Options{HostPort: n.FrontendAddr(), Logger: quiet()})
		dcancel()
		if err == nil {
			_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
			c.Close()
			if err == nil {
				return nil
			}
		}
		if !alive(pid) {
			return fmt.Errorf("node %d (pid %d) exited before its frontend served; %s:\n%s", n.N, pid, t.procFile(nodeName(n.N), "log"), t.logTail(nodeName(n.N)))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d: frontend %s did not serve within %s (%v); see %s", n.N, n.FrontendAddr(), serveWithin, err, t.procFile(nodeName(n.N), "log"))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func quiet() sdklog.Logger { return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

// connectLab is the lab's client of namespace ns through node n's
// frontend with token (creating a namespace takes the admin's), the
// namespace created with Courier's search attributes. A node that just
// started may still refuse namespace calls: retried, bounded.
func connectLab(ctx context.Context, n deploy.Node, ns, token string) (*lab.Temporal, error) {
	ctx, cancel := context.WithTimeout(ctx, setupWithin)
	defer cancel()
	for {
		tmp, err := lab.StartTemporal(ctx, lab.TemporalOptions{Address: n.FrontendAddr(), Namespace: ns, APIKey: token})
		if err == nil {
			return tmp, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("namespace %s at node %d: %w", ns, n.N, err)
		case <-time.After(time.Second):
		}
	}
}

// issuerDir holds the issuer's signing key and a token per role.
func (t *topo) issuerDir() string { return filepath.Join(t.dir, "issuer") }

// ensureIssuer starts `courier-lab issuer` unless it runs, and waits until
// it serves its key set (it has written the tokens by then).
func (t *topo) ensureIssuer(ctx context.Context, courierLab string) error {
	addr := fmt.Sprintf("127.0.0.1:%d", deploy.IssuerPort)
	if pid := t.pid("issuer"); pid == 0 {
		if _, err := t.spawn("issuer", []string{courierLab, "issuer", "--addr", addr, "--dir", t.issuerDir()}, cleanEnv()); err != nil {
			return err
		}
	}
	return t.awaitHTTP(ctx, "issuer", deploy.JWKSURL())
}

// awaitHTTP waits until NAME answers 200 at url.
func (t *topo) awaitHTTP(ctx context.Context, name, url string) error {
	ctx, cancel := context.WithTimeout(ctx, sandboxWithin)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	for {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s at %s did not answer within %s; see %s:\n%s", name, url, sandboxWithin, t.procFile(name, "log"), t.logTail(name))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ensureSandbox starts `courier-lab sandbox` unless it runs, and waits until
// it answers.
func (t *topo) ensureSandbox(ctx context.Context, courierLab string) (string, error) {
	addr := fmt.Sprintf("127.0.0.1:%d", deploy.SandboxPort)
	url := "http://" + addr
	if pid := t.pid("sandbox"); pid == 0 {
		if _, err := t.spawn("sandbox", []string{courierLab, "sandbox", "--addr", addr, "--db", filepath.Join(t.dir, lab.SandboxDB)}, cleanEnv()); err != nil {
			return "", err
		}
	}
	return url, t.awaitHTTP(ctx, "sandbox", url+"/admin/requests?destination=helpdesk")
}

// ensureWorker starts worker i on node n's frontend with the worker's
// token unless it runs there already (same: it was on n before); one on
// another node is stopped first.
func (t *topo) ensureWorker(ctx context.Context, i int, n deploy.Node, same bool, courier, dests, ledger string, tmp *lab.Temporal, token string) error {
	name := workerName(i)
	if t.pid(name) != 0 {
		if same {
			return nil
		}
		did, err := t.stop(name, workerGrace)
		if err != nil {
			return err
		}
		say("%s, to move it to node %d", did, n.N)
	}
	logf, err := t.openLog(name)
	if err != nil {
		return err
	}
	defer logf.Close()
	w, err := lab.StartWorker(ctx, lab.WorkerOptions{
		Courier: courier, Destinations: dests, Temporal: tmp,
		Env:         append([]string{"TEMPORAL_ADDRESS=" + n.FrontendAddr(), "TEMPORAL_NAMESPACE=default"}, lab.ClientEnv(token)...),
		Args:        []string{"--nexus-tenant", lab.NexusTenant},
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", deploy.WorkerMetricsPort+i-1),
		Log:         logf, Detach: true,
		// Every worker, on every node, shares one PostgreSQL ledger.
		Ledger: ledger,
	})
	if err != nil {
		return fmt.Errorf("%s: %w; see %s", name, err, t.procFile(name, "log"))
	}
	return t.writePID(name, w.PID(), courier)
}

// print says where everything listens.
func (t *topo) print(ns []deploy.Node, pg postgres, sandboxURL string, took time.Duration) {
	rel := func(p string) string {
		if r, err := filepath.Rel(t.root, p); err == nil {
			return r
		}
		return p
	}
	w := os.Stdout
	fmt.Fprintf(w, "Courier's topology is up (%d node(s), %s); state and logs in %s/\n", len(ns), took.Round(100*time.Millisecond), rel(t.dir))
	fmt.Fprintf(w, "  postgresql  127.0.0.1:%d  databases temporal, temporal_visibility (max_connections %d); courier (the outcome ledger)\n", deploy.PostgresPort, pg.maxConns)
	for _, n := range ns {
		fmt.Fprintf(w, "  node %d      frontend %s  http 127.0.0.1:%d  metrics %s  pid %d\n",
			n.N, n.FrontendAddr(), n.FrontendHTTP, n.MetricsURL(), t.pid(nodeName(n.N)))
	}
	fmt.Fprintf(w, "  issuer      %s  pid %d; a token per role in %s/ (ROLE.token)\n", deploy.JWKSURL(), t.pid("issuer"), rel(t.issuerDir()))
	fmt.Fprintf(w, "  sandbox     %s  pid %d\n", sandboxURL, t.pid("sandbox"))
	for i := 1; i <= workerCount; i++ {
		fmt.Fprintf(w, "  worker %d    via node %d  http://127.0.0.1:%d/healthz  pid %d\n",
			i, ns[(i-1)%len(ns)].N, deploy.WorkerMetricsPort+i-1, t.pid(workerName(i)))
	}
	fmt.Fprintf(w, "  api         %s  via node 1  (the %s token)  /readyz /metrics  pid %d; tenant %s's bearer token in %s\n",
		apiURL(), deploy.APIRole, t.pid("api"), lab.NexusTenant, rel(filepath.Join(t.dir, apiTokenFile)))
	fmt.Fprintf(w, "Try, as an operator (the server refuses a call without a token; a service's token may only read Courier's namespace):\n  TEMPORAL_ADDRESS=%s TEMPORAL_API_KEY=$(cat %s) TEMPORAL_TLS=false go run ./cmd/courier deliver --destination helpdesk --operation create-ticket --id demo-1 --payload '{\"subject\": \"hi\"}'\n", ns[0].FrontendAddr(), rel(lab.TokenFile(t.issuerDir(), "operator")))
	fmt.Fprintf(w, "Or, as tenant %s's service, over HTTP:\n  curl -i -X POST %s/v1/destinations/helpdesk/operations/create-ticket -H \"Authorization: Bearer $(cat %s)\" -H 'Idempotency-Key: demo-2' -d '{\"subject\": \"hi\"}'\n",
		lab.NexusTenant, apiURL(), rel(filepath.Join(t.dir, apiTokenFile)))
	fmt.Fprintf(w, "Stop it all: make topology-down\n")
}

// down stops every process by its PID (the API, workers, sandbox, then the
// nodes), then the topology's PostgreSQL cluster, keeping its data.
func (t *topo) down() error {
	names := []string{"api"}
	for i := 1; i <= workerCount; i++ {
		names = append(names, workerName(i))
	}
	names = append(names, "sandbox")
	for n := deploy.MaxNodes; n >= 1; n-- {
		names = append(names, nodeName(n))
	}
	names = append(names, "issuer")
	var errs []string
	for _, name := range names {
		grace := serverGrace
		if strings.HasPrefix(name, "worker") || name == "api" {
			grace = workerGrace
		}
		did, err := t.stop(name, grace)
		if err != nil {
			errs = append(errs, err.Error())
		} else if did != "" {
			say("%s", did)
		}
	}
	if err := stopPostgres(); err != nil {
		errs = append(errs, err.Error())
	}
	_ = os.Remove(filepath.Join(t.dir, "state.json"))
	if len(errs) > 0 {
		return fmt.Errorf("down: %s", strings.Join(errs, "; "))
	}
	return nil
}

// restartNode SIGKILLs node n and starts it again, then waits until its
// frontend serves and until the shards it owned are owned again (by the
// other node or by itself, whichever is first), and records that time.
func (t *topo) restartNode(ctx context.Context, n int) error {
	// Within the soak's bound on its restart command.
	ctx, cancel := context.WithTimeout(ctx, restartWithin)
	defer cancel()
	s, err := t.readState()
	if err != nil {
		return err
	}
	if n < 1 || n > s.Nodes {
		return fmt.Errorf("node %d: the topology runs nodes 1 to %d", n, s.Nodes)
	}
	if err := t.needBinaries(); err != nil {
		return err
	}
	node, _ := deploy.TopologyNode(n)
	k, err := t.killNode(ctx, node)
	if err != nil {
		return err
	}
	pid, err := t.startNode(ctx, node)
	if err != nil {
		return err
	}
	served := time.Since(k.at)
	took, err := k.awaitTakeover(ctx)
	if err != nil {
		return err
	}
	say("node %d: SIGKILLed pid %d; serving again as pid %d after %s; its %d shard(s) owned again after %s",
		n, k.pid, pid, served.Round(10*time.Millisecond), len(k.owned), took.Round(10*time.Millisecond))
	return t.recordTakeover(n, k, took)
}

// anyRunning names the topology's processes that run.
func (t *topo) anyRunning() []string {
	var up []string
	names := []string{"api", "sandbox", "issuer"}
	for i := 1; i <= workerCount; i++ {
		names = append(names, workerName(i))
	}
	for n := 1; n <= deploy.MaxNodes; n++ {
		names = append(names, nodeName(n))
	}
	for _, name := range names {
		if pid := t.pid(name); pid != 0 {
			up = append(up, fmt.Sprintf("%s (pid %d)", name, pid))
		}
	}
	return up
}

// goModDir is a module's folder in the module cache, downloading it if
// needed.
func goModDir(ctx context.Context, root, mod string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Dir = root
	cmd.Stderr = io.Discard
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); jerr != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %v %s", mod, err, m.Error)
	}
	return m.Dir, nil
}
