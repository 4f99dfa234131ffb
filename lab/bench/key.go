package bench

import (
	"slices"
	"testing"

	"github.com/abde64c9/courier/opkey"
)

// KeyFingerprint is the cost of deriving a delivery's key and the
// fingerprint of its 1 KiB payload: what opkey.BenchmarkKeyAndFingerprint1KiB
// measures, here with testing.Benchmark so the command needs no toolchain.
// NsPerOp is the median of several runs of about a second: on a shared
// machine one run can be a quarter slower than the next.
type KeyFingerprint struct {
	PayloadBytes int       `json:"payload_bytes"`
	NsPerOp      float64   `json:"ns_per_op"`
	RunsNsPerOp  []float64 `json:"runs_ns_per_op"`
	AllocsPerOp  int64     `json:"allocs_per_op"`
	BytesPerOp   int64     `json:"bytes_per_op"`
	Iterations   int       `json:"iterations"`
	Error        string    `json:"error,omitempty"`
}

func measureKeyFingerprint(runs int) KeyFingerprint {
	op := opkey.Operation{Tenant: "acme", Destination: "helpdesk", Operation: "create-ticket", BusinessID: "example-001"}
	kf := KeyFingerprint{PayloadBytes: len(ticketPayload)}
	for range runs {
		var failed error
		r := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = opkey.Key(op)
				if _, err := opkey.Fingerprint(ticketPayload); err != nil {
					failed = err
					b.FailNow()
				}
			}
		})
		switch {
		case failed != nil:
			kf.Error = failed.Error()
		case r.N == 0:
			kf.Error = "the benchmark did not run"
		}
		if kf.Error != "" {
			return kf
		}
		kf.RunsNsPerOp = append(kf.RunsNsPerOp, float64(r.T.Nanoseconds())/float64(r.N))
		kf.AllocsPerOp, kf.BytesPerOp = max(kf.AllocsPerOp, r.AllocsPerOp()), max(kf.BytesPerOp, r.AllocedBytesPerOp())
		kf.Iterations += r.N
	}
	sorted := slices.Sorted(slices.Values(kf.RunsNsPerOp))
	kf.NsPerOp = sorted[len(sorted)/2]
	return kf
}
