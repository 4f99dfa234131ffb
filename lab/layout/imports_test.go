package layout

import (
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	module   = "github.com/abde64c9/courier"
	repoRoot = "../.."
)

// packages are the module's packages (paths relative to its root) with
// their imports within the module, tests left out: what a build links.
func packages(t *testing.T, patterns ...string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-f", `{{.ImportPath}} {{join .Imports " "}}`}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s", strings.Join(patterns, " "))
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := local(fields[0])
		pkgs[pkg] = nil
		for _, imp := range fields[1:] {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				pkgs[pkg] = append(pkgs[pkg], local(imp))
			}
		}
	}
	return pkgs
}

func local(importPath string) string {
	if importPath == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module+"/")
}

// under says whether pkg is folder or inside it.
func under(pkg, folder string) bool { return pkg == folder || strings.HasPrefix(pkg, folder+"/") }

// deps are the module's packages pkgs link, themselves included.
func deps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...)
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	require.NoError(t, err, "go list -deps %s", strings.Join(pkgs, " "))
	var mine []string
	for _, dep := range strings.Fields(string(out)) {
		if dep == module || strings.HasPrefix(dep, module+"/") {
			mine = append(mine, local(dep))
		}
	}
	return mine
}

// TestProductLinksNoLab: what a service or a worker links, and the whole
// courier program, holds no lab code; the activities never import the
// workflow package.
func TestProductLinksNoLab(t *testing.T) {
	product := []string{"./cmd/courier", "./courierwf/...", "./workflows/...", "./worker/...", "./starter/...",
		"./contract/...", "./destination/...", "./destinations/...", "./connect/...", "./opkey/...", "./gate/...",
		"./reviewproof/...", "./activities/...", "./internal/..."}
	for _, dep := range deps(t, product...) {
		if under(dep, "lab") || under(dep, "cmd/courier-lab") {
			t.Errorf("the product links %s, which is the lab's", dep)
		}
	}
	for _, dep := range deps(t, "./activities/...") {
		if under(dep, "workflows") {
			t.Errorf("the activities link %s: the workflows call the activities, not the other way", dep)
		}
	}
}

// TestInternalImportsOnlyInternal: internal/ holds what the product shares
// from below, so nothing in it reaches back up.
func TestInternalImportsOnlyInternal(t *testing.T) {
	for pkg, imports := range packages(t, "./internal/...") {
		for _, imp := range imports {
			if !under(imp, "internal") {
				t.Errorf("%s imports %s: internal/ may import only internal/", pkg, imp)
			}
		}
	}
}

// TestWorkerSideApartFromStarter: the starter is what services import;
// what the worker runs for other workflows (the Nexus handler, the join
// activity) lives in worker/callers, so the worker's wiring does not import
// the starter, and the starter none of the worker's side.
func TestWorkerSideApartFromStarter(t *testing.T) {
	pkgs := packages(t, "./...")
	require.NotContains(t, pkgs["worker"], "starter")
	for _, imp := range pkgs["starter"] {
		require.False(t, under(imp, "worker"), "starter imports %s", imp)
	}
}

// TestFoldersImportDownward: drawn with each top-level folder as one room,
// no two folders import each other, directly or around a circle, so every
// arrow runs down.
func TestFoldersImportDownward(t *testing.T) {
	top := func(pkg string) string { return strings.SplitN(pkg, "/", 2)[0] }
	arrows := map[string][]string{}
	for pkg, imports := range packages(t, "./...") {
		for _, imp := range imports {
			if from, to := top(pkg), top(imp); from != to && !slices.Contains(arrows[from], to) {
				arrows[from] = append(arrows[from], to)
			}
		}
	}
	// A depth-first walk finds any circle.
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var walk func(folder string, path []string)
	walk = func(folder string, path []string) {
		switch state[folder] {
		case open:
			i := slices.Index(path, folder)
			t.Errorf("folders import each other: %s", strings.Join(append(path[i:], folder), " -> "))
			return
		case done:
			return
		}
		state[folder] = open
		next := arrows[folder]
		sort.Strings(next)
		for _, to := range next {
			walk(to, append(path, folder))
		}
		state[folder] = done
	}
	var folders []string
	for f := range arrows {
		folders = append(folders, f)
	}
	sort.Strings(folders)
	for _, f := range folders {
		walk(f, nil)
	}
}
