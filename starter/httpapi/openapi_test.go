package httpapi

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// documented is the committed OpenAPI document's routes ("METHOD /path")
// and each one's statuses.
func documented(t *testing.T) map[string][]int {
	t.Helper()
	committed, err := os.ReadFile("openapi.json")
	require.NoError(t, err)
	require.Equal(t, string(committed), string(OpenAPI), "the embedded document is the committed one")
	var doc struct {
		OpenAPI string                                                   `json:"openapi"`
		Paths   map[string]map[string]struct{ Responses map[string]any } `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(OpenAPI, &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3.1."), "OpenAPI 3.1, not %s", doc.OpenAPI)
	out := map[string][]int{}
	for path, methods := range doc.Paths {
		for method, op := range methods {
			var codes []int
			for code := range op.Responses {
				n, err := strconv.Atoi(code)
				require.NoError(t, err, "%s %s: response %q", method, path, code)
				codes = append(codes, n)
			}
			slices.Sort(codes)
			out[strings.ToUpper(method)+" "+path] = codes
		}
	}
	return out
}

// TestOpenAPIMatchesRoutes: every route the server registers is documented
// with exactly its statuses, and every documented route is registered.
// The real-server test checks each status answered is a documented one.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	s, err := New(Options{Config: Config{Callers: []Caller{{Tenant: "acme", TokenSHA256: HashToken("t")}}}})
	require.NoError(t, err)
	served := map[string][]int{}
	for _, rt := range s.routes() {
		codes := slices.Clone(rt.statuses)
		slices.Sort(codes)
		served[rt.pattern()] = codes
	}
	doc := documented(t)
	require.Equal(t, slices.Sorted(maps.Keys(served)), slices.Sorted(maps.Keys(doc)), "routes served and documented")
	require.Equal(t, served, doc, "statuses served and documented")
}
