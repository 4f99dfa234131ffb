package testsuite

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"

	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdktest "go.temporal.io/sdk/testsuite"
)

var sdkVersion = temporal.SDKVersion

// LabReport is faultlab's output, in the spirit of the seed reports.
type LabReport struct {
	Status      string         `json:"status"` // PASS or FAIL
	Mode        string         `json:"mode"`   // testenv or real
	Cases       []Report       `json:"cases"`
	Environment map[string]any `json:"environment"`
}

// RunTestEnv runs every case that the Temporal test environment can hold,
// each against fresh destinations under a temporary folder.
func RunTestEnv(ctx context.Context) (LabReport, error) {
	rep := LabReport{Status: "PASS", Mode: "testenv", Environment: environment()}
	for _, c := range Cases() {
		if c.RealOnly {
			continue
		}
		r, err := runCaseInTestEnv(ctx, c)
		if err != nil {
			return rep, err
		}
		if !r.Passed {
			rep.Status = "FAIL"
		}
		rep.Cases = append(rep.Cases, r)
	}
	return rep, nil
}

func runCaseInTestEnv(ctx context.Context, c Case) (Report, error) {
	dir, err := os.MkdirTemp("", "courier-faultlab-")
	if err != nil {
		return Report{}, err
	}
	defer os.RemoveAll(dir)
	env, err := NewEnv(dir)
	if err != nil {
		return Report{}, err
	}
	defer env.Close()
	suite := &sdktest.WorkflowTestSuite{}
	// Logs go to stderr, warnings up: stdout is the report.
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr,
		&slog.HandlerOptions{Level: slog.LevelWarn}))))
	r := &Run{Env: env, Deliverer: TestEnv{Env: env, Suite: suite}, ID: caseID(c)}
	return c.Execute(ctx, r), nil
}

// caseID makes readable business ids: "<seed case>-<part>".
func caseID(c Case) func(string) string {
	slug := strings.NewReplacer(" ", "-", ":", "").Replace(c.Name)
	return func(base string) string { return fmt.Sprintf("%s-%s", slug, base) }
}

func environment() map[string]any {
	return map[string]any{
		"go":           runtime.Version(),
		"os":           runtime.GOOS,
		"arch":         runtime.GOARCH,
		"cpus":         runtime.NumCPU(),
		"temporal_sdk": sdkVersion,
	}
}
