package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/workflows"
)

// TestLedgerCommands: `courier ledger show` prints the row the workers
// wrote, its receipt decoded; `backfill` fills an empty ledger from the
// closed deliveries the namespace holds, the delivered ones with their
// receipts and the one that may have applied as not known, and leaves a
// row it already holds alone; an unknown key exits 7, a missing ledger is
// a usage error.
func TestLedgerCommands(t *testing.T) {
	b := startLab(t, 5*time.Minute, func(*destinations.Config) {})
	ctx, st := b.ctx, b.st
	created, parked, err := lab.CreatedAndParked(ctx, st.Starter, st.Sandbox.Server, [2]string{"ledger-created", "ledger-parked"})
	require.NoError(t, err)
	_, err = st.Starter.Review(ctx, parked.Key, workflows.ReviewDecision{Decision: workflows.DecisionAbandon, Reviewer: "ops", Note: "not found"})
	require.NoError(t, err)
	res, err := st.Starter.Result(ctx, parked.Key, "")
	if nd, ok := workflows.UndeliveredResult(err); ok {
		res, err = nd, nil
	}
	require.NoError(t, err)
	require.Equal(t, workflows.StatusAbandoned, res.Status)

	show := func(env []string, key string) (ledgerRow, result) {
		r := b.runWith(env, "ledger", "show", key)
		var row ledgerRow
		if r.code == cli.CodeOK {
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &row), r.stdout)
		}
		return row, r
	}
	workers := []string{"COURIER_LEDGER=" + st.Ledger}
	row, r := show(workers, created.Key)
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	require.Equal(t, "created", row.Status)
	var receipt activities.Receipt
	require.NoError(t, json.Unmarshal(row.Receipt, &receipt))
	require.Equal(t, created.Receipt.ResourceID, receipt.ResourceID)
	row, r = show(workers, parked.Key)
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	require.Equal(t, "abandoned", row.Status, "the review's decision, recorded before the delivery ended")

	fresh := []string{"COURIER_LEDGER=sqlite:" + filepath.Join(t.TempDir(), "backfilled.db")}
	_, r = show(fresh, created.Key)
	require.Equal(t, cli.CodeUnknownKey, r.code, r.stderr)
	require.Contains(t, r.stderr, "holds no row for "+created.Key)

	r = b.runWith(fresh, "ledger", "backfill")
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	var rep struct{ Runs, Written, Kept int }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Equal(t, 2, rep.Written, r.stdout)
	row, r = show(fresh, created.Key)
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	require.Equal(t, "created", row.Status)
	require.Equal(t, workflows.WorkflowID(created.Key), row.WorkflowID)
	require.NoError(t, json.Unmarshal(row.Receipt, &receipt))
	require.Equal(t, created.Receipt.ResourceID, receipt.ResourceID)
	row, _ = show(fresh, parked.Key)
	require.Equal(t, "abandoned", row.Status)

	r = b.runWith(fresh, "ledger", "backfill")
	require.Equal(t, cli.CodeOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Equal(t, 0, rep.Written, "a row the ledger holds is left alone")
	require.Equal(t, 2, rep.Kept)

	r = b.runWith([]string{"COURIER_LEDGER="}, "ledger", "show", created.Key)
	require.Equal(t, cli.CodeUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--ledger is required")
}
