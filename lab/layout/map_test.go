package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// folderCell is a folder as the README's map names it: `path/`.
var folderCell = regexp.MustCompile("`([a-z0-9._/-]+)/`")

// readmeMap is every folder the first column of the README's Layout table
// names, with the line that names it.
func readmeMap(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	folders := map[string]int{}
	inLayout := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			inLayout = strings.TrimSpace(strings.TrimLeft(line, "#")) == "Layout"
			continue
		}
		if !inLayout || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range folderCell.FindAllStringSubmatch(cells[1], -1) {
			folders[m[1]] = i + 1
		}
	}
	require.NotEmpty(t, folders, "README.md has no Layout table naming folders as `path/`")
	return folders
}

// TestReadmeMapMatchesPackages: the README's map of folders names every Go
// package's folder, and every folder it names exists.
func TestReadmeMapMatchesPackages(t *testing.T) {
	named := readmeMap(t)
	var missing []string
	for pkg := range packages(t, "./...") {
		if _, ok := named[pkg]; !ok {
			missing = append(missing, pkg+"/")
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "README.md's Layout table does not name these package folders")
	for folder, line := range named {
		fi, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(folder)))
		if err != nil || !fi.IsDir() {
			t.Errorf("README.md:%d names %s/, which is not a folder", line, folder)
		}
	}
}

// TestTopLevelIsSmall: the top level holds the product's folders, cmd/,
// docs/, deploy/, examples/, internal/, lab/ and the files every Go project
// has; anything else belongs in one of them.
func TestTopLevelIsSmall(t *testing.T) {
	cmd := exec.Command("git", "ls-files")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	require.NoError(t, err, "git ls-files")
	top := map[string]bool{}
	for _, f := range strings.Fields(string(out)) {
		// Dot entries (.ci, .gitignore) are not part of the tree a reader walks.
		if name := strings.SplitN(f, "/", 2)[0]; !strings.HasPrefix(name, ".") {
			top[name] = true
		}
	}
	var names []string
	for name := range top {
		names = append(names, name)
	}
	sort.Strings(names)
	require.LessOrEqual(t, len(names), 22, "the top level holds %d entries: %s", len(names), strings.Join(names, " "))
}
