package workflows

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func BenchmarkKeyAndFingerprint1KiB(b *testing.B) {
	payload, err := os.ReadFile("testdata/ticket_1k.json")
	require.NoError(b, err)
	op := Operation{Tenant: "acme", Destination: "helpdesk", Operation: "create-ticket", BusinessID: "example-001"}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		_ = Key(op)
		if _, err := Fingerprint(payload); err != nil {
			b.Fatal(err)
		}
	}
}
