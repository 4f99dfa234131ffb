package destinations

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const natsRetry = `"retry": {"max_attempts": 3, "attempt_timeout": "5s", "deadline": "1m"}`

func natsFile(dest string) string {
	return `{"destinations": {"orders": ` + dest + `}}`
}

// TestParseNATS: a NATS destination needs its server, stream and subject,
// and declares dedup key with a key retention, nothing about headers.
func TestParseNATS(t *testing.T) {
	cfg, err := Parse([]byte(natsFile(`{"adapter": "nats",
  "nats": {"url": "nats://127.0.0.1:4222", "stream": "ORDERS", "subject": "orders.created"},
  "contract": {"dedup": "key", "key_retention": "2m", ` + natsRetry + `}}`)))
	require.NoError(t, err)
	d := cfg.Destinations["orders"]
	require.Equal(t, &NATS{URL: "nats://127.0.0.1:4222", Stream: "ORDERS", Subject: "orders.created"}, d.NATS)
	require.Empty(t, d.Contract.KeyHeader, "the message id carries the key: no default key header")
	require.Equal(t, 2*time.Minute, d.Contract.KeyRetention.D())
}

func TestParseNATSBad(t *testing.T) {
	good := `"nats": {"url": "nats://127.0.0.1:4222", "stream": "ORDERS", "subject": "orders.created"}`
	contract := func(c string) string { return `"contract": {` + c + `, ` + natsRetry + `}` }
	keyed := contract(`"dedup": "key", "key_retention": "2m"`)
	cases := []struct{ name, dest, want string }{
		{"no nats block", `{"adapter": "nats", ` + keyed + `}`,
			`destination "orders" (line 1): nats: required for adapter nats, e.g. "nats": {"url": "nats://127.0.0.1:4222", "stream": "ORDERS", "subject": "orders.created"}`},
		{"bad url", `{"adapter": "nats", "nats": {"url": "http://x:1", "stream": "ORDERS", "subject": "orders.created"}, ` + keyed + `}`,
			`nats.url: "http://x:1" is not a NATS server's URL; use nats://host:port (or tls://host:port)`},
		{"no stream", `{"adapter": "nats", "nats": {"url": "nats://127.0.0.1:4222", "subject": "orders.created"}, ` + keyed + `}`,
			`nats.stream: "" is not a stream's name; name the JetStream stream (no spaces, '.', '*' or '>')`},
		{"wildcard subject", `{"adapter": "nats", "nats": {"url": "nats://127.0.0.1:4222", "stream": "ORDERS", "subject": "orders.*"}, ` + keyed + `}`,
			`nats.subject: "orders.*" is not a subject to publish to; use a literal subject such as orders.created (no wildcards)`},
		{"dedup none", `{"adapter": "nats", ` + good + `, ` + contract(`"dedup": "none"`) + `}`,
			`contract.dedup: adapter nats deduplicates by the message id within the stream's duplicate window; declare key, not "none"`},
		{"no key retention", `{"adapter": "nats", ` + good + `, ` + contract(`"dedup": "key"`) + `}`,
			`contract.key_retention: required for adapter nats; declare the stream's duplicate window or less, e.g. "2m"`},
		{"key header", `{"adapter": "nats", ` + good + `, ` + contract(`"dedup": "key", "key_retention": "2m", "key_header": "Idempotency-Key"`) + `}`,
			`contract.key_header, key_field, replay_marker: not for adapter nats; the key is the message id (Nats-Msg-Id) and the stream says when it is a duplicate`},
		{"http fields", `{"adapter": "nats", "url": "http://x", ` + good + `, ` + keyed + `}`,
			`url, lookup_url, auth, driver, dsn, table: not for adapter nats; its server is nats.url`},
		{"nats block elsewhere", `{"adapter": "http", "url": "http://x/t", ` + good + `, ` + keyed + `}`,
			`nats: only for adapter nats`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(natsFile(c.dest)))
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			require.Equal(t, 1, strings.Count(err.Error(), "\n")+1, "one complaint: %v", err)
		})
	}
}
