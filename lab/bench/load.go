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
	conc int
	// samples are the operations started inside the measured window.
	samples []sample
	// ran counts every operation run, lead and tail included, for the CPU
	// per operation.
	ran      int
	errors   int
	firstErr error
	cpu      cpuSplit
}

// sample is one measured operation.
type sample struct {
	seq     int64
	latency time.Duration
}

// cpuSplit is the CPU the run cost each process.
type cpuSplit struct{ server, worker, bench time.Duration }

func (c cpuSplit) add(o cpuSplit) cpuSplit {
	return cpuSplit{c.server + o.server, c.worker + o.worker, c.bench + o.bench}
}

// closedLoop keeps conc operations in flight: for an unmeasured lead, then
// for the measured window, then until the last operation started in the
// window has answered, so every measured operation ran under the full
// concurrency. It then waits for the rest, so the next side starts on a
// quiet server.
//
// Throughput follows from Little's law: with conc in flight all along,
// conc / mean latency is the rate at which answers come. Counting answers
// inside the window instead swings by a third between rounds at 64 in
// flight, because starts made together come back together, in waves.
// The lead keeps out the burst of a rested server, which answers its first
// half second or so about twice as fast as a busy one and would favour
// whichever side a round starts with.
func closedLoop(ctx context.Context, conc int, lead, window time.Duration, seq *atomic.Int64, do op) loadResult {
	var (
		mu      sync.Mutex
		res     = loadResult{conc: conc}
		wg      sync.WaitGroup
		pending atomic.Int64 // measured operations not answered yet
	)
	from := time.Now().Add(lead)
	end := from.Add(window)
	for range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				measured := !t0.Before(from) && t0.Before(end)
				if !t0.Before(end) && pending.Load() == 0 {
					return
				}
				if measured {
					pending.Add(1)
				}
				octx, cancel := context.WithTimeout(ctx, opTimeout)
				n := seq.Add(1)
				err := do(octx, n)
				cancel()
				t1 := time.Now()
				mu.Lock()
				res.ran++
				if err != nil {
					res.errors++
					if res.firstErr == nil {
						res.firstErr = err
					}
				} else if measured {
					res.samples = append(res.samples, sample{n, t1.Sub(t0)})
				}
				mu.Unlock()
				if measured {
					pending.Add(-1)
				}
			}
		})
	}
	wg.Wait()
	return res
}

// perSecond is conc / mean latency.
func (r loadResult) perSecond() float64 {
	var sum time.Duration
	for _, smp := range r.samples {
		sum += smp.latency
	}
	if sum <= 0 {
		return 0
	}
	return float64(r.conc) * float64(len(r.samples)) / sum.Seconds()
}

// Summary is the throughput and latency of one side at one concurrency,
// over all its rounds.
type Summary struct {
	Side        string `json:"side"`
	Concurrency int    `json:"concurrency"`
	// Ops is the operations started in the measured windows: the latency
	// samples. PerSecond is the concurrency over their mean latency.
	Ops        int     `json:"ops"`
	PerSecond  float64 `json:"per_second"`
	P50ms      float64 `json:"p50_ms"`
	P95ms      float64 `json:"p95_ms"`
	P99ms      float64 `json:"p99_ms"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	// CPU milliseconds per operation, by process (server is all the
	// server's processes together; 0 when no server PID is known).
	CPUms struct {
		Server float64 `json:"server"`
		Worker float64 `json:"worker"`
		Bench  float64 `json:"bench"`
	} `json:"cpu_ms_per_op"`
	// Timings split the mean latency of a sample of the measured
	// workflows by their event times; nil for the direct side.
	Timings *Timings `json:"timings_ms,omitempty"`
}

func summarize(side string, conc int, runs []loadResult) Summary {
	s := Summary{Side: side, Concurrency: conc}
	var (
		ran int
		all []sample
		cpu cpuSplit
	)
	for _, r := range runs {
		ran += r.ran
		all = append(all, r.samples...)
		s.Errors += r.errors
		if s.FirstError == "" && r.firstErr != nil {
			s.FirstError = r.firstErr.Error()
		}
		cpu = cpu.add(r.cpu)
	}
	s.Ops = len(all)
	s.PerSecond = loadResult{conc: conc, samples: all}.perSecond()
	lat := make([]time.Duration, len(all))
	for i, smp := range all {
		lat[i] = smp.latency
	}
	slices.Sort(lat)
	s.P50ms, s.P95ms, s.P99ms = ms(quantile(lat, 0.50)), ms(quantile(lat, 0.95)), ms(quantile(lat, 0.99))
	if ran > 0 {
		per := func(d time.Duration) float64 { return ms(d) / float64(ran) }
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
