package workflows_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestWorkflowsLinkNoIO: the deterministic workflow code, this package and
// the gate's (package gate; its client side is gate/gateclient, not
// checked), links none of Courier's packages that reach the network, the
// file system or regexps (the destinations file's parsing stays in package
// destinations).
func TestWorkflowsLinkNoIO(t *testing.T) {
	const mod = "github.com/abde64c9/courier/"
	banned := []string{"net/http", "os", "regexp"}
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, ".")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./workflows ./gate: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		// The Temporal SDK links os, regexp and net/http itself: only Courier's own packages are checked.
		if len(fields) == 0 || !strings.HasPrefix(fields[0]+"/", mod) {
			continue
		}
		for _, imp := range fields[1:] {
			for _, b := range banned {
				if imp == b {
					t.Errorf("%s imports %s", fields[0], imp)
				}
			}
		}
	}
}
