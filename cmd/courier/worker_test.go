package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/internal/cli"
)

// A destinations file the worker accepts; the cases below break it.
const goodDestinations = `{
  "destinations": {
    "helpdesk": {
      "adapter": "http",
      "url": "http://127.0.0.1:8081/helpdesk/tickets",
      "contract": {
        "dedup": "key",
        "retry": {"max_attempts": 3, "attempt_timeout": "5s", "deadline": "1m"}
      }
    }
  }
}`

func writeDestinations(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "destinations.json")
	require.NoError(t, os.WriteFile(f, []byte(content), 0o644))
	return f
}

// A bad setup stops `courier worker` at start, before it reaches Temporal,
// with a message that names the problem; none reaches a server here.
func TestWorkerCommandRefusesBadSetup(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("COURIER_TEST_HELPDESK_TOKEN", "")
	t.Setenv(envDestinations, "")
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
		code int // 0: any failure status
		want []string
	}{
		{"no destinations flag", func(*testing.T) []string { return nil }, 2,
			[]string{"--destinations is required, or COURIER_DESTINATIONS", "courier worker --destinations "}},
		{"missing file", func(t *testing.T) []string {
			return []string{"--destinations", filepath.Join(t.TempDir(), "nope.json")}
		}, 0, []string{"nope.json", "no such file"}},
		{"unknown field", func(t *testing.T) []string {
			return []string{"--destinations", writeDestinations(t,
				strings.Replace(goodDestinations, `"url"`, `"urll"`, 1))}
		}, 0, []string{"destinations.json: line ", `unknown field "urll"`}},
		{"unbounded retries", func(t *testing.T) []string {
			return []string{"--destinations", writeDestinations(t,
				strings.Replace(goodDestinations, `"max_attempts": 3`, `"max_attempts": 0`, 1))}
		}, 0, []string{`destination "helpdesk" (line 3)`, "retry.max_attempts", "unbounded retries are not allowed"}},
		{"unknown dedup kind", func(t *testing.T) []string {
			return []string{"--destinations", writeDestinations(t,
				strings.Replace(goodDestinations, `"dedup": "key"`, `"dedup": "maybe"`, 1))}
		}, 0, []string{`destination "helpdesk"`, `contract.dedup: unknown kind "maybe"`}},
		{"missing secret", func(t *testing.T) []string {
			return []string{"--destinations", writeDestinations(t, strings.Replace(goodDestinations, `"contract"`,
				`"auth": {"header": "Authorization", "secret_env": "COURIER_TEST_HELPDESK_TOKEN"}, "contract"`, 1))}
		}, 0, []string{`destination "helpdesk"`, "COURIER_TEST_HELPDESK_TOKEN is not set"}},
		{"unknown placeholder", func(t *testing.T) []string {
			return []string{"--destinations", writeDestinations(t,
				strings.Replace(goodDestinations, "/helpdesk/tickets", "/helpdesk/{ticket}", 1))}
		}, 0, []string{`destination "helpdesk" (line 3)`, "url: unknown placeholder {ticket}"}},
		{"key over the payload", func(t *testing.T) []string {
			f := strings.Replace(goodDestinations, `"dedup": "key"`, `"dedup": "key", "key_field": "/data"`, 1)
			f = strings.Replace(f, `"adapter": "http"`, `"adapter": "http", "body": {"under": "/data/ticket"}`, 1)
			return []string{"--destinations", writeDestinations(t, f)}
		}, 0, []string{`destination "helpdesk"`, "contract.key_field: /data would replace the payload placed at body.under /data/ticket"}},
		{"unreadable TLS file", func(t *testing.T) []string {
			return []string{"--destinations", writeDestinations(t, strings.Replace(goodDestinations, `"contract"`,
				`"tls": {"ca_file": "/nonexistent/partner-ca.pem"}, "contract"`, 1))}
		}, 0, []string{`destination "helpdesk"`, "tls.ca_file", "partner-ca.pem", "no such file"}},
		{"bad log format", func(t *testing.T) []string {
			return []string{"--destinations", writeDestinations(t, goodDestinations), "--log-format", "xml"}
		}, 2, []string{`log format "xml"`}},
		{"stray argument", func(t *testing.T) []string {
			return []string{"--destinations", writeDestinations(t, goodDestinations), "extra"}
		}, 2, []string{`unexpected argument "extra"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runWorker(context.Background(), tc.args(t))
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.NotContains(t, err.Error(), "cannot reach Temporal", "the setup must fail before dialing")
			if tc.code != 0 {
				var ee *cli.ExitError
				require.True(t, errors.As(err, &ee), "want an exit status, got %v", err)
				require.Equal(t, tc.code, ee.Code)
			}
		})
	}
}

// A good file gets as far as Temporal, and says where it looked.
func TestWorkerCommandNamesUnreachableTemporal(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	err := runWorker(context.Background(), []string{"--destinations", writeDestinations(t, goodDestinations)})
	require.ErrorContains(t, err, "cannot reach Temporal at 127.0.0.1:1")
}

// The destinations file may come from COURIER_DESTINATIONS, the one export
// `courier destination status` reads too; --destinations wins over it, and
// a bad file names where it came from.
func TestWorkerCommandReadsDestinationsFromTheEnvironment(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	good := writeDestinations(t, goodDestinations)
	missing := filepath.Join(t.TempDir(), "gone.json")

	t.Setenv(envDestinations, good)
	require.ErrorContains(t, runWorker(context.Background(), nil), "cannot reach Temporal at 127.0.0.1:1",
		"the file from the environment loads")

	t.Setenv(envDestinations, missing)
	require.ErrorContains(t, runWorker(context.Background(), []string{"--destinations", good}), "cannot reach Temporal at 127.0.0.1:1",
		"--destinations wins over the environment")

	err := runWorker(context.Background(), nil)
	for _, want := range []string{"gone.json", "no such file", "fix the file COURIER_DESTINATIONS names"} {
		require.ErrorContains(t, err, want)
	}
	require.NotContains(t, err.Error(), "cannot reach Temporal")
}
