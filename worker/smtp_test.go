package worker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/destinations"
)

// TestSMTPAddressesCheckedAtStart: the smtp block's addresses are the
// adapter's to read, so the worker refuses them at start, each named by
// its field and with its fix.
func TestSMTPAddressesCheckedAtStart(t *testing.T) {
	const retry = `"retry": {"max_attempts": 3, "attempt_timeout": "10s", "deadline": "1m"}`
	cases := []struct{ name, smtp, want string }{
		{"bad addr", `{"addr": "mail.example.com", "from": "a@example.com"}`, `smtp.addr: "mail.example.com" is not host:port, e.g. mail.example.com:587`},
		{"bad from", `{"addr": "h:25", "from": "courier"}`, `smtp.from: "courier" is not an email address`},
		{"bad to", `{"addr": "h:25", "from": "a@example.com", "to": ["ops"]}`, `smtp.to: [0]: "ops" is not an email address`},
		{"bad domain", `{"addr": "h:25", "from": "a@example.com", "domain": "a b"}`, `smtp.domain: "a b" is not a domain name such as example.com`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := destinations.Parse([]byte(`{"destinations": {"mail": {"adapter": "smtp", "smtp": ` + c.smtp +
				`, "contract": {"dedup": "none", ` + retry + `}}}}`))
			require.NoError(t, err)
			_, err = OpenAdapters(cfg, nil)
			require.ErrorContains(t, err, `destination "mail": `+c.want)
		})
	}
}
