package testsuite

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	sdktest "go.temporal.io/sdk/testsuite"
)

// SeedSuite runs every seed case that fits the Temporal test environment:
// the workflow, the real activities and adapters, and real destinations
// (loopback HTTP to the sandbox, a SQLite file), with fresh ones per case.
type SeedSuite struct {
	suite.Suite
	sdktest.WorkflowTestSuite
}

func TestSeeds(t *testing.T) { suite.Run(t, new(SeedSuite)) }

func (s *SeedSuite) TestEveryCase() {
	for _, c := range Cases() {
		if c.RealOnly {
			continue
		}
		s.Run(c.Seed+"/"+c.Name, func() {
			env, err := NewEnv(s.T().TempDir())
			require.NoError(s.T(), err)
			defer env.Close()
			r := &Run{Env: env, Deliverer: TestEnv{Env: env, Suite: &s.WorkflowTestSuite}, ID: caseID(c)}
			rep := c.Execute(context.Background(), r)
			b, _ := json.MarshalIndent(rep, "", "  ")
			require.True(s.T(), rep.Passed, "%s", b)
		})
	}
}

// TestCaseNamesMatchSeeds: every case id of the seed files is a case here,
// named as the seed names it, and nothing else is.
func TestCaseNamesMatchSeeds(t *testing.T) {
	want := map[string]bool{}
	for _, seed := range []string{SeedFaultInjection, SeedLoopbackHTTP, SeedSQLiteUnique} {
		for _, name := range SeedCaseNames(t, seed) {
			want[seed+"/"+name] = true
		}
	}
	got := map[string]bool{}
	for _, c := range Cases() {
		got[c.Seed+"/"+c.Name] = true
	}
	require.Equal(t, want, got)
	require.Len(t, got, 20)
}
