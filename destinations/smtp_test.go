package destinations

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const smtpRetry = `"retry": {"max_attempts": 3, "attempt_timeout": "10s", "deadline": "1m"}`

func TestSMTPGood(t *testing.T) {
	cfg, err := Parse([]byte(`{"destinations": {"mail": {"adapter": "smtp",
  "smtp": {"addr": "127.0.0.1:2525", "from": "Courier <courier@example.com>", "to": ["ops@example.com"]},
  "contract": {"dedup": "none", ` + smtpRetry + `}}}}`))
	require.NoError(t, err)
	d := cfg.Destinations["mail"]
	require.Equal(t, SMTP{Addr: "127.0.0.1:2525", From: "Courier <courier@example.com>", To: []string{"ops@example.com"}}, *d.SMTP)
	require.Empty(t, d.Contract.KeyHeader, "no key header for mail")
}

// TestSMTPBad: each mistake in an smtp destination is named with its field
// and how to fix it.
func TestSMTPBad(t *testing.T) {
	cases := []struct{ name, dest, want string }{
		{"no smtp block", `"adapter": "smtp", "contract": {"dedup": "none", ` + smtpRetry + `}`,
			`smtp: required for adapter smtp, e.g. "smtp": {"addr": "mail.example.com:587", "from": "courier@example.com", "to": ["ops@example.com"]}`},
		{"dedup key", `"adapter": "smtp", "smtp": {"addr": "h:25", "from": "a@example.com"}, "contract": {"dedup": "key", ` + smtpRetry + `}`,
			`contract.dedup: SMTP cannot deduplicate (a server that took the mail and lost its answer has delivered it); declare none, not "key", so a lost answer parks for review`},
		{"http fields", `"adapter": "smtp", "url": "http://x", "smtp": {"addr": "h:25", "from": "a@example.com"}, "contract": {"dedup": "none", ` + smtpRetry + `}`,
			"url, lookup_url, auth, driver, dsn, table: not for adapter smtp; its server is smtp.addr"},
		{"key header", `"adapter": "smtp", "smtp": {"addr": "h:25", "from": "a@example.com"}, "contract": {"dedup": "none", "key_header": "K", ` + smtpRetry + `}`,
			"contract.key_header, key_field, replay_marker, key_retention: not for adapter smtp"},
		{"smtp on http", `"adapter": "http", "url": "http://127.0.0.1:1/t", "smtp": {"addr": "h:25", "from": "a@example.com"}, "contract": {"dedup": "none", ` + smtpRetry + `}`,
			"smtp: only for adapter smtp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(`{"destinations": {"mail": {` + c.dest + `}}}`))
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, `destination "mail" (line 1): `)
		})
	}
}
