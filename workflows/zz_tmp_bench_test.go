package workflows

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
)

func threadCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func TestTmpCPU(t *testing.T) {
	if os.Getenv("TMPCPU") == "" {
		t.Skip()
	}
	runtime.LockOSThread()
	payload, _ := os.ReadFile("/tmp/kb/payload.json")
	op := Operation{Tenant: "acme", Destination: "helpdesk", Operation: "create-ticket", BusinessID: "example-001"}
	const n = 200000
	measure := func(name string, f func()) {
		best := int64(1 << 62)
		for r := 0; r < 5; r++ {
			t0 := threadCPU()
			for i := 0; i < n; i++ {
				f()
			}
			if d := (threadCPU() - t0) / n; d < best {
				best = d
			}
		}
		fmt.Printf("%-10s %6d ns/op (thread CPU, best of 5)\n", name, best)
	}
	measure("key", func() { _ = Key(op) })
	measure("canon", func() { _, _ = CanonicalJSON(payload) })
	measure("fp", func() { _, _ = Fingerprint(payload) })
	measure("key+fp", func() { _ = Key(op); _, _ = Fingerprint(payload) })
	measure("jsonvalid", func() { _ = json.Valid(payload) })
}

func BenchmarkTmpCanon(b *testing.B) {
	payload, _ := os.ReadFile("/tmp/kb/payload.json")
	b.ReportAllocs()
	for b.Loop() {
		_, _ = CanonicalJSON(payload)
	}
}
