package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devstack"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// widths are the window widths an operator reads the web UI at: a laptop's
// and a desktop's.
var widths = []int64{1280, 1920}

// Every line of a delivery's summary and details, parked, held or decided,
// and of a destination's gate, reads without scrolling sideways or inside
// its frame, at each width. The review command shown on the parked page,
// pasted as shown into a shell, is refused; filled in, it decides.
func TestDetailsFitInTheBrowser(t *testing.T) {
	chromium := findChromium(t)
	ctx, courier := lab.RealTest(t, 10*time.Minute)
	s := startDevStack(t, ctx, courier)
	st := starter.New(s.Client())
	_, parked, err := lab.CreatedAndParked(ctx, st, s.Sandbox(), [2]string{"fit-1", "fit-2"})
	require.NoError(t, err)

	// A destination paused by an operator, and a delivery held at it.
	const paused = "crm"
	_, err = st.Pause(ctx, paused, gate.PauseRequest{Reason: "partner maintenance INC-7, back after the window", By: "fit-test"})
	require.NoError(t, err)
	waitForMetric(t, ctx, s.MetricsURL(), fmt.Sprintf(`courier_destination_state{destination=%q,state=%q} 1`, paused, gate.Paused))
	h, err := st.Start(ctx, lab.TicketInput(paused, "fit-3"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		d, err := st.Status(ctx, h.Key)
		return err == nil && d.State == workflows.StatePaused
	}, time.Minute, 250*time.Millisecond, "the delivery to the paused destination is held")

	views := readmeViews(t)
	for name, want := range map[string]string{
		"awaiting review (parked)":       workflows.WorkflowID(parked.Key),
		"held (paused, or breaker open)": workflows.WorkflowID(h.Key),
		"destinations (their gates)":     gate.WorkflowID(paused),
	} {
		require.Contains(t, views, name, "docs/reviewing.md's saved views")
		require.Eventually(t, func() bool {
			ids, err := listIDs(ctx, s, views[name])
			return err == nil && slices.Contains(ids, want)
		}, time.Minute, 500*time.Millisecond, "docs/reviewing.md's view %q lists %s", name, want)
	}
	for name, q := range views {
		_, err := listIDs(ctx, s, q)
		require.NoError(t, err, "docs/reviewing.md's view %q is a query the server takes: %s", name, q)
	}

	b := openBrowser(t, ctx, chromium)
	pages := []struct{ name, wid, shows string }{
		{"parked", workflows.WorkflowID(parked.Key), "cannot deduplicate"},
		{"held", workflows.WorkflowID(h.Key), "partner maintenance"},
		{"gate", gate.WorkflowID(paused), "partner maintenance"},
	}
	for _, w := range widths {
		for _, p := range pages {
			b.fits(s, w, p.name, p.wid, p.shows)
		}
	}

	// The parked page's command, as a person copies it from the details.
	b.openDetails(s, 1280, workflows.WorkflowID(parked.Key), "cannot deduplicate")
	shown := b.eval(`((f) => {
		const pre = [...f.contentDocument.querySelectorAll("pre")].find(p => p.innerText.includes("--decision delivered"));
		return pre ? pre.innerText : "";
	})((` + detailsFrameJS + `)())`)
	require.Contains(t, shown, "courier review "+parked.Key)
	require.Contains(t, shown, "<ID-YOU-FOUND>")
	var command string
	for _, c := range strings.Split(shown, "\n\n") {
		if strings.Contains(c, "--decision delivered") {
			command = c
		}
	}
	require.Contains(t, command, "--resource-id <ID-YOU-FOUND>", "the delivered command, whole: %q", shown)
	t.Logf("the command as shown:\n%s", command)

	out, err := paste(t, courier, s, command)
	require.Error(t, err, "the shell refuses the placeholder: %s", out)
	require.Contains(t, out, "ID-YOU-FOUND: No such file or directory")
	d, err := st.Status(ctx, parked.Key)
	require.NoError(t, err)
	require.Equal(t, workflows.StateAwaitingReview, d.State, "the refused paste decided nothing")

	recs, err := s.Sandbox().Records(lab.DestLegacy)
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	ticket := recs[len(recs)-1].TicketID
	filled := strings.NewReplacer("<ID-YOU-FOUND>", ticket, "<YOUR-NAME>", "fit-test").Replace(command)
	out, err = paste(t, courier, s, filled)
	require.NoError(t, err, "the filled-in command decides: %s", out)
	done, err := st.Wait(ctx, parked.Key)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusDeliveredByReview, done.Status)
	require.Equal(t, ticket, done.Receipt.ResourceID)

	for _, w := range widths {
		b.fits(s, w, "decided", workflows.WorkflowID(parked.Key), "delivered by review")
	}
}

// readmeViews are the saved views docs/reviewing.md's table gives, by name.
func readmeViews(t *testing.T) map[string]string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "reviewing.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(readme), "| view | query |\n")
	require.True(t, ok, "docs/reviewing.md has a table of saved views")
	views := map[string]string{}
	for line := range strings.Lines(table) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 4 {
			break
		}
		name, q := strings.TrimSpace(cells[1]), strings.Trim(strings.TrimSpace(cells[2]), "`")
		if !strings.HasPrefix(name, "---") {
			views[name] = q
		}
	}
	require.NotEmpty(t, views)
	return views
}

// listIDs lists the workflow IDs a visibility query finds.
func listIDs(ctx context.Context, s *devstack.Stack, query string) ([]string, error) {
	resp, err := s.Client().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: devstack.Namespace, Query: query})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range resp.GetExecutions() {
		ids = append(ids, e.GetExecution().GetWorkflowId())
	}
	return ids, nil
}

// paste runs command in bash as a person pastes it, with the courier under
// test on PATH and the dev stack's Temporal in the environment.
func paste(t *testing.T, courier string, s *devstack.Stack, command string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(courier)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TEMPORAL_ADDRESS="+s.Address(), "TEMPORAL_NAMESPACE="+devstack.Namespace, "LC_ALL=C",
		// As the banner exports it: legacy takes signed decisions.
		"COURIER_REVIEWER_KEY="+s.ReviewerKeyPath())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// openDetails opens the workflow's page at width w on its User Metadata
// tab and waits for its current details to show the text shows.
func (b *browser) openDetails(s *devstack.Stack, w int64, wid, shows string) {
	b.t.Helper()
	b.do(fmt.Sprintf("a window %d px wide", w), chromedp.EmulateViewport(w, 1000))
	b.navigate(s.UIURL() + "/namespaces/" + devstack.Namespace + "/workflows/" + wid)
	b.click("the User Metadata tab", visible(metadataTab))
	b.waitFor("the current details of "+wid, true, detailsJS, func(s string) bool { return strings.Contains(s, shows) })
}

// fits opens the page and checks that every line of its summary and
// details frames is in sight, keeping a screenshot.
func (b *browser) fits(s *devstack.Stack, w int64, name, wid, shows string) {
	b.t.Helper()
	b.openDetails(s, w, wid, shows)
	// The frames size themselves to their content once it has loaded.
	seen := b.waitForStill(name+"'s frames laid out", fitJS)
	var got struct {
		Frames int      `json:"frames"`
		Cut    []string `json:"cut"`
	}
	require.NoError(b.t, json.Unmarshal([]byte(seen), &got))
	b.shot(fmt.Sprintf("%s-%d", name, w))
	require.GreaterOrEqual(b.t, got.Frames, 2, "%s at %d px: the summary and the details show", name, w)
	assert.Empty(b.t, got.Cut, "%s at %d px: lines cut off", name, w)
}

// fitJS measures each visible summary and details frame (rendered
// Markdown, each in a frame of its own): the box it shows, narrowed by
// every ancestor that clips or scrolls sideways and by the window, and
// every line of text inside it. A line outside that box is cut: it reads
// only by scrolling sideways, or inside the frame, or not at all.
const fitJS = `(() => {
	const frames = [...document.querySelectorAll('iframe[title="output"]')].filter(f => f.checkVisibility());
	const cut = [];
	for (const f of frames) {
		const d = f.contentDocument;
		if (!d || !d.body) { cut.push("a frame with no document"); continue; }
		const fr = f.getBoundingClientRect();
		const x0 = fr.left + f.clientLeft, y0 = fr.top + f.clientTop;
		let left = x0, right = x0 + f.clientWidth, top = y0, bottom = y0 + f.clientHeight;
		for (let p = f.parentElement; p; p = p.parentElement) {
			const cs = getComputedStyle(p), r = p.getBoundingClientRect();
			if (cs.overflowX !== "visible") { left = Math.max(left, r.left); right = Math.min(right, r.right); }
			if (cs.overflowY === "hidden" || cs.overflowY === "clip") { top = Math.max(top, r.top); bottom = Math.min(bottom, r.bottom); }
		}
		right = Math.min(right, window.innerWidth);
		const walk = d.createTreeWalker(d.body, NodeFilter.SHOW_TEXT);
		for (let n = walk.nextNode(); n; n = walk.nextNode()) {
			if (!n.textContent.trim()) continue;
			const range = d.createRange();
			range.selectNodeContents(n);
			for (const r of range.getClientRects()) {
				if (!r.width) continue;
				const what = JSON.stringify(n.textContent.trim().slice(0, 60));
				if (x0 + r.right > right + 1 || x0 + r.left < left - 1) {
					cut.push("sideways (" + Math.round(x0 + r.right - right) + " px): " + what);
					break;
				}
				if (y0 + r.bottom > bottom + 1) {
					cut.push("below (" + Math.round(y0 + r.bottom - bottom) + " px): " + what);
					break;
				}
			}
		}
	}
	return JSON.stringify({frames: frames.length, cut});
})()`

// waitForMetric waits until the worker's metrics have the line.
func waitForMetric(t *testing.T, ctx context.Context, url, line string) {
	t.Helper()
	require.NotEmpty(t, url, "the dev stack serves the worker's metrics")
	require.Eventually(t, func() bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return err == nil && strings.Contains(string(body), line)
	}, time.Minute, 250*time.Millisecond, "the worker's metrics show %s", line)
}
