package devserver

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Makefile builds the same pinned versions that this package runs.
func TestMakefilePinsTheseVersions(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	for name, want := range map[string]string{"TEMPORAL_CLI_VERSION": CLIVersion, "UI_SERVER_VERSION": UIServerVersion} {
		m := regexp.MustCompile(`(?m)^` + name + ` := (\S+)$`).FindSubmatch(b)
		require.NotNil(t, m, "Makefile sets %s", name)
		require.Equal(t, want, string(m[1]), name)
	}
}
