package starter_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/starter"
)

func TestReadResourceIDs(t *testing.T) {
	const k1, k2 = "6ba7b810-9dad-51d1-80b4-00c04fd430c8", "6ba7b811-9dad-51d1-80b4-00c04fd430c8"
	lines, err := starter.ReadResourceIDs(strings.NewReader("# key,resource id\n\n" + k1 + ", ticket-1\ndelivery-" + k2 + ",ticket,2\n"))
	require.NoError(t, err)
	require.Equal(t, []starter.ResourceID{{Line: 3, Key: k1, ResourceID: "ticket-1"}, {Line: 4, Key: k2, ResourceID: "ticket,2"}}, lines)

	for in, want := range map[string]string{
		k1:                                  `line 1: "` + k1 + `" is not key,resource-id`,
		"ticket-1,t":                        `line 1: "ticket-1" is not a delivery key`,
		k1 + ",t\n" + k1 + ",u":             "line 2: key " + k1 + " is on line 1 already",
		k1 + ",":                            "line 1: resource id: empty",
		k1 + ",a\x00b":                      "line 1: resource id \"a\\x00b\": holds control characters",
		k1 + "," + strings.Repeat("x", 257): "line 1: resource id: 257 bytes is over the limit of 256",
		"# nothing\n":                       "no key,resource-id lines",
	} {
		_, err := starter.ReadResourceIDs(strings.NewReader(in))
		require.ErrorContains(t, err, want, in)
	}
}

func TestBulkFilterQuery(t *testing.T) {
	q := starter.BulkFilter{Destination: "legacy", Operation: "create-ticket", Query: `CourierBusinessID STARTS_WITH "inv-"`}.VisibilityQuery()
	require.Equal(t, `WorkflowType = "Delivery" AND ExecutionStatus = "Running" AND CourierState = "awaiting_review" AND `+
		`CourierDestination = "legacy" AND CourierOperation = "create-ticket" AND (CourierBusinessID STARTS_WITH "inv-")`, q)
}
