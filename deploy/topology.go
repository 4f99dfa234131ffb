package deploy

import (
	"fmt"
	"net"
	"strconv"
)

// ServerVersion is the Temporal server the native topology builds and
// runs, and whose image docker-compose.yml pins.
const ServerVersion = "v1.29.1"

// The server's configuration: ServerConfigDir (from the checkout's root)
// holds ServerConfigEnv + ".yaml", which the server reads with
// `--root <checkout> --config deploy/temporal --env courier` (the config
// folder is joined to the root). Compose mounts the same folder.
const (
	ServerConfigDir = "deploy/temporal"
	ServerConfigEnv = "courier"
	// DynamicConfig is the dynamic config file every node reads, from the
	// checkout's root (the server's working folder); compose mounts its
	// folder.
	DynamicConfig = "deploy/dynamicconfig/courier.yaml"
)

// ServerServices are the services every node runs: Temporal's defaults and
// the internal frontend, which Temporal's own worker service (batch jobs,
// system workflows) calls instead of the public frontend, so that its calls
// need no token while every caller of the public frontend needs one.
var ServerServices = []string{"frontend", "internal-frontend", "history", "matching", "worker"}

// ServerArgs are the server's arguments after its binary, with the config
// folder as the checkout (root) names it.
func ServerArgs(root string) []string {
	args := []string{"--root", root, "--config", ServerConfigDir, "--env", ServerConfigEnv, "start"}
	for _, s := range ServerServices {
		args = append(args, "--service", s)
	}
	return args
}

// The native topology's ports: all on 127.0.0.1, all in 23000-23499, all
// below 32768 (a membership port must fit PostgreSQL's SMALLINT).
const (
	PostgresPort = 23432
	SandboxPort  = 23480
	// IssuerPort serves the lab issuer's key set, which every node's
	// authorizer checks tokens against.
	IssuerPort = 23470
	// WorkerMetricsPort is the first worker's /metrics and /healthz; the
	// others follow.
	WorkerMetricsPort = 23481
	// APIPort serves the topology's `courier api`: the HTTP API, its
	// /readyz, /healthz and /metrics.
	APIPort = 23488
	// MaxNodes is how many server nodes the port plan has room for.
	MaxNodes = 2
)

// Node is one Temporal server process of the native topology, running all
// four services. Nodes differ only by their ports.
type Node struct {
	N int // 1-based
	// gRPC, membership and HTTP ports by service, and the Prometheus port.
	Frontend, FrontendHTTP, History, Matching, Worker   int
	FrontendRing, HistoryRing, MatchingRing, WorkerRing int
	// The internal frontend: Temporal's own worker service calls it.
	Internal, InternalHTTP, InternalRing int
	Metrics                              int
}

// TopologyNode is node n's ports: the block 23000 + 100n, laid out as
// Temporal's defaults are around 7233 (frontend +33, history +34, matching
// +35, internal frontend +36, worker +39, frontend HTTP +43, internal
// frontend HTTP +46, membership +63 to +69, metrics +90).
func TopologyNode(n int) (Node, error) {
	if n < 1 || n > MaxNodes {
		return Node{}, fmt.Errorf("node %d: the topology has nodes 1 to %d", n, MaxNodes)
	}
	b := 23000 + 100*n
	return Node{N: n,
		Frontend: b + 33, History: b + 34, Matching: b + 35, Worker: b + 39, FrontendHTTP: b + 43,
		FrontendRing: b + 63, HistoryRing: b + 64, MatchingRing: b + 65, WorkerRing: b + 69,
		Internal: b + 36, InternalHTTP: b + 46, InternalRing: b + 66,
		Metrics: b + 90,
	}, nil
}

// FrontendAddr is where clients and workers reach the node.
func (n Node) FrontendAddr() string { return loopback(n.Frontend) }

// HistoryAddr is the node's history service, the identity that owns shards.
func (n Node) HistoryAddr() string { return loopback(n.History) }

// MetricsURL is the node's Prometheus endpoint.
func (n Node) MetricsURL() string { return "http://" + loopback(n.Metrics) + "/metrics" }

// JWKSURL is where the nodes read the key set that signs callers' tokens.
func JWKSURL() string { return "http://" + loopback(IssuerPort) + JWKSPath }

// JWKSPath is the issuer's key set, on any address it serves.
const JWKSPath = "/.well-known/jwks.json"

// Env is the environment deploy/temporal/courier.yaml reads for this node,
// with its stores in the topology's PostgreSQL and its callers' keys from
// the topology's issuer.
func (n Node) Env() []string {
	kv := func(k string, v int) string { return k + "=" + strconv.Itoa(v) }
	return []string{
		"POSTGRES_SEEDS=127.0.0.1", kv("DB_PORT", PostgresPort), "POSTGRES_USER=temporal", "POSTGRES_PWD=temporal",
		"BIND_ON_IP=127.0.0.1", "TEMPORAL_BROADCAST_ADDRESS=127.0.0.1",
		kv("FRONTEND_GRPC_PORT", n.Frontend), kv("FRONTEND_HTTP_PORT", n.FrontendHTTP),
		kv("HISTORY_GRPC_PORT", n.History), kv("MATCHING_GRPC_PORT", n.Matching), kv("WORKER_GRPC_PORT", n.Worker),
		kv("FRONTEND_MEMBERSHIP_PORT", n.FrontendRing), kv("HISTORY_MEMBERSHIP_PORT", n.HistoryRing),
		kv("MATCHING_MEMBERSHIP_PORT", n.MatchingRing), kv("WORKER_MEMBERSHIP_PORT", n.WorkerRing),
		kv("INTERNAL_FRONTEND_GRPC_PORT", n.Internal), kv("INTERNAL_FRONTEND_HTTP_PORT", n.InternalHTTP),
		kv("INTERNAL_FRONTEND_MEMBERSHIP_PORT", n.InternalRing),
		kv("METRICS_PORT", n.Metrics),
		"TEMPORAL_JWT_KEY_SOURCE1=" + JWKSURL(),
		"DYNAMIC_CONFIG_FILE_PATH=" + DynamicConfig,
	}
}

// Ports are every port the node listens on.
func (n Node) Ports() []int {
	return []int{n.Frontend, n.FrontendHTTP, n.History, n.Matching, n.Worker,
		n.FrontendRing, n.HistoryRing, n.MatchingRing, n.WorkerRing, n.Metrics,
		n.Internal, n.InternalHTTP, n.InternalRing}
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
