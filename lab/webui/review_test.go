package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devstack"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// What the test finds in the web UI 2.42's own markup (data-testid, ids
// and aria attributes of its components). The workflow page renders its
// actions twice, one copy hidden by the layout, so a step acts on the
// copy a person sees.
const (
	rowSel      = `tr[data-testid="workflows-summary-configurable-table-row"]`
	columnsSel  = `[data-testid="workflows-summary-table-configuration-button"]`
	drawerSel   = `#workflows-table-configuration-drawer`
	moreActions = `button[aria-controls="workflow-actions"]`
	updateItem  = `[data-testid="update-button"]`
	// updateModal is the Send an Update dialog that is open.
	updateModal = `dialog[data-testid="update-confirmation-modal"][open]`
	metadataTab = `#user-metadata-tab`
	// columnsKey and viewsKey are the local-storage entries where the UI
	// keeps each namespace's list columns and saved views: this browser's,
	// not the server's.
	columnsKey = "namespace-workflow-table-columns"
	viewsKey   = "saved-workflow-queries"
	// savedView names the awaiting-review list among the saved views.
	savedView = "Awaiting review"
)

// courierColumns are the search attributes an operator adds to the list.
var courierColumns = []string{
	workflows.SAState.GetName(), workflows.SADestination.GetName(),
	workflows.SAOperation.GetName(), workflows.SABusinessID.GetName(),
}

// A delivery parked for review at a destination that cannot deduplicate
// is found, read and decided in the web UI as an operator would, in a real
// browser: the awaiting-review list (with Courier's columns added through
// the column chooser), the delivery's current details, and More Actions →
// Send an Update. The list and the status query then show the decision.
func TestReviewByUpdateInTheBrowser(t *testing.T) {
	chromium := findChromium(t)
	began := time.Now()
	ctx, courier := lab.RealTest(t, 8*time.Minute)
	s := startDevStack(t, ctx, courier)
	st := starter.New(s.Client())
	created, parked, err := lab.CreatedAndParked(ctx, st, s.Sandbox(), [2]string{"webui-1", "webui-2"})
	require.NoError(t, err)
	wid, other := workflows.WorkflowID(parked.Key), workflows.WorkflowID(created.Key)
	b := openBrowser(t, ctx, chromium)
	t.Logf("stack up and delivery parked in %s", time.Since(began).Round(time.Millisecond))

	// a. The awaiting-review list has the parked delivery, and only it. The
	// link's savedQuery keeps the list as a view of this browser's own.
	b.navigate(s.AwaitingReviewURL() + "&savedQuery=" + url.QueryEscape(savedView))
	b.waitFor("the parked delivery's row in the awaiting_review list", true, rowJS(wid), nonEmpty)
	require.Empty(t, b.eval(rowJS(other)), "the created delivery is not awaiting review, so the filter leaves it out")
	var views map[string][]struct{ Name, Query string }
	require.NoError(t, json.Unmarshal([]byte(b.eval(`localStorage.getItem("`+viewsKey+`") || ""`)), &views))
	require.Len(t, views[devstack.Namespace], 1, "views: %v", views)
	require.Equal(t, savedView, views[devstack.Namespace][0].Name)
	require.Equal(t, `CourierState="awaiting_review"`, views[devstack.Namespace][0].Query)
	require.Contains(t, b.eval(`document.body.innerText`), savedView, "the Saved Views panel lists the view")
	b.shot("awaiting-review-list")

	// Courier's search attributes as columns, added the operator's way.
	b.click("the Configure Columns button", visible(columnsSel))
	for _, c := range courierColumns {
		b.click("add the "+c+" column", visible(fmt.Sprintf(`%s [data-testid="orderable-list-item-%s-add-button"]`, drawerSel, c)))
		b.waitFor(c+" among the columns in view", false,
			fmt.Sprintf(`document.querySelector('%s [data-testid="orderable-list-item-%s-remove-button"]') ? "in view" : ""`, drawerSel, c), nonEmpty)
	}
	b.shot("column-chooser")
	b.click("close the column chooser", visible(drawerSel+` [data-testid="drawer-close-button"]`))
	b.waitFor("the column chooser closed", false, `document.querySelector('`+drawerSel+`') ? "" : "closed"`, nonEmpty)
	cells := b.row(wid)
	require.Equal(t, string(workflows.StateAwaitingReview), cells[workflows.SAState.GetName()], "row: %v", cells)
	require.Equal(t, lab.DestLegacy, cells[workflows.SADestination.GetName()], "row: %v", cells)
	require.Equal(t, "create-ticket", cells[workflows.SAOperation.GetName()], "row: %v", cells)
	require.Equal(t, "webui-2", cells[workflows.SABusinessID.GetName()], "row: %v", cells)
	// The columns are this browser's own: its local storage keeps them per
	// namespace, as a list of labels.
	var stored map[string][]struct {
		Label string `json:"label"`
	}
	require.NoError(t, json.Unmarshal([]byte(b.eval(`localStorage.getItem("`+columnsKey+`") || ""`)), &stored))
	var labels []string
	for _, c := range stored[devstack.Namespace] {
		labels = append(labels, c.Label)
	}
	require.Equal(t, append([]string{"Status", "Workflow ID", "Run ID", "Type", "Start", "End"}, courierColumns...), labels)
	b.showColumn(workflows.SABusinessID.GetName())
	b.shot("awaiting-review-list-courier-columns")

	// b. Its page: the current details say why it waits and how to decide.
	b.click("the delivery's row", visible(rowSel+` a[href*="/workflows/`+wid+`/"]`))
	b.click("the User Metadata tab", visible(metadataTab))
	before := b.waitFor("the current details with the evidence and the signing command", false, detailsJS,
		func(s string) bool {
			return strings.Contains(s, "cannot deduplicate") && strings.Contains(s, "--print")
		})
	require.Contains(t, before, "courier review "+parked.Key, "the details give the review command with the real key")
	require.Contains(t, before, "reviewers sign their decisions", "the dev stack's legacy asks for proofs")
	b.shot("parked-details")

	// c. Decide it through the UI's own Send an Update dialog, with the
	// signed decision the details' command prints.
	decision := printDecision(t, ctx, courier, s, parked.Key,
		"--decision", "retry", "--reviewer", "ui-test", "--note", "checked in the browser")
	b.click("More Actions", visible(moreActions))
	b.waitFor("the More Actions menu", false, visible(updateItem)+` ? "open" : ""`, nonEmpty)
	require.Empty(t, b.eval(`document.querySelector('[data-testid="start-workflow-button"]') ? "offered" : ""`),
		"Courier's UI settings leave out Start Workflow Like This One")
	b.click("Send an Update", visible(updateItem))
	b.waitFor("the Send an Update dialog", false, `document.querySelector('`+updateModal+`') ? "open" : ""`, nonEmpty)
	if b.eval(inModal(`[data-testid="update-select-button"]`)+` ? "select" : ""`) != "" {
		// The worker reports the workflow's updates: pick review from them.
		b.click("the update name chooser", inModal(`[data-testid="update-select-button"]`))
		// An option reads its name, then the handler's description.
		b.click("the review update", fmt.Sprintf(`[...document.querySelectorAll('%s li[role="option"]')].find(o => o.innerText.trim().split("\n")[0].trim() === %q)`,
			updateModal, workflows.UpdateReview))
	} else {
		b.click("the update name", inModal(`#update-name`))
		b.do("name the review update", chromedp.SendKeys(chromedp.CSS(updateModal+` #update-name`), workflows.UpdateReview))
	}
	b.click("the update's data editor", inModal(`.cm-content`))
	b.do("type the decision", chromedp.SendKeys(chromedp.CSS(updateModal+` .cm-content`), decision))
	// Leaving the editor formats the JSON over several lines and the dialog
	// grows: a click on Submit straight from the editor lands where the
	// button was. Tab leaves it (the editor binds no Tab) and the dialog
	// settles, as a person sees it.
	b.do("leave the editor", chromedp.KeyEvent("\t"))
	b.waitFor("the editor left", false, inModal(`.cm-content`)+`.contains(document.activeElement) ? "" : "left"`, nonEmpty)
	b.waitForStill("the dialog settled", inModal(`[data-testid="confirm-modal-button"]`)+`.getBoundingClientRect().bottom + ""`)
	typed := b.eval(inModal(`.cm-content`) + `.innerText`)
	var got, want map[string]any
	require.NoError(t, json.Unmarshal([]byte(typed), &got), "the editor holds JSON: %q", typed)
	require.NoError(t, json.Unmarshal([]byte(decision), &want))
	require.Equal(t, want, got, "the editor holds the decision as typed")
	require.Equal(t, workflows.UpdateReview, b.eval(`(`+inModal(`#update-select`)+` || `+inModal(`#update-name`)+`).value`))
	b.shot("send-update-dialog")
	b.click("Submit", inModal(`[data-testid="confirm-modal-button"]`))
	b.waitFor("the UI's update-successful notice", false, `document.body.innerText`,
		func(s string) bool { return strings.Contains(s, "Update successful") })
	b.shot("update-successful")

	// d. The decision shows in the status query, the details and the list.
	done, err := st.Wait(ctx, parked.Key)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCreated, done.Status, "the retry delivered it")
	require.NotNil(t, done.Review)
	i := slices.IndexFunc(done.Review.Decisions, func(r workflows.ReviewRecord) bool { return r.Accepted })
	require.GreaterOrEqual(t, i, 0, "an accepted decision: %+v", done.Review.Decisions)
	rec := done.Review.Decisions[i]
	require.Equal(t, "ui-test", rec.Reviewer)
	require.Equal(t, devstack.ReviewerName, rec.Principal, "the proof says who decided")
	require.Equal(t, "update", rec.Via)
	require.Equal(t, workflows.DecisionRetry, rec.Decision)
	require.Equal(t, "checked in the browser", rec.Note)

	b.do("reload the delivery's page", chromedp.Reload())
	b.waitFor("the current details of the delivered delivery", true, detailsJS, func(s string) bool {
		return strings.Contains(s, string(workflows.StatusCreated)) && !strings.Contains(s, "--print")
	})
	require.Equal(t, "disabled", b.eval(`((r) => r ? (r.disabled ? "disabled" : "enabled") : "absent")(
		[...document.querySelectorAll("button")].find(e => e.checkVisibility() && e.innerText.trim() === "Reset"))`),
		"Courier's UI settings turn Reset off")
	b.shot("decided-details")

	b.navigate(s.AwaitingReviewURL())
	// It was the only one waiting: the list loads empty.
	b.waitFor("the awaiting_review list without the decided delivery", true,
		`(`+rowJS(wid)+` ? "listed\n" : "") + document.body.innerText`,
		func(s string) bool { return strings.Contains(s, "No Results") && !strings.HasPrefix(s, "listed") })
	b.shot("awaiting-review-list-after")

	b.navigate(devstack.ListURL(s.UIURL(), fmt.Sprintf("WorkflowId=%q", wid)))
	b.waitFor("the decided delivery's row showing its new CourierState", true, rowJS(wid),
		func(s string) bool { return strings.Contains(s, string(workflows.StatusCreated)) })
	cells = b.row(wid)
	require.Equal(t, string(workflows.StatusCreated), cells[workflows.SAState.GetName()], "row: %v", cells)
	b.showColumn(workflows.SABusinessID.GetName())
	b.shot("decided-row")

	// e. A caller's values are text, never markup: an operation named as a
	// Markdown link shows as typed, in the summary and the details alike.
	require.NoError(t, s.Sandbox().Inject(lab.DestLegacy, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}))
	in := lab.TicketInput(lab.DestLegacy, "webui-3")
	in.Operation.Operation = markdownLink
	linked, err := st.Deliver(ctx, in)
	require.NoError(t, err)
	require.Equal(t, workflows.StateAwaitingReview, linked.State)
	lwid := workflows.WorkflowID(linked.Key)
	b.navigate(devstack.ListURL(s.UIURL(), fmt.Sprintf("WorkflowId=%q", lwid)))
	b.waitFor("the row of the delivery named as a link", true, rowJS(lwid), nonEmpty)
	b.click("its row", visible(rowSel+` a[href*="/workflows/`+lwid+`/"]`))
	b.click("the User Metadata tab", visible(metadataTab))
	b.waitFor("its current details", false, detailsJS, func(s string) bool { return strings.Contains(s, "awaiting review") })
	seen := b.waitFor("the operation's name as typed", false, markupJS, func(s string) bool { return strings.HasSuffix(s, "shown") })
	require.True(t, strings.HasPrefix(seen, "0 links"), "no link made of the caller's text: %s", seen)
	b.shot("markdown-as-text")
	t.Logf("the whole test took %s", time.Since(began).Round(time.Millisecond))
}

// markdownLink is an operation name a caller may send that Markdown would
// render as a link.
const markdownLink = "[Click to approve](http://example.invalid)"

// markupJS counts, over the page and its frames (summary and details
// render in frames), links whose text is the caller's, and says "shown"
// once a frame shows the name as typed.
var markupJS = fmt.Sprintf(`(() => {
	const frames = [...document.querySelectorAll("iframe")].map(f => f.contentDocument).filter(Boolean);
	let links = 0, shown = false;
	for (const d of [document, ...frames]) {
		for (const a of d.querySelectorAll("a")) if (a.innerText.includes("Click to approve")) links++;
	}
	for (const d of frames) if (d.body && d.body.innerText.includes(%q)) shown = true;
	return links + " links" + (shown ? ", shown" : "");
})()`, markdownLink)

// findChromium is the browser to drive; the test skips only without one.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium installed (apt-get install chromium); the browser test of the web UI needs one")
	return ""
}

// printDecision is what `courier review KEY args... --print` prints with
// the banner's exports (the dev reviewer's key): the signed decision, in
// one line for the editor.
func printDecision(t *testing.T, ctx context.Context, courier string, s *devstack.Stack, key string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, courier, append(append([]string{"review", key}, args...), "--print")...)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+s.Address(), "COURIER_REVIEWER_KEY="+s.ReviewerKeyPath())
	out, err := cmd.Output()
	require.NoError(t, err, "courier review --print")
	var d workflows.ReviewDecision
	require.NoError(t, json.Unmarshal(out, &d), "%s", out)
	require.NotEmpty(t, d.Proof, "signed with the dev reviewer's key")
	b, err := json.Marshal(d)
	require.NoError(t, err)
	return string(b)
}

// startDevStack is `courier-lab dev` on free ports in a folder of the test's.
func startDevStack(t *testing.T, ctx context.Context, courier string) *devstack.Stack {
	t.Helper()
	var ports [2]int
	for i := range ports {
		p, err := lab.FreePort()
		require.NoError(t, err)
		ports[i] = p
	}
	s, err := devstack.Start(ctx, devstack.Options{
		Dir:         filepath.Join(t.TempDir(), ".courier"),
		Port:        ports[0],
		UIPort:      ports[1],
		SandboxAddr: "127.0.0.1:0",
		MetricsAddr: "127.0.0.1:0",
		Courier:     courier,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// Timeouts for a shared, busy machine: a step is one click or one wait;
// waitFor covers visibility lag and the UI's own loading.
const (
	stepTimeout = 45 * time.Second
	waitTimeout = 90 * time.Second
	// reloadEvery is how long a page may take to show a change before
	// waitFor reloads it (the list does not refresh itself).
	reloadEvery = 5 * time.Second
)

// browser is one tab of a headless Chromium, and where its screenshots go.
type browser struct {
	t     *testing.T
	ctx   context.Context
	dir   string
	shots int
}

func openBrowser(t *testing.T, ctx context.Context, chromium string) *browser {
	t.Helper()
	actx, cancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1920, 1080),
	)
	t.Cleanup(cancel)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The first action starts the browser, bound to bctx (not to a step's
	// timeout).
	require.NoError(t, chromedp.Do(bctx), "start Chromium at %s", chromium)
	dir := os.Getenv("COURIER_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return &browser{t: t, ctx: bctx, dir: dir}
}

// do runs the actions of one step; on failure it saves what the page showed.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail("%s: %v", what, err)
	}
}

func (b *browser) navigate(url string) {
	b.t.Helper()
	b.do("open "+url, chromedp.Navigate(url))
}

func (b *browser) eval(js string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.fail("evaluate %s: %v", js, err)
	}
	return v
}

// click clicks the element el (a JavaScript expression) with the mouse,
// as a person would: scrolled into view, once it has stopped moving (the
// UI animates drawers, menus and dialogs in) and nothing covers its centre.
func (b *browser) click(what, el string) {
	b.t.Helper()
	at := b.waitForStill(what, `((e) => {
		if (!e) return "";
		e.scrollIntoView({block: "center", inline: "center", behavior: "instant"});
		const r = e.getBoundingClientRect();
		if (!r.width || !r.height) return "";
		const x = r.left + r.width / 2, y = r.top + r.height / 2;
		return e.contains(document.elementFromPoint(x, y)) ? JSON.stringify({x, y}) : "";
	})(`+el+`)`)
	var p struct{ X, Y float64 }
	require.NoError(b.t, json.Unmarshal([]byte(at), &p))
	b.do("click "+what, chromedp.MouseClickXY(p.X, p.Y))
}

// waitForStill is waitFor for a value that is non-empty and the same twice
// in a row.
func (b *browser) waitForStill(what, js string) string {
	b.t.Helper()
	last := ""
	return b.waitFor(what, false, js, func(s string) bool {
		still := s != "" && s == last
		last = s
		return still
	})
}

// waitFor evaluates js until ok accepts its value, and returns it; with
// reload, the page is reloaded when it has not shown it for a while.
func (b *browser) waitFor(what string, reload bool, js string, ok func(string) bool) string {
	b.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	next := time.Now().Add(reloadEvery)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var seen string
	for {
		seen = b.eval(js)
		if ok(seen) {
			return seen
		}
		if time.Now().After(deadline) {
			b.fail("waited %s for %s; last seen: %q", waitTimeout, what, seen)
		}
		if reload && time.Now().After(next) {
			b.do("reload for "+what, chromedp.Reload())
			next = time.Now().Add(reloadEvery)
		}
		select {
		case <-tick.C:
		case <-b.ctx.Done():
			b.fail("waiting for %s: %v", what, b.ctx.Err())
		}
	}
}

// row is the list row of the workflow: its cells by column header.
func (b *browser) row(wid string) map[string]string {
	b.t.Helper()
	var cells map[string]string
	raw := b.eval(`(() => {
		const row = ` + findRowJS(wid) + `;
		if (!row) return "{}";
		const heads = [...row.closest("table").querySelectorAll("thead th")].map(h => h.innerText.trim());
		const cells = [...row.children].map(c => c.innerText.trim());
		const off = cells.length - heads.length;
		const out = {};
		heads.forEach((h, i) => { if (h) out[h] = cells[i + off] ?? ""; });
		return JSON.stringify(out);
	})()`)
	require.NoError(b.t, json.Unmarshal([]byte(raw), &cells))
	return cells
}

// showColumn scrolls the list sideways to the column, as a person would
// to read the columns past the window's width.
func (b *browser) showColumn(name string) {
	b.t.Helper()
	b.eval(fmt.Sprintf(`((h) => { if (h) h.scrollIntoView({inline: "end", block: "nearest", behavior: "instant"}); return ""; })(
		[...document.querySelectorAll("thead th")].find(h => h.innerText.trim() === %q))`, name))
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// shot saves a full-page PNG, numbered in the order taken.
func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	b.shots++
	p := filepath.Join(b.dir, fmt.Sprintf("%02d-%s.png", b.shots, nonWord.ReplaceAllString(strings.ToLower(name), "-")))
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	b.t.Logf("screenshot: %s", p)
}

// fail saves a screenshot of the page as it was, then fails the test.
func (b *browser) fail(format string, args ...any) {
	b.t.Helper()
	if b.ctx.Err() == nil {
		b.shot("failed")
	}
	b.t.Fatalf(format, args...)
}

func nonEmpty(s string) bool { return s != "" }

// findRowJS finds the list row linking to the workflow, or null.
func findRowJS(wid string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%q)].find(r => r.querySelector(%q))`,
		rowSel, `a[href*="/workflows/`+wid+`/"]`)
}

// rowJS is the row's text, empty when the list does not show it.
func rowJS(wid string) string {
	return `((r) => r ? r.innerText : "")(` + findRowJS(wid) + `)`
}

// detailsFrameJS finds the frame the UI renders the current details in
// (Markdown, in a frame of its own origin, below the "Current Details"
// heading; the summary has a frame of its own).
const detailsFrameJS = `() => {
	const h = [...document.querySelectorAll("h3")].find(h => h.innerText.trim() === "Current Details" && h.checkVisibility());
	let p = h;
	while (p && !p.querySelector('iframe[title="output"]')) p = p.parentElement;
	return p ? p.querySelector('iframe[title="output"]') : null;
}`

// detailsJS is the text of the current details, empty until they show.
const detailsJS = `((f) => {
	const d = f && f.contentDocument;
	return d && d.body ? d.body.innerText : "";
})((` + detailsFrameJS + `)())`

// visible is the first element matching sel that the layout shows.
func visible(sel string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%q)].find(e => e.checkVisibility({visibilityProperty: true}))`, sel)
}

// inModal is the element matching sel in the open Send an Update dialog.
func inModal(sel string) string {
	return fmt.Sprintf(`document.querySelector(%q)`, updateModal+" "+sel)
}
