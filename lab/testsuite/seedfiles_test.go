package testsuite

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// SeedCaseNames reads a seed report's case ids from the shared seeds folder
// (or testdata/seeds, a copy kept with the tests).
func SeedCaseNames(t *testing.T, seed string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "seeds", seed+".json"))
	require.NoError(t, err)
	var f struct {
		Cases []struct {
			Name string `json:"name"`
			ID   string `json:"id"`
			Case string `json:"case"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	var names []string
	for _, c := range f.Cases {
		names = append(names, c.Name+c.ID+c.Case)
	}
	return names
}
