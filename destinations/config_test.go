package destinations

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
)

const goodFile = `{
  "destinations": {
    "helpdesk": {
      "adapter": "http",
      "url": "http://127.0.0.1:8081/helpdesk/tickets",
      "auth": {"header": "Authorization", "scheme": "Bearer", "secret_env": "COURIER_TEST_SECRET"},
      "contract": {
        "dedup": "key",
        "replay_marker": {"header": "Idempotent-Replayed", "value": "true"},
        "key_retention": "24h",
        "retry": {"max_attempts": 5, "attempt_timeout": "10s", "deadline": "10m"}
      }
    },
    "ledger": {
      "adapter": "sql", "driver": "sqlite", "dsn": "ledger.db",
      "contract": {"dedup": "unique-commit", "retry": {"max_attempts": 3, "attempt_timeout": "5s", "deadline": "1m"}}
    }
  }
}`

func TestParseGood(t *testing.T) {
	cfg, err := Parse([]byte(goodFile))
	require.NoError(t, err)
	require.Equal(t, []string{"helpdesk", "ledger"}, cfg.Names())
	c := cfg.Destinations["helpdesk"].Contract
	require.Equal(t, "Idempotency-Key", c.KeyHeader, "default key header")
	require.Equal(t, 2.0, c.Retry.Backoff, "default backoff")
	require.Equal(t, "24h0m0s", c.KeyRetention.String())
}

// TestParseBad: every bad file stops the worker with a message naming the
// line or field, and how to fix it.
func TestParseBad(t *testing.T) {
	cases := []struct{ name, file, want string }{
		{"unknown field", `{"destinations": {"x": {"adapter": "http", "url": "u",
  "retries": 3,
  "contract": {}
  }}}`, `line 2: json: unknown field "retries"`},
		{"unbounded retries", `{"destinations": {"x": {"adapter": "http", "url": "u",
  "contract": {"dedup": "key", "retry": {"max_attempts": 0, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			`destination "x" (line 1): contract.retry.max_attempts: must be between 1 and 100 (unbounded retries are not allowed)`},
		{"too many attempts", `{"destinations": {"x": {"adapter": "http", "url": "u",
  "contract": {"dedup": "key", "retry": {"max_attempts": 1000, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			`contract.retry.max_attempts: 1000 is over the limit of 100`},
		{"no deadline", `{"destinations": {"x": {"adapter": "http", "url": "u",
  "contract": {"dedup": "key", "retry": {"max_attempts": 3, "attempt_timeout": "1s"}}}}}`,
			`contract.retry.deadline: required`},
		{"unknown dedup", `{"destinations": {"x": {"adapter": "http", "url": "u",
  "contract": {"dedup": "maybe", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			`contract.dedup: unknown kind "maybe"; use one of key, unique-commit, lookup, none`},
		{"bad duration", `{"destinations": {"x": {"adapter": "http", "url": "u",
  "contract": {"dedup": "key", "retry": {"max_attempts": 3, "attempt_timeout": "soon", "deadline": "1m"}}}}}`,
			`duration "soon"`},
		{"lookup without url", `{"destinations": {"x": {"adapter": "http", "url": "u",
  "contract": {"dedup": "lookup", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			`lookup_url: required for dedup lookup`},
		{"sql must be unique-commit", `{"destinations": {"x": {"adapter": "sql", "driver": "sqlite", "dsn": "f",
  "contract": {"dedup": "none", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			`declare unique-commit`},
		{"unknown adapter", `{"destinations": {"x": {"adapter": "ftp",
  "contract": {"dedup": "none", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			`adapter: "ftp" unknown`},
		{"syntax", "{\"destinations\": {\n\"x\": {,}}}", `line 2: invalid character ','`},
		{"empty", `{}`, `no destinations`},
		{"secret source", `{"destinations": {"x": {"adapter": "http", "url": "u", "auth": {"header": "A"},
  "contract": {"dedup": "none", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			`auth: set exactly one of secret_env or secret_file`},
		{"notifier without url", `{"notifier": {"web_ui": "http://ui"},
 "destinations": {"x": {"adapter": "http", "url": "u",
  "contract": {"dedup": "none", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			`notifier (line 1): notifier.url: required, an http(s) URL`},
		{"destination notifier not http", `{"destinations": {"x": {"adapter": "http", "url": "u",
  "notifier": {"url": "chat.example/hook", "auth": {"header": "Authorization"}},
  "contract": {"dedup": "none", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			"destination \"x\" (line 1): notifier.url: \"chat.example/hook\" is not an absolute http(s) URL\nnotifier.auth: set exactly one of secret_env or secret_file"},
		{"settle at a destination that looks nothing up", `{"destinations": {"x": {"adapter": "http", "url": "u",
  "contract": {"dedup": "none", "settle": "5s", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			`contract.settle: only a dedup lookup destination looks an effect up; remove settle, or declare dedup lookup`},
		{"settle of nothing", `{"destinations": {"x": {"adapter": "http", "url": "u", "lookup_url": "u?k={key}",
  "contract": {"dedup": "lookup", "settle": "0s", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			`contract.settle: must be positive, e.g. "10s"`},
		{"settle over the limit", `{"destinations": {"x": {"adapter": "http", "url": "u", "lookup_url": "u?k={key}",
  "contract": {"dedup": "lookup", "settle": "2h", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "720h"}}}}}`,
			`contract.settle: 2h0m0s is over the limit of 1h0m0s`},
		{"settle past the deadline", `{"destinations": {"x": {"adapter": "http", "url": "u", "lookup_url": "u?k={key}",
  "contract": {"dedup": "lookup", "settle": "1m", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			`contract.settle: 1m0s is not shorter than retry.deadline (1m0s): no resend could follow the lookup`},
		{"settle not a duration", `{"destinations": {"x": {"adapter": "http", "url": "u", "lookup_url": "u?k={key}",
  "contract": {"dedup": "lookup", "settle": 10, "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`,
			`duration must be a string such as "10s", got 10`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.file))
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
		})
	}
}

// TestParseSettle: a lookup destination's settle time is what it declares,
// or the stated default; no other destination carries one, so the terms its
// deliveries record do not change.
func TestParseSettle(t *testing.T) {
	cfg, err := Parse([]byte(`{"destinations": {
  "quick": {"adapter": "http", "url": "http://q", "lookup_url": "http://q/x?k={key}",
   "contract": {"dedup": "lookup", "settle": "3s", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}},
  "plain": {"adapter": "http", "url": "http://p", "lookup_url": "http://p/x?k={key}",
   "contract": {"dedup": "lookup", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}},
  "none": {"adapter": "http", "url": "http://n",
   "contract": {"dedup": "none", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`))
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, cfg.Destinations["quick"].Contract.SettleTime())
	require.Equal(t, contract.DefaultSettle, cfg.Destinations["plain"].Contract.SettleTime())
	require.NotNil(t, cfg.Destinations["plain"].Contract.Settle, "the default is stated in the terms")
	none := cfg.Destinations["none"].Contract
	require.Nil(t, none.Settle)
	require.Zero(t, none.SettleTime())
	b, err := json.Marshal(none)
	require.NoError(t, err)
	require.NotContains(t, string(b), "settle", "nothing added to the terms of a destination that looks nothing up")
}

// TestNotifierFor: a destination's own notifier wins over the file's.
func TestNotifierFor(t *testing.T) {
	cfg, err := Parse([]byte(`{"notifier": {"url": "http://all"},
 "destinations": {
  "a": {"adapter": "http", "url": "http://a", "notifier": {"url": "http://only-a"},
   "contract": {"dedup": "none", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}},
  "b": {"adapter": "http", "url": "http://b",
   "contract": {"dedup": "none", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}}}`))
	require.NoError(t, err)
	require.Equal(t, "http://only-a", cfg.NotifierFor("a").URL)
	require.Equal(t, "http://all", cfg.NotifierFor("b").URL)
}

func TestSecret(t *testing.T) {
	a := &Auth{Header: "Authorization", SecretEnv: "COURIER_TEST_SECRET_UNSET"}
	_, err := a.Secret()
	require.EqualError(t, err, "auth.secret_env: environment variable COURIER_TEST_SECRET_UNSET is not set")

	t.Setenv("COURIER_TEST_SECRET_SET", "s3cret")
	a.SecretEnv = "COURIER_TEST_SECRET_SET"
	v, err := a.Secret()
	require.NoError(t, err)
	require.Equal(t, "s3cret", v)

	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte("from-file\n"), 0o600))
	v, err = (&Auth{Header: "A", SecretFile: path}).Secret()
	require.NoError(t, err)
	require.Equal(t, "from-file", v)
}
