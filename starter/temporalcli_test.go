package starter_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// temporalCLI runs the temporal CLI against the test server.
func temporalCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	bin, err := devserver.Binary()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args = append(args, "--address", fx.addr)
	if !slices.Contains(args, "--namespace") {
		args = append(args, "--namespace", "default")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return out.String(), errOut.String(), err
}

// keyFromSpec derives a key exactly as docs/keys.md tells a non-Go caller
// to: UUIDv5 under the Courier namespace over "courier-key-v1" and, per
// field, its byte length, ':', the bytes and ';'.
func keyFromSpec(tenant, destination, operation, businessID string) string {
	name := "courier-key-v1"
	for _, f := range []string{tenant, destination, operation, businessID} {
		name += strconv.Itoa(len(f)) + ":" + f + ";"
	}
	return uuid.NewSHA1(uuid.MustParse("bd868725-8c48-4f30-877f-3de82f48d062"), []byte(name)).String()
}

// TestTemporalCLIOnly drives one delivery and its review with nothing but
// the temporal CLI, as a caller in any language would: start under the
// derived workflow ID, query status until it parks, refuse a bad decision
// through the update, decide through the signal, read the result.
func TestTemporalCLIOnly(t *testing.T) {
	id := uniqueID("cli-only")
	key := keyFromSpec("acme", "legacy", "create-ticket", id)
	require.Equal(t, opkey.Key(opkey.Operation{Tenant: "acme", Destination: "legacy", Operation: "create-ticket", BusinessID: id}), key,
		"the documented derivation gives the key the workers derive")
	wfID := "delivery-" + key
	// Already canonical (sorted members, no white space), so its SHA-256 is the fingerprint.
	payload := `{"request_id":"` + id + `","subject":"Call back the customer"}`
	sum := sha256.Sum256([]byte(payload))
	fingerprint := hex.EncodeToString(sum[:])
	input := `{"tenant":"acme","destination":"legacy","operation":"create-ticket","business_id":"` + id + `","payload":` + payload + `}`

	// legacy has no dedup: the lost response must park the delivery.
	require.NoError(t, fx.env.Inject("legacy", sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
	start := func(extra ...string) (runID, stderr string, err error) {
		args := append([]string{"workflow", "start", "-o", "json",
			"--type", "Delivery", "--task-queue", "courier", "--workflow-id", wfID,
			"--id-reuse-policy", "RejectDuplicate",
			"--input", input}, extra...)
		out, errOut, err := temporalCLI(t, args...)
		if err != nil {
			return "", errOut, err
		}
		var started struct {
			RunID string `json:"runId"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &started), out)
		return started.RunID, errOut, nil
	}
	runID, errOut, err := start()
	require.NoError(t, err, errOut)

	// A second start of the same workflow ID starts nothing: it returns the
	// running delivery, or with --fail-existing, an error.
	again, errOut, err := start()
	require.NoError(t, err, errOut)
	require.Equal(t, runID, again)
	_, errOut, err = start("--fail-existing")
	require.Error(t, err)
	require.Contains(t, errOut, "already")

	// What a second caller reads to decide between join and conflict: the
	// fingerprint the workflow derived, from its status.
	var st workflows.DeliveryStatus
	require.Eventually(t, func() bool {
		out, errOut, err := temporalCLI(t, "workflow", "query", "--workflow-id", wfID, "--name", "status", "-o", "json")
		require.NoError(t, err, errOut)
		var q struct {
			QueryResult []workflows.DeliveryStatus `json:"queryResult"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &q), out)
		require.Len(t, q.QueryResult, 1)
		st = q.QueryResult[0]
		return st.State == workflows.StateAwaitingReview
	}, 30*time.Second, 300*time.Millisecond)
	require.Equal(t, key, st.Key)
	require.Equal(t, fingerprint, st.Fingerprint)
	require.Contains(t, st.Review.Evidence, `destination "legacy" (dedup none) cannot deduplicate a retry`)

	// The update refuses a decision it cannot act on, with the reason.
	out, errOut, err := temporalCLI(t, "workflow", "update", "execute", "--workflow-id", wfID, "--name", "review",
		"--input", `{"decision":"delivered","reviewer":"alice","note":"found it"}`)
	require.Error(t, err)
	require.Contains(t, out+errOut, "resource_id: required with decision delivered")

	// The operator finds the ticket at the destination and says so.
	ticketID := ticketOf(t, "legacy", id)
	out, errOut, err = temporalCLI(t, "workflow", "signal", "--workflow-id", wfID, "--name", "review",
		"--input", `{"decision":"delivered","reviewer":"alice","note":"found the ticket","resource_id":"`+ticketID+`"}`)
	require.NoError(t, err, "%s%s", out, errOut)

	out, errOut, err = temporalCLI(t, "workflow", "result", "--workflow-id", wfID, "-o", "json")
	require.NoError(t, err, errOut)
	var res struct {
		Status string                   `json:"status"`
		Result workflows.DeliveryResult `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, workflows.StatusDeliveredByReview, res.Result.Status)
	require.Equal(t, ticketID, res.Result.Receipt.ResourceID)
	require.Len(t, res.Result.Review.Decisions, 1, "a refused update leaves no trace in history")
	require.Equal(t, "signal", res.Result.Review.Decisions[0].Via)

	require.Equal(t, "COMPLETED", res.Status)

	n, err := fx.env.Effects("legacy", id)
	require.NoError(t, err)
	require.Equal(t, 1, n, "one ticket: the lost response was reviewed, never retried")

	// Started without search attributes, the workflow set them itself: the
	// delivery is in the web UI's list like any other.
	require.Eventually(t, func() bool {
		ds, err := starter.New(fx.client).List(context.Background(), starter.ListOptions{State: string(workflows.StatusDeliveredByReview)})
		require.NoError(t, err)
		for _, d := range ds {
			if d.Key == key {
				return d.BusinessID == id && d.Destination == "legacy"
			}
		}
		return false
	}, 30*time.Second, 300*time.Millisecond)
}

// TestCreateSearchAttributes runs the command docs/protocol.md gives for
// another cluster, on a fresh namespace of the test server.
func TestCreateSearchAttributes(t *testing.T) {
	ns := uniqueID("courier-sa")
	out, errOut, err := temporalCLI(t, "operator", "namespace", "create", "--namespace", ns)
	require.NoError(t, err, "%s%s", out, errOut)
	// One command per attribute: the CLI (v1.5.1) creates only the first of
	// several --name flags.
	for _, name := range []string{"CourierKey", "CourierDestination", "CourierOperation", "CourierBusinessID", "CourierState"} {
		out, errOut, err = temporalCLI(t, "operator", "search-attribute", "create", "--namespace", ns,
			"--name", name, "--type", "Keyword")
		require.NoError(t, err, "%s%s", out, errOut)
	}

	out, errOut, err = temporalCLI(t, "operator", "search-attribute", "list", "--namespace", ns, "-o", "json")
	require.NoError(t, err, errOut)
	var listed struct {
		CustomAttributes map[string]string `json:"customAttributes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	for _, name := range workflows.SearchAttributeNames {
		require.Equal(t, "INDEXED_VALUE_TYPE_KEYWORD", listed.CustomAttributes[name], "%s in %s", name, out)
	}
}

// TestTemporalCLIStartAsDocumented runs docs/protocol.md's full start
// command (search attributes, summary) and its list command for created
// deliveries; and the start earlier callers sent (with CourierState
// delivering and a memo), whose delivery publishes created itself.
func TestTemporalCLIStartAsDocumented(t *testing.T) {
	for _, tc := range []struct {
		name, created string
		earlier       []string
	}{
		{"documented", `(CourierState = "created" OR (CourierState IS NULL AND ExecutionStatus = "Completed"))`, nil},
		{"earlier", `CourierState = "created"`, []string{"--search-attribute", `CourierState="delivering"`, "--memo", `fingerprint="claimed"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := uniqueID("cli-" + tc.name)
			key := keyFromSpec("acme", "helpdesk", "create-ticket", id)
			payload := `{"request_id":"` + id + `","subject":"Move the workshop booking"}`
			args := append([]string{"workflow", "start",
				"--type", "Delivery", "--task-queue", "courier",
				"--workflow-id", "delivery-" + key,
				"--id-reuse-policy", "RejectDuplicate",
				"--search-attribute", `CourierKey="` + key + `"`,
				"--search-attribute", `CourierDestination="helpdesk"`,
				"--search-attribute", `CourierOperation="create-ticket"`,
				"--search-attribute", `CourierBusinessID="` + id + `"`,
				"--static-summary", "create-ticket → helpdesk · " + id + " (acme)",
				"--input", `{"tenant":"acme","destination":"helpdesk","operation":"create-ticket","business_id":"` + id + `","payload":` + payload + `}`},
				tc.earlier...)
			out, errOut, err := temporalCLI(t, args...)
			require.NoError(t, err, "%s%s", out, errOut)

			out, errOut, err = temporalCLI(t, "workflow", "result", "--workflow-id", "delivery-"+key, "-o", "json")
			require.NoError(t, err, errOut)
			var res struct {
				Result workflows.DeliveryResult `json:"result"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &res), out)
			require.Equal(t, workflows.StatusCreated, res.Result.Status)

			require.Eventually(t, func() bool {
				out, errOut, err := temporalCLI(t, "workflow", "list", "-o", "json",
					"--query", `WorkflowType = "Delivery" AND `+tc.created+` AND CourierBusinessID = "`+id+`"`)
				require.NoError(t, err, errOut)
				return strings.Contains(out, "delivery-"+key)
			}, 30*time.Second, 300*time.Millisecond)
		})
	}
}

// deliverWithCLI runs docs/protocol.md's one-call delivery: Update-with-Start
// of the deliver update, which answers when the delivery settles.
func deliverWithCLI(t *testing.T, wfID, input, fingerprint string) (settled workflows.Settled, stderr string, err error) {
	t.Helper()
	out, errOut, err := temporalCLI(t, "workflow", "execute-update-with-start", "-o", "json",
		"--type", "Delivery", "--task-queue", "courier", "--workflow-id", wfID,
		"--id-conflict-policy", "UseExisting", "--id-reuse-policy", "RejectDuplicate",
		"--input", input,
		"--update-name", "deliver", "--update-id", "deliver-"+fingerprint,
		"--update-input", `{"fingerprint":"`+fingerprint+`"}`)
	if err != nil {
		return settled, out + errOut, err
	}
	var res struct {
		UpdateResult workflows.Settled `json:"updateResult"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	return res.UpdateResult, errOut, nil
}

// TestTemporalCLIUpdateWithStart drives deliveries as a caller in any
// language would with one command each: created, a join of the same
// request, a conflict refused by the workflow, a park answered at once.
func TestTemporalCLIUpdateWithStart(t *testing.T) {
	request := func(dest, id, subject string) (wfID, input, fingerprint string) {
		payload := `{"request_id":"` + id + `","subject":"` + subject + `"}`
		sum := sha256.Sum256([]byte(payload))
		return "delivery-" + keyFromSpec("acme", dest, "create-ticket", id),
			`{"tenant":"acme","destination":"` + dest + `","operation":"create-ticket","business_id":"` + id + `","payload":` + payload + `}`,
			hex.EncodeToString(sum[:])
	}

	id := uniqueID("cli-uws")
	wfID, input, fp := request("helpdesk", id, "Move the workshop booking")
	st, errOut, err := deliverWithCLI(t, wfID, input, fp)
	require.NoError(t, err, errOut)
	require.Equal(t, workflows.StatusCreated, st.Status)
	require.Equal(t, fp, st.Fingerprint)

	// The same request again joins the finished delivery: the server
	// answers with the stored outcome of the same deliver update.
	again, errOut, err := deliverWithCLI(t, wfID, input, fp)
	require.NoError(t, err, errOut)
	require.Equal(t, workflows.StatusCreated, again.Status)
	require.Equal(t, st.Receipt.ResourceID, again.Receipt.ResourceID)
	require.Equal(t, 1, effects(t, "helpdesk", id))

	// Another payload for a running delivery is refused by the workflow's
	// validator, naming both fingerprints; nothing is sent.
	require.NoError(t, fx.env.Inject("legacy", sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
	parkID := uniqueID("cli-uws-park")
	parkWF, parkInput, parkFP := request("legacy", parkID, "Call back the customer")
	began := time.Now()
	st, errOut, err = deliverWithCLI(t, parkWF, parkInput, parkFP)
	require.NoError(t, err, errOut)
	require.Equal(t, workflows.StateAwaitingReview, st.State, "the answer comes when it parks")
	require.Less(t, time.Since(began), 5*time.Second)
	require.Contains(t, st.Review.Evidence, `destination "legacy" (dedup none) cannot deduplicate a retry`)

	joined, errOut, err := deliverWithCLI(t, parkWF, parkInput, parkFP)
	require.NoError(t, err, errOut)
	require.Equal(t, workflows.StateAwaitingReview, joined.State, "a second caller joins the parked delivery")

	_, otherInput, otherFP := request("legacy", parkID, "Another subject")
	_, errOut, err = deliverWithCLI(t, parkWF, otherInput, otherFP)
	require.Error(t, err)
	require.Contains(t, errOut, parkFP)
	require.Contains(t, errOut, otherFP)
	require.Equal(t, 1, effects(t, "legacy", parkID), "one ticket: the lost response, never retried")
}

// TestTemporalCLIBatchSignalAsDocumented sends one decision to several
// parked deliveries with the temporal CLI's batch signal, in the form
// docs/protocol.md gives: each delivery records the decision with the
// batch job named in it.
func TestTemporalCLIBatchSignalAsDocumented(t *testing.T) {
	operation := uniqueID("batch")
	s := newStarter()
	var keys []string
	for i := range 2 {
		id := fmt.Sprintf("%s-%d", operation, i)
		st := deliver(t, s, workflows.DeliveryInput{
			Operation: opkey.Operation{Tenant: "acme", Destination: DestLossy, Operation: operation, BusinessID: id},
			Payload:   json.RawMessage(`{"request_id": "` + id + `", "subject": "Call back the customer"}`),
		})
		require.Equal(t, workflows.StateAwaitingReview, st.State)
		keys = append(keys, st.Key)
	}
	query := `WorkflowType = "Delivery" AND ExecutionStatus = "Running" AND CourierState = "awaiting_review" AND ` +
		`CourierDestination = "` + DestLossy + `" AND CourierOperation = "` + operation + `"`
	require.Eventually(t, func() bool { // visibility lags
		p, err := s.PreviewBulk(context.Background(), starter.BulkFilter{Destination: DestLossy, Operation: operation}, 0)
		require.NoError(t, err)
		return p.Matched == len(keys)
	}, 30*time.Second, 200*time.Millisecond)

	out, errOut, err := temporalCLI(t, "workflow", "signal", "--name", "review", "--reason", "customer cancelled",
		"--query", query, "--input", `{"decision":"abandon","reviewer":"ops","note":"customer cancelled","batch_job":"review-2026-03-01"}`, "--yes")
	require.NoError(t, err, "%s%s", out, errOut)
	for _, key := range keys {
		var st workflows.DeliveryStatus
		require.Eventually(t, func() bool {
			st, err = s.Status(context.Background(), key)
			require.NoError(t, err)
			return st.Status != ""
		}, 30*time.Second, 200*time.Millisecond)
		require.Equal(t, workflows.StatusAbandoned, st.Status)
		require.Len(t, st.Review.Decisions, 1)
		require.Equal(t, "review-2026-03-01", st.Review.Decisions[0].BatchJob)
	}
}
