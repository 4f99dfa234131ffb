package testsuite

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/abde64c9/courier/lab/wftest"
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

// TestHistoriesRecordEveryCase: every recorded set of the fault cases' Delivery
// histories (those the workflows' replay tests replay) has every case here;
// a gate or trust set has the scenarios of its time. Re-record the newest
// set when a case is added.
func TestHistoriesRecordEveryCase(t *testing.T) {
	dir := filepath.Join("..", "..", filepath.FromSlash(wftest.HistoriesDir))
	indexes, err := filepath.Glob(filepath.Join(dir, "*", wftest.HistoryIndexFile))
	require.NoError(t, err)
	require.NotEmpty(t, indexes)
	seeds := []string{SeedFaultInjection, SeedLoopbackHTTP, SeedSQLiteUnique}
	for _, idx := range indexes {
		set := filepath.Base(filepath.Dir(idx))
		b, err := os.ReadFile(idx)
		require.NoError(t, err)
		var index []wftest.RecordedCase
		require.NoError(t, json.Unmarshal(b, &index))
		recorded := map[string]bool{}
		for _, rc := range index {
			recorded[rc.Seed+"/"+rc.Case] = true
		}
		if !slices.ContainsFunc(index, func(rc wftest.RecordedCase) bool { return slices.Contains(seeds, rc.Seed) }) {
			continue // a gate or trust set
		}
		for _, c := range Cases() {
			require.True(t, recorded[c.Seed+"/"+c.Name], "%s: case %q has no recorded history; record with: go run ./lab/testsuite/record -set %s", set, c.Name, set)
		}
	}
}
