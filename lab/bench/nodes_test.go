package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/lab"
)

// metricsServer serves these Prometheus lines over loopback, as a server
// node's endpoint does.
func metricsServer(t *testing.T, lines string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# TYPE persistence_requests counter\n"+lines)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// TestSeveralNodesAreSummed: on a server of several nodes, the work per
// workflow and the CPU time are the sums over every node's endpoint and
// process, not the first one's.
func TestSeveralNodesAreSummed(t *testing.T) {
	node1 := metricsServer(t, `persistence_requests{namespace="bench",operation="CreateWorkflowExecution",service_name="history"} 2
persistence_latency_sum{namespace="bench",operation="CreateWorkflowExecution",service_name="history"} 0.004
service_requests{namespace="bench",operation="StartWorkflowExecution",service_name="frontend"} 2
visibility_persistence_requests{operation="RecordWorkflowExecutionStarted"} 1
`)
	node2 := metricsServer(t, `persistence_requests{namespace="bench",operation="CreateWorkflowExecution",service_name="history"} 3
persistence_requests{namespace="bench",operation="UpdateWorkflowExecution",service_name="history"} 5
persistence_requests{namespace="other",operation="UpdateWorkflowExecution",service_name="history"} 7
persistence_latency_sum{namespace="bench",operation="UpdateWorkflowExecution",service_name="history"} 0.006
service_requests{namespace="bench",operation="StartWorkflowExecution",service_name="frontend"} 1
visibility_persistence_requests{operation="RecordWorkflowExecutionStarted"} 4
`)
	c, err := scrapeServers(context.Background(), []string{node1, node2}, "bench")
	require.NoError(t, err)
	require.Equal(t, map[string]float64{
		"history CreateWorkflowExecution":           5,
		"history UpdateWorkflowExecution":           5,
		"visibility RecordWorkflowExecutionStarted": 5,
	}, c.requests)
	require.Equal(t, map[string]float64{"StartWorkflowExecution": 3}, c.calls)
	require.InDelta(t, 0.010, c.seconds, 1e-12)

	// This process named twice stands for two: the sum is twice its own.
	self := os.Getpid()
	for burn := time.Now(); time.Since(burn) < 50*time.Millisecond; {
	}
	before, err := lab.ReadProc(self)
	require.NoError(t, err)
	require.Positive(t, before.CPU)
	sum := cpuTime([]int{self, self})
	after, err := lab.ReadProc(self)
	require.NoError(t, err)
	require.GreaterOrEqual(t, sum, 2*before.CPU)
	require.LessOrEqual(t, sum, 2*after.CPU)

	require.Equal(t, "its CPU time summed over 2 processes (PIDs 4100, 4200), its work per workflow summed over 2 endpoints ("+
		node1+", "+node2+")", serverSources(Setup{ServerPIDs: []int{4100, 4200}, ServerMetrics: []string{node1, node2}}))
	require.Equal(t, "its CPU time from PID 4100, its work per workflow from "+node1,
		serverSources(Setup{ServerPIDs: []int{4100}, ServerMetrics: []string{node1}}))
}

// TestSeveralNodesAreChecked: every PID and endpoint is checked before
// anything starts, and the bad one is named.
func TestSeveralNodesAreChecked(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:7233")
	ctx := context.Background()
	node := metricsServer(t, `persistence_requests{namespace="bench",operation="CreateWorkflowExecution",service_name="history"} 2`+"\n")
	node2 := metricsServer(t, `persistence_requests{namespace="bench",operation="CreateWorkflowExecution",service_name="history"} 1`+"\n")
	notTemporal := metricsServer(t, `go_goroutines{job="x"} 12`+"\n")
	free, err := lab.FreeAddr()
	require.NoError(t, err)
	self := os.Getpid()

	require.NoError(t, checkServer(ctx, Options{ServerPIDs: []int{self}, ServerMetrics: []string{node, node2}}))
	for _, bad := range []struct {
		o    Options
		want string
	}{
		{Options{ServerPIDs: []int{self, 1 << 30}}, "bench: server PID 1073741824: open /proc/1073741824/stat: no such file or directory; " +
			"give the PID of the Temporal server process on this machine"},
		{Options{ServerPIDs: []int{self, self}}, fmt.Sprintf("bench: server PID %d is named twice; name each server process once", self)},
		{Options{ServerPIDs: []int{self, 0}}, "bench: server PID 0 is not a process id"},
		{Options{ServerMetrics: []string{node, "http://" + free + "/metrics"}}, "bench: server metrics http://" + free + "/metrics: "},
		{Options{ServerMetrics: []string{node, node}}, "bench: server metrics " + node + " is named twice; name each node's endpoint once"},
		{Options{ServerMetrics: []string{node, notTemporal}}, "bench: " + notTemporal + " serves no persistence_requests metric"},
		{Options{ServerMetrics: []string{node, ""}}, `bench: server metrics "": not an http URL`},
	} {
		require.ErrorContains(t, checkServer(ctx, bad.o), bad.want)
	}
}
