package layout

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProductionImportsNoLab: what a service or a worker links, and the
// whole courier program, holds no lab or test code, and the activities
// never import the workflow package.
func TestProductionImportsNoLab(t *testing.T) {
	const mod = "github.com/abde64c9/courier/"
	lab := []string{"internal/lab", "internal/wftest", "testsuite", "bench", "soak", "sandbox", "devstack", "devserver", "deploy", "webui", "cmd/courier-lab"}
	for pkg, banned := range map[string][]string{
		"./cmd/courier ./courierwf/... ./workflows/... ./worker/... ./starter/... ./contract/... ./destinations/... ./codec/... ./connect/... ./opkey/...": lab,
		"./activities/...": {"workflows", "internal/lab", "testsuite"},
	} {
		args := append([]string{"list", "-deps"}, strings.Fields(pkg)...)
		cmd := exec.Command("go", args...)
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range banned {
				if dep == mod+b || strings.HasPrefix(dep, mod+b+"/") {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
}
