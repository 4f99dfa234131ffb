package activities

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
)

// TestNameTheOriginal: a duplicate names the original effect, so an answer
// read as a replay that names none is an unknown outcome, saying what was
// read where; receipts say where they came from.
func TestNameTheOriginal(t *testing.T) {
	out := nameTheOriginal(Outcome{Class: contract.ClassReplayed, StatusCode: 409, Receipt: &Receipt{Replayed: true},
		Reads: []Read{{Field: "rules[0].receipt.id", Pointer: "/error/original", Value: "(absent)"}}})
	require.Equal(t, contract.ClassUnknown, out.Class)
	require.Nil(t, out.Receipt)
	require.Contains(t, out.Error, "HTTP 409 was read as a replay but names no resource id (read rules[0].receipt.id /error/original: (absent))")

	out = nameTheOriginal(Outcome{Class: contract.ClassReplayed, Receipt: &Receipt{ResourceID: "E-1", Replayed: true}})
	require.Equal(t, contract.ClassReplayed, out.Class)
	require.Equal(t, SourceReplayed, out.Receipt.Source)

	out = nameTheOriginal(Outcome{Class: contract.ClassCreated, Receipt: &Receipt{}})
	require.Equal(t, contract.ClassCreated, out.Class, "a created answer without an id is still the effect this attempt made")
	require.Equal(t, SourceCreated, out.Receipt.Source)
}
