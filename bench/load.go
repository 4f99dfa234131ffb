package bench

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// opTimeout bounds one operation of any side.
const opTimeout = 2 * time.Minute

// op is one operation of a side: a workflow, a delivery, a POST. seq is
// unique within the run.
type op func(ctx context.Context, seq int64) error

// loadResult is one closed-loop run of one side at one concurrency.
type loadResult struct {
	elapsed   time.Duration // from the first start to the last answer
	latencies []time.Duration
	errors    int
	firstErr  error
	cpu       cpuSplit
}

// cpuSplit is the CPU the run cost each process.
type cpuSplit struct{ server, worker, bench time.Duration }

func (c cpuSplit) add(o cpuSplit) cpuSplit {
	return cpuSplit{c.server + o.server, c.worker + o.worker, c.bench + o.bench}
}

// closedLoop keeps conc operations in flight for window (or, with count > 0,
// runs count operations), then waits for the last to finish, so the next
// side starts on a quiet server. Throughput is every answer over the time
// to the last one: with latencies near the window (64 in flight on a slow
// server), counting only answers inside the window would measure the
// ramp-up, not the rate.
func closedLoop(ctx context.Context, conc int, window time.Duration, count int, seq *atomic.Int64, do op) loadResult {
	var (
		mu  sync.Mutex
		res loadResult
		wg  sync.WaitGroup
		n   atomic.Int64
	)
	start := time.Now()
	end := start.Add(window)
	for range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				if count > 0 {
					if n.Add(1) > int64(count) {
						return
					}
				} else if !time.Now().Before(end) {
					return
				}
				t0 := time.Now()
				octx, cancel := context.WithTimeout(ctx, opTimeout)
				err := do(octx, seq.Add(1))
				cancel()
				t1 := time.Now()
				mu.Lock()
				if err != nil {
					res.errors++
					if res.firstErr == nil {
						res.firstErr = err
					}
				} else {
					res.latencies = append(res.latencies, t1.Sub(t0))
				}
				res.elapsed = max(res.elapsed, t1.Sub(start))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return res
}

func (r loadResult) perSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(len(r.latencies)) / r.elapsed.Seconds()
}

// Summary is the throughput and latency of one side at one concurrency,
// over all its rounds.
type Summary struct {
	Side        string  `json:"side"`
	Concurrency int     `json:"concurrency"`
	Ops         int     `json:"ops"`
	PerSecond   float64 `json:"per_second"`
	P50ms       float64 `json:"p50_ms"`
	P95ms       float64 `json:"p95_ms"`
	P99ms       float64 `json:"p99_ms"`
	Errors      int     `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	// CPU milliseconds per operation, by process (server is 0 when the
	// server is not the benchmark's own).
	CPUms struct {
		Server float64 `json:"server"`
		Worker float64 `json:"worker"`
		Bench  float64 `json:"bench"`
	} `json:"cpu_ms_per_op"`
}

func summarize(side string, conc int, runs []loadResult) Summary {
	s := Summary{Side: side, Concurrency: conc}
	var elapsed time.Duration
	var lat []time.Duration
	var cpu cpuSplit
	for _, r := range runs {
		elapsed += r.elapsed
		lat = append(lat, r.latencies...)
		s.Errors += r.errors
		if s.FirstError == "" && r.firstErr != nil {
			s.FirstError = r.firstErr.Error()
		}
		cpu = cpu.add(r.cpu)
	}
	s.Ops = len(lat)
	if elapsed > 0 {
		s.PerSecond = float64(s.Ops) / elapsed.Seconds()
	}
	slices.Sort(lat)
	s.P50ms, s.P95ms, s.P99ms = ms(quantile(lat, 0.50)), ms(quantile(lat, 0.95)), ms(quantile(lat, 0.99))
	if n := s.Ops + s.Errors; n > 0 {
		per := func(d time.Duration) float64 { return ms(d) / float64(n) }
		s.CPUms.Server, s.CPUms.Worker, s.CPUms.Bench = per(cpu.server), per(cpu.worker), per(cpu.bench)
	}
	return s
}

// quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// parallel runs do for 0..n-1 with at most conc in flight.
func parallel(ctx context.Context, n, conc int, do func(ctx context.Context, i int)) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range min(conc, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				do(ctx, i)
			}
		})
	}
	wg.Wait()
}
