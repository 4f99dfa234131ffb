package activities_test

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/connect/codec"
)

// TestLedgerReceiptsEncryptedWithTheCodec: with the payload codec on, the
// receipt the outcome ledger keeps is ciphertext, as history's payloads
// are, and only the codec's keys read it back.
func TestLedgerReceiptsEncryptedWithTheCodec(t *testing.T) {
	keys, err := codec.ParseKeys([]byte("k1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))))
	require.NoError(t, err)
	c, err := codec.New(keys)
	require.NoError(t, err)
	receipt := &activities.Receipt{ResourceID: "ticket-secret-42", Status: "created", StatusCode: 201, Source: activities.SourceCreated}

	b, err := activities.EncodeReceipt(nil, receipt)
	require.NoError(t, err)
	require.Contains(t, string(b), "ticket-secret-42", "without the codec the receipt is stored as JSON")

	b, err = activities.EncodeReceipt(c.DataConverter(), receipt)
	require.NoError(t, err)
	require.NotContains(t, string(b), "ticket-secret-42")
	back, err := activities.DecodeReceipt(c.DataConverter(), b)
	require.NoError(t, err)
	require.Contains(t, string(back), `"resource_id":"ticket-secret-42"`)
	_, err = activities.DecodeReceipt(nil, b)
	require.Error(t, err, "without the key it cannot be read")
}
