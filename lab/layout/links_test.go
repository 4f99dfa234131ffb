package layout

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// readmeMaxLines is how long the README may grow: it is a guide, and the
// manual is in docs/.
const readmeMaxLines = 350

// link is one markdown link [text](target) of a page.
type link struct {
	file   string // the linking page, relative to the root
	line   int
	text   string
	target string
}

func (l link) String() string {
	return fmt.Sprintf("%s:%d: [%s](%s)", l.file, l.line, l.text, l.target)
}

// pages are README.md and every markdown page in docs/, relative to the root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "docs/ has pages")
	out := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(repoRoot, d)
		require.NoError(t, err)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// readPage reads a page by its path from the root.
func readPage(t *testing.T, page string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(page)))
	require.NoError(t, err)
	return string(b)
}

// proseLines are a page's lines outside fenced code blocks, by line number
// (1-based); lines inside a fence, and the fences themselves, are left out.
func proseLines(text string) map[int]string {
	out := map[int]string{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if m := fenceOpen.FindString(trimmed); m != "" {
			fence = m
			continue
		}
		out[i+1] = line
	}
	return out
}

var fenceOpen = regexp.MustCompile("^(```+|~~~+)")

// withoutCodeSpans blanks inline code spans (text between two equal runs
// of backticks), whose brackets are code, not links. A link whose text is
// a code span keeps its brackets: [`starter`](x) becomes [](x).
func withoutCodeSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		n := 0
		for i+n < len(line) && line[i+n] == '`' {
			n++
		}
		end := closingRun(line, i+n, n)
		if end < 0 {
			b.WriteString(line[i : i+n])
			i += n
			continue
		}
		i = end + n
	}
	return b.String()
}

// closingRun is where a run of exactly n backticks starts at or after
// from, or -1.
func closingRun(line string, from, n int) int {
	for j := from; j < len(line); {
		if line[j] != '`' {
			j++
			continue
		}
		k := 0
		for j+k < len(line) && line[j+k] == '`' {
			k++
		}
		if k == n {
			return j
		}
		j += k
	}
	return -1
}

var linkRE = regexp.MustCompile(`\[([^\[\]]*)\]\(\s*<?([^()\s<>]+)>?(?:\s+"[^"]*")?\s*\)`)

// links are a page's markdown links outside code.
func links(page, text string) []link {
	lines := proseLines(text)
	var out []link
	for n := 1; n <= strings.Count(text, "\n")+1; n++ {
		line, ok := lines[n]
		if !ok {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(withoutCodeSpans(line), -1) {
			out = append(out, link{file: page, line: n, text: m[1], target: m[2]})
		}
	}
	return out
}

// external says whether a target leaves the repository.
func external(target string) bool {
	lower := strings.ToLower(target)
	for _, scheme := range []string{"http:", "https:", "mailto:"} {
		if strings.HasPrefix(lower, scheme) {
			return true
		}
	}
	return false
}

var headingRE = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)

// headingLinkRE is a link inside a heading, whose text is what shows.
var headingLinkRE = regexp.MustCompile(`!?\[([^\[\]]*)\]\([^()]*\)`)

// anchors are the GitHub-style anchors of a page's headings: lowercase,
// characters other than letters, digits, spaces, hyphens and underscores
// dropped, spaces made hyphens; a repeated heading gets -1, -2, ...
func anchors(text string) map[string]bool {
	lines := proseLines(text)
	seen := map[string]int{}
	out := map[string]bool{}
	for n := 1; n <= strings.Count(text, "\n")+1; n++ {
		line, ok := lines[n]
		if !ok {
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		base := slug(m[1])
		s := base
		if k := seen[base]; k > 0 {
			s = fmt.Sprintf("%s-%d", base, k)
		}
		seen[base]++
		out[s] = true
	}
	return out
}

// slug is a heading's anchor, from its text as GitHub shows it.
func slug(heading string) string {
	heading = headingLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// resolve is a relative link's path from the root, and its anchor.
func resolve(l link) (path, anchor string, err error) {
	target, anchor, _ := strings.Cut(l.target, "#")
	if anchor != "" {
		if anchor, err = url.PathUnescape(anchor); err != nil {
			return "", "", err
		}
	}
	if target == "" {
		return l.file, anchor, nil
	}
	if target, err = url.PathUnescape(target); err != nil {
		return "", "", err
	}
	if strings.HasPrefix(target, "/") {
		return "", "", fmt.Errorf("absolute path: links between pages are relative")
	}
	return filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(l.file), target))), anchor, nil
}

// TestLinksResolve: every relative link of the README and of docs/ names a
// file or folder that exists, and every #anchor a heading of its page.
func TestLinksResolve(t *testing.T) {
	texts := map[string]string{}
	read := func(page string) (string, error) {
		if text, ok := texts[page]; ok {
			return text, nil
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(page)))
		if err != nil {
			return "", err
		}
		texts[page] = string(b)
		return texts[page], nil
	}
	checked := 0
	for _, page := range pages(t) {
		text := readPage(t, page)
		texts[page] = text
		for _, l := range links(page, text) {
			if external(l.target) {
				continue
			}
			checked++
			path, anchor, err := resolve(l)
			if err != nil {
				t.Errorf("%s: %v", l, err)
				continue
			}
			if path == ".." || strings.HasPrefix(path, "../") {
				t.Errorf("%s: leaves the repository", l)
				continue
			}
			info, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(path)))
			if err != nil {
				t.Errorf("%s: no file or folder %s", l, path)
				continue
			}
			if anchor == "" {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(path, ".md") {
				t.Errorf("%s: #%s in %s, which is not a markdown page", l, anchor, path)
				continue
			}
			target, err := read(path)
			if err != nil {
				t.Errorf("%s: %v", l, err)
				continue
			}
			if !anchors(target)[anchor] {
				t.Errorf("%s: %s has no heading #%s", l, path, anchor)
			}
		}
	}
	require.NotZero(t, checked, "the pages have relative links to check")
}

// TestReadmeIsAGuide: the README stays a guide; the manual is in docs/.
func TestReadmeIsAGuide(t *testing.T) {
	text := strings.TrimSuffix(readPage(t, "README.md"), "\n")
	n := strings.Count(text, "\n") + 1
	require.LessOrEqual(t, n, readmeMaxLines,
		"README.md has %d lines, at most %d: move reference material into a page of docs/ and link it", n, readmeMaxLines)
}

// TestDocsIndexLinksEveryPage: docs/README.md, linked from the README, links
// every file in docs/.
func TestDocsIndexLinksEveryPage(t *testing.T) {
	linked := func(page string) map[string]bool {
		out := map[string]bool{}
		for _, l := range links(page, readPage(t, page)) {
			if external(l.target) {
				continue
			}
			if path, _, err := resolve(l); err == nil {
				out[path] = true
			}
		}
		return out
	}
	require.True(t, linked("README.md")["docs/README.md"], "README.md links the docs index, docs/README.md")

	index := linked("docs/README.md")
	entries, err := os.ReadDir(filepath.Join(repoRoot, "docs"))
	require.NoError(t, err)
	for _, e := range entries {
		page := "docs/" + e.Name()
		if page == "docs/README.md" {
			continue
		}
		if !index[page] {
			t.Errorf("docs/README.md does not link %s: add it to the index, with who it is for", page)
		}
	}
}

// TestLinkChecker: the checker's own rules, on a page made up for it.
func TestLinkChecker(t *testing.T) {
	page := strings.Join([]string{
		"# Title",
		"## Signed decisions: reviewers with keys",
		"### Operation `deliver`",
		"## Health, and several frontends",
		"## Title",
		"## Title",
		"See [a](b.md#x) and [`code`](../c/) and `[not](a link)` and [web](https://example.com).",
		"```sh",
		"# not a heading [nor](a-link.md)",
		"```",
		"[last](#title-2)",
	}, "\n")
	got := links("p.md", page)
	var targets []string
	for _, l := range got {
		targets = append(targets, l.target)
	}
	require.Equal(t, []string{"b.md#x", "../c/", "https://example.com", "#title-2"}, targets)
	require.Equal(t, 7, got[0].line)

	a := anchors(page)
	for _, want := range []string{"title", "title-1", "title-2", "signed-decisions-reviewers-with-keys", "operation-deliver", "health-and-several-frontends"} {
		require.True(t, a[want], want)
	}
	require.False(t, a["not-a-heading-nor"])

	path, anchor, err := resolve(link{file: "docs/p.md", target: "../README.md#why"})
	require.NoError(t, err)
	require.Equal(t, "README.md", path)
	require.Equal(t, "why", anchor)
}
