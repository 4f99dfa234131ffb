package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ServerWork is what the server's persistence did for one workflow of a
// side, read from the server's Prometheus metrics around a batch run one at
// a time: the figure that shows what Courier asks of Temporal's database
// beyond the bare workflow, free of the machine's noise.
type ServerWork struct {
	Side    string `json:"side"`
	Samples int    `json:"samples"`
	// Requests per workflow by "service operation" (visibility as service
	// "visibility"), and their total.
	Requests      map[string]float64 `json:"requests"`
	TotalRequests float64            `json:"total_requests"`
	// DBMs is the time those requests took per workflow, in milliseconds.
	DBMs float64 `json:"db_ms"`
	// Calls per workflow the frontend answered (the callers' and the
	// workers' round trips), by operation.
	Calls      map[string]float64 `json:"calls"`
	TotalCalls float64            `json:"total_calls"`
	// Actions per workflow the server counted as billable (its `action`
	// metric), by the server's action type, and their total.
	Actions      map[string]float64 `json:"actions,omitempty"`
	TotalActions float64            `json:"total_actions"`
}

// serverCounters are the server's cumulative counters for the workflows'
// namespace: database requests and their time, and frontend calls.
type serverCounters struct {
	requests, calls, actions map[string]float64
	seconds                  float64
	// persistence is whether the endpoint serves persistence requests at
	// all (in any namespace).
	persistence bool
}

// persistenceRequests is the counter that shows an endpoint is a Temporal
// server's.
const persistenceRequests = "persistence_requests"

// scrapeServer reads the counters of namespace ns from the server's
// Prometheus text endpoint. Shard-level work (task queue reads) is counted
// under the system namespace and paced by the clock, not by workflows, so
// it is left out. Visibility counters carry no namespace: they are all
// taken, which on a server the benchmark has to itself are the workflows'.
func scrapeServer(ctx context.Context, url, ns string) (serverCounters, error) {
	c := newServerCounters()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return c, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, fmt.Errorf("read the server's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("read the server's metrics: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if name, labels, value, ok := parseSample(sc.Text()); ok {
			c.add(name, labels, value, ns)
		}
	}
	return c, sc.Err()
}

// scrapeServers reads the counters of namespace ns from each of a
// server's endpoints (one per node) and sums them: a node counts the work
// it did, whichever node a workflow's shard or caller is on.
func scrapeServers(ctx context.Context, urls []string, ns string) (serverCounters, error) {
	sum := newServerCounters()
	for _, u := range urls {
		c, err := scrapeServer(ctx, u, ns)
		if err != nil {
			return sum, fmt.Errorf("%s: %w", u, err)
		}
		sum.addCounters(c)
	}
	return sum, nil
}

// addCounters adds another endpoint's counters to c.
func (c *serverCounters) addCounters(o serverCounters) {
	for _, m := range []struct{ to, from map[string]float64 }{{c.requests, o.requests}, {c.calls, o.calls}, {c.actions, o.actions}} {
		for k, v := range m.from {
			m.to[k] += v
		}
	}
	c.seconds += o.seconds
	c.persistence = c.persistence || o.persistence
}

func newServerCounters() serverCounters {
	return serverCounters{requests: map[string]float64{}, calls: map[string]float64{}, actions: map[string]float64{}}
}

// add counts one sample, in either framework's form, if it is namespace
// ns's work.
func (c *serverCounters) add(name string, labels map[string]string, value float64, ns string) {
	name, value = tallyName(name, value)
	c.persistence = c.persistence || name == persistenceRequests
	switch {
	case name == "visibility_persistence_requests":
		c.requests["visibility "+labels["operation"]] += value
	case name == "visibility_persistence_latency_sum":
		c.seconds += value
	case labels["namespace"] != ns && labels["namespace"] != tallyValue(ns):
	case name == persistenceRequests:
		c.requests[labels["service_name"]+" "+labels["operation"]] += value
	case name == "persistence_latency_sum":
		c.seconds += value
	case name == "service_requests" && labels["service_name"] == "frontend":
		c.calls[labels["operation"]] += value
	case name == "action":
		c.actions[labels["action_type"]] += value
	}
}

// tallyName is a sample's name and value as the server's default metrics
// framework (tally, the dev server's too) writes them. Its OpenTelemetry
// framework, unless told to write them the tally way, adds _total to
// counters and a unit to timers, milliseconds unless it records seconds.
func tallyName(name string, value float64) (string, float64) {
	if n, ok := strings.CutSuffix(name, "_total"); ok {
		return n, value
	}
	if n, ok := strings.CutSuffix(name, "_milliseconds_sum"); ok {
		return n + "_sum", value / 1000
	}
	if n, ok := strings.CutSuffix(name, "_seconds_sum"); ok {
		return n + "_sum", value
	}
	return name, value
}

// tallyValue is label value v as the tally framework writes it: every
// character but ASCII letters, digits and _ becomes _, so namespace
// courier-bench is labelled courier_bench.
func tallyValue(v string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return r
		}
		return '_'
	}, v)
}

// perWorkflow is the work between two scrapes, divided among n workflows.
func (c serverCounters) perWorkflow(before serverCounters, side string, n int) ServerWork {
	w := ServerWork{Side: side, Samples: n}
	w.Requests, w.TotalRequests = perWorkflow(c.requests, before.requests, n)
	w.Calls, w.TotalCalls = perWorkflow(c.calls, before.calls, n)
	w.Actions, w.TotalActions = perWorkflow(c.actions, before.actions, n)
	w.DBMs = (c.seconds - before.seconds) * 1000 / float64(n)
	return w
}

func perWorkflow(after, before map[string]float64, n int) (map[string]float64, float64) {
	per, total := map[string]float64{}, 0.0
	for k, v := range after {
		if d := (v - before[k]) / float64(n); d > 0 {
			per[k] = d
			total += d
		}
	}
	return per, total
}

// parseSample parses one sample line of the Prometheus text format:
// name{label="value",...} value. Comments and malformed lines give !ok.
func parseSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	if line == "" || line[0] == '#' {
		return "", nil, 0, false
	}
	open := strings.IndexByte(line, '{')
	closing := strings.LastIndexByte(line, '}')
	if open < 0 || closing < open {
		return "", nil, 0, false
	}
	name = line[:open]
	fields := strings.Fields(line[closing+1:])
	if len(fields) == 0 {
		return "", nil, 0, false
	}
	value, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", nil, 0, false
	}
	labels = map[string]string{}
	rest := line[open+1 : closing]
	for rest != "" {
		eq := strings.Index(rest, `="`)
		if eq < 0 {
			return "", nil, 0, false
		}
		key := strings.TrimLeft(rest[:eq], ", ")
		rest = rest[eq+2:]
		var val strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
			}
			val.WriteByte(rest[i])
		}
		if i == len(rest) {
			return "", nil, 0, false
		}
		labels[key] = val.String()
		rest = rest[i+1:]
	}
	return name, labels, value, true
}
