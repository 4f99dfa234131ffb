package bench

import (
	"testing"

	"github.com/abde64c9/courier/workflows"
)

// KeyFingerprint is the cost of deriving a delivery's key and the
// fingerprint of its 1 KiB payload: what workflows.BenchmarkKeyAndFingerprint1KiB
// measures, here with testing.Benchmark so the command needs no toolchain.
type KeyFingerprint struct {
	PayloadBytes int     `json:"payload_bytes"`
	NsPerOp      float64 `json:"ns_per_op"`
	AllocsPerOp  int64   `json:"allocs_per_op"`
	BytesPerOp   int64   `json:"bytes_per_op"`
	Iterations   int     `json:"iterations"`
	Error        string  `json:"error,omitempty"`
}

func measureKeyFingerprint() KeyFingerprint {
	op := workflows.Operation{Tenant: "acme", Destination: "helpdesk", Operation: "create-ticket", BusinessID: "example-001"}
	var failed error
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = workflows.Key(op)
			if _, err := workflows.Fingerprint(ticketPayload); err != nil {
				failed = err
				b.FailNow()
			}
		}
	})
	kf := KeyFingerprint{
		PayloadBytes: len(ticketPayload),
		AllocsPerOp:  r.AllocsPerOp(), BytesPerOp: r.AllocedBytesPerOp(), Iterations: r.N,
	}
	switch {
	case failed != nil:
		kf.Error = failed.Error()
	case r.N == 0:
		kf.Error = "the benchmark did not run"
	default:
		kf.NsPerOp = float64(r.T.Nanoseconds()) / float64(r.N)
	}
	return kf
}
