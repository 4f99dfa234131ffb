package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/lab/bench"
)

// TestBenchTable: bare and courier-key of each run side by side, and
// courier-key's throughput and server CPU per delivery over bare's.
func TestBenchTable(t *testing.T) {
	run := func(bareOps, keyOps, bareCPU, keyCPU float64) bench.Report {
		r := bench.Report{Setup: bench.Setup{Concurrency: []int{16}}}
		for _, s := range []struct {
			side     string
			ops, cpu float64
		}{{bench.SideBare, bareOps, bareCPU}, {bench.SideKey, keyOps, keyCPU}, {bench.SideDirect, 900, 0}} {
			sum := bench.Summary{Side: s.side, Concurrency: 16, PerSecond: s.ops, P50ms: 385.4, P99ms: 1003.2}
			sum.CPUms.Server = s.cpu
			r.Throughput = append(r.Throughput, sum)
		}
		return r
	}
	var out bytes.Buffer
	printBenchTable(&out, []int{1, 2}, []bench.Report{run(36, 34.2, 25, 24), run(30, 27, 40, 42)})
	require.Equal(t, `
| concurrency | side | 1 node ops/s | p50 / p99 ms | server CPU ms/op | 2 nodes ops/s | p50 / p99 ms | server CPU ms/op |
| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |
| 16 | bare | 36.0 | 385 / 1,003 | 25.0 | 30.0 | 385 / 1,003 | 40.0 |
| 16 | courier-key | 34.2 | 385 / 1,003 | 24.0 | 27.0 | 385 / 1,003 | 42.0 |

courier-key / bare:

| concurrency | 1 node: throughput | CPU per delivery | 2 nodes: throughput | CPU per delivery |
| ---: | ---: | ---: | ---: | ---: |
| 16 | 0.95 | 0.96 | 0.90 | 1.05 |
`, out.String())
	require.Equal(t, "1,234,568", millis(1234567.6))
	require.Equal(t, "999", millis(999.4))
}
