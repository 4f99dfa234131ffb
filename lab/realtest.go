package lab

import (
	"context"
	"testing"
	"time"

	"github.com/abde64c9/courier/lab/devserver"
)

// RealTest prepares a test that runs real processes: it skips under -short,
// fails with the build hint when the Temporal CLI is missing, and returns a
// context bounded by timeout and the courier binary built for the test.
func RealTest(t testing.TB, timeout time.Duration) (context.Context, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Temporal server and real processes; run without -short")
	}
	if _, err := devserver.Binary(); err != nil {
		t.Fatalf("%v: %s", err, devserver.BuildHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	courier, err := BuildCourier(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ctx, courier
}
