package devstack_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/devstack"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

func TestDestinationsCoverEveryDedupKind(t *testing.T) {
	dir := t.TempDir()
	cfg, err := devstack.Destinations("http://127.0.0.1:9999", dir)
	require.NoError(t, err)
	var kinds []contract.Dedup
	for _, name := range cfg.Names() {
		d := cfg.Destinations[name]
		kinds = append(kinds, d.Contract.Dedup)
		switch d.Adapter {
		case destinations.AdapterHTTP:
			require.True(t, strings.HasPrefix(d.URL, "http://127.0.0.1:9999/"), d.URL)
			if d.LookupURL != "" {
				require.True(t, strings.HasPrefix(d.LookupURL, "http://127.0.0.1:9999/"), d.LookupURL)
			}
		case destinations.AdapterSQL:
			require.Equal(t, dir, filepath.Dir(d.DSN), "SQLite files live in the state folder")
		}
	}
	for _, k := range []contract.Dedup{contract.DedupKey, contract.DedupUniqueCommit, contract.DedupLookup, contract.DedupNone} {
		require.Contains(t, kinds, k)
	}

	// legacy takes decisions signed by the dev reviewer, whose key is made
	// once in the state folder, readable by its owner only.
	names, policy := cfg.ReviewersOf(lab.DestLegacy)
	require.Equal(t, []string{devstack.ReviewerName}, names)
	require.NotNil(t, policy)
	require.Equal(t, "legacy's reviewers: you may retry, delivered, abandon, pause, resume", policy.Rule(policy.Reviewers[0]))
	fi, err := os.Stat(filepath.Join(dir, devstack.ReviewerKey))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	again, err := devstack.Destinations("http://127.0.0.1:9999", dir)
	require.NoError(t, err)
	require.Equal(t, cfg.Destinations[lab.DestLegacy].Reviewers, again.Destinations[lab.DestLegacy].Reviewers, "the same identity on every start")
	_, policy = cfg.ReviewersOf(lab.DestHelpdesk)
	require.Nil(t, policy, "only legacy, the destination the walkthrough parks, asks for proofs")
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := lab.FreePort()
	require.NoError(t, err)
	return p
}

// The stack starts and stops cleanly, prints where everything is, and a
// second start on the same folder finds the deliveries of the first: one
// finished, one still waiting for its review.
func TestStackKeepsDeliveriesAcrossRestarts(t *testing.T) {
	ctx, courier := lab.RealTest(t, 4*time.Minute)
	o := devstack.Options{
		Dir:         filepath.Join(t.TempDir(), ".courier"),
		Port:        freePort(t),
		UIPort:      freePort(t),
		SandboxAddr: "127.0.0.1:0",
		MetricsAddr: "127.0.0.1:0",
		Courier:     courier,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	}

	s, err := devstack.Start(ctx, o)
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			_ = s.Stop()
		}
	}()

	banner := s.Banner()
	awaiting := s.AwaitingReviewURL()
	require.Equal(t, s.UIURL()+"/namespaces/default/workflows?query=CourierState%3D%22awaiting_review%22", awaiting)
	for _, want := range []string{
		s.UIURL(), awaiting, s.DeliveriesURL(), s.SandboxURL(), s.MetricsURL(), "export TEMPORAL_ADDRESS=127.0.0.1:", "export PATH=",
		"export COURIER_DESTINATIONS=" + filepath.Join(o.Dir, lab.DestinationsFile) + " ",
		"export COURIER_REVIEWER_KEY=" + filepath.Join(o.Dir, devstack.ReviewerKey) + " ",
		"courier deliver --destination helpdesk", s.SandboxURL() + "/admin/faults",
		`"fault": "close_after_commit"`, "courier deliver --destination legacy",
		"courier list --state awaiting_review", "courier destination status ", "courier review ",
		"Nexus endpoint   courier-acme", "place --id order-", "--endpoint courier-acme",
		"NATS             " + s.NATS().URL, "Mail sink        smtp://" + s.Mail().Addr,
		"courier deliver --destination events", "courier deliver --destination mail",
	} {
		require.Contains(t, banner, want)
	}
	for _, u := range []string{s.UIURL(), awaiting, s.MetricsURL()} {
		resp, err := http.Get(u)
		require.NoError(t, err, u)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, u)
	}
	// The UI's action switches as its pages read them (terminate, cancel,
	// start and reset off; signals and updates on).
	resp, err := http.Get(s.UIURL() + "/api/v1/settings")
	require.NoError(t, err)
	var settings map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&settings))
	resp.Body.Close()
	for _, us := range devserver.UISettings {
		field := strings.ToUpper(us.Key[:1]) + us.Key[1:]
		require.Equal(t, us.Value, settings[field], "the web UI's %s", us.Key)
	}

	first, parked, err := lab.CreatedAndParked(ctx, starter.New(s.Client()), s.Sandbox(), [2]string{"persist-1", "persist-2"})
	require.NoError(t, err)
	deskFromBanner(t, courier, banner)
	event, mail := deliverBeyondHTTP(ctx, t, s, workflows.StatusCreated)

	require.NoError(t, s.Stop())
	stopped = true
	_, err = http.Get(s.MetricsURL())
	require.Error(t, err, "the worker process is gone")

	// Same folder and ports: the ports were released, the files kept. With
	// metrics off, the worker still starts (the lab waits on a /healthz of
	// its choosing) and the banner leaves metrics out.
	o.MetricsAddr = ""
	s, err = devstack.Start(ctx, o)
	require.NoError(t, err)
	stopped = false
	require.Empty(t, s.MetricsURL())
	require.NotContains(t, s.Banner(), "metrics")
	st := starter.New(s.Client())

	again, err := st.Status(ctx, first.Key)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCreated, again.Status)
	require.Equal(t, first.Receipt.ResourceID, again.Receipt.ResourceID)
	dup, err := st.Deliver(ctx, lab.TicketInput(lab.DestHelpdesk, "persist-1"))
	require.NoError(t, err)
	require.Equal(t, workflows.StatusDuplicate, dup.Status)
	recs, err := s.Sandbox().Records("helpdesk")
	require.NoError(t, err)
	require.Len(t, recs, 1, "the sandbox kept its one ticket, and no second was made")
	eventAgain, mailAgain := deliverBeyondHTTP(ctx, t, s, workflows.StatusDuplicate)
	require.Equal(t, event.Receipt.ResourceID, eventAgain.Receipt.ResourceID, "the stream's one message")
	require.Equal(t, mail.Receipt.ResourceID, mailAgain.Receipt.ResourceID, "the one mail's Message-ID")

	require.Eventually(t, func() bool {
		list, err := st.ListAwaitingReview(ctx)
		return err == nil && slices.ContainsFunc(list, func(d starter.Delivery) bool { return d.Key == parked.Key })
	}, 30*time.Second, 200*time.Millisecond, "the parked delivery is listed after the restart")
	// legacy takes the dev reviewer's signed decisions only.
	d := workflows.ReviewDecision{Decision: workflows.DecisionDelivered, Reviewer: "test", ResourceID: "ticket-1", Note: "found it"}
	_, err = st.Review(ctx, parked.Key, d)
	var refused *starter.ReviewRefusedError
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, "proof required")
	kb, err := os.ReadFile(s.ReviewerKeyPath())
	require.NoError(t, err)
	name, key, err := reviewproof.ParseKeyFile(kb)
	require.NoError(t, err)
	d, err = st.Sign(ctx, parked.Key, d, starter.Signer{Name: name, Key: key})
	require.NoError(t, err)
	rec, err := st.Review(ctx, parked.Key, d)
	require.NoError(t, err)
	require.Equal(t, devstack.ReviewerName, rec.Principal)
	done, err := st.Wait(ctx, parked.Key)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusDeliveredByReview, done.Status)

	require.NoError(t, s.Stop())
	stopped = true
}

// deliverBeyondHTTP publishes one event to the dev stack's NATS stream and
// sends one mail through its mail sink, each through the stack's worker,
// and checks each ended want with exactly one effect where it lands.
func deliverBeyondHTTP(ctx context.Context, t *testing.T, s *devstack.Stack, want workflows.Status) (event, mail workflows.DeliveryStatus) {
	t.Helper()
	st := starter.New(s.Client())
	deliver := func(dest, op, payload string) workflows.DeliveryStatus {
		res, err := st.Deliver(ctx, workflows.DeliveryInput{Operation: opkey.Operation{Destination: dest, Operation: op, BusinessID: "persist-3"},
			Payload: json.RawMessage(payload)})
		require.NoError(t, err, dest)
		require.Equal(t, want, res.Status, "%s: %+v", dest, res)
		require.NotNil(t, res.Receipt, dest)
		return res
	}
	event = deliver("events", "order-placed", `{"order": "persist-3"}`)
	n, err := s.NATS().Count(ctx, event.Key)
	require.NoError(t, err)
	require.Equal(t, 1, n, "one message in the stream for the key")
	mail = deliver("mail", "send-receipt", `{"subject": "Your receipt", "text": "Thank you."}`)
	require.Equal(t, 1, s.Mail().Count(mail.Receipt.ResourceID), "one mail with the receipt's Message-ID")
	return event, mail
}

// deskFromBanner runs the banner's `courier destination status` after its
// exports, in a shell as a person pastes them, until it lists every dev
// destination and legacy's parked delivery (visibility catches up a moment
// later). The exports alone find the server, the file and the courier.
func deskFromBanner(t *testing.T, courier, banner string) {
	t.Helper()
	exports := regexp.MustCompile(`(?m)^\s*export (\w+)=(\S+)`).FindAllStringSubmatch(banner, -1)
	var names, script []string
	file := ""
	for _, m := range exports {
		names = append(names, m[1])
		script = append(script, "export "+m[1]+"="+m[2])
		if m[1] == "COURIER_DESTINATIONS" {
			file = m[2]
		}
	}
	require.Equal(t, []string{"TEMPORAL_ADDRESS", "COURIER_DESTINATIONS", "COURIER_REVIEWER_KEY", "PATH"}, names)
	require.Contains(t, banner, "export PATH="+filepath.Dir(courier)+":$PATH", "the courier the worker runs comes first")
	cfg, err := destinations.Load(file)
	require.NoError(t, err, "the exported file is the worker's")
	script = append(script, "courier destination status --json")
	var out []byte
	var parked int64
	require.Eventually(t, func() bool {
		cmd := exec.Command("bash", "-c", strings.Join(script, "\n"))
		cmd.Env = os.Environ()
		var err error
		if out, err = cmd.Output(); err != nil {
			return false
		}
		var desk []gateclient.Status
		if json.Unmarshal(out, &desk) != nil {
			return false
		}
		var names []string
		for _, d := range desk {
			names = append(names, d.Name)
			if d.Name == lab.DestLegacy {
				parked = d.Parked
			}
		}
		return slices.Equal(names, cfg.Names()) && parked == 1
	}, 30*time.Second, 250*time.Millisecond, "courier destination status: %s", out)
}

// TestBannerCurlsOverHTTP: the banner's HTTP API lines, pasted into bash
// with curl alone, create a delivery, repeat it, conflict with it, park
// one and read it, each answered as docs/api.md says; the token file is
// the caller's only credential, and the API stops with the stack.
func TestBannerCurlsOverHTTP(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl, as the banner's lines do")
	}
	ctx, courier := lab.RealTest(t, 4*time.Minute)
	s, err := devstack.Start(ctx, devstack.Options{
		Dir: filepath.Join(t.TempDir(), ".courier"), Port: freePort(t), UIPort: freePort(t),
		SandboxAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", Courier: courier,
	})
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			_ = s.Stop()
		}
	}()
	info, err := os.Stat(s.APITokenPath())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the token is the caller's secret")

	banner := s.Banner()
	require.Contains(t, banner, "HTTP API         "+s.APIURL())
	var lines []string
	for _, l := range strings.Split(banner, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "curl ") && !strings.Contains(l, "/admin/records") {
			lines = append(lines, l)
		}
	}
	// The walkthrough's own fault line comes first; the API's section has
	// three POSTs to helpdesk, its own fault, the parked POST and the GET.
	api := lines[len(lines)-6:]
	require.Contains(t, api[0], s.APIURL())
	status := func(out string) string { return strings.Fields(strings.SplitN(out, "\n", 2)[0] + " ")[1] }
	run := func(line string) string {
		out, err := exec.CommandContext(ctx, "bash", "-c", line).Output()
		require.NoError(t, err, line)
		return strings.ReplaceAll(string(out), "\r\n", "\n")
	}
	created := run(api[0])
	require.Equal(t, "201", status(created), created)
	replayed := run(api[1])
	require.Equal(t, "200", status(replayed), replayed)
	require.Contains(t, strings.ToLower(replayed), "idempotent-replayed: true")
	conflict := run(api[2])
	require.Equal(t, "422", status(conflict), conflict)
	require.Contains(t, conflict, "existing_fingerprint")
	run(api[3])
	parked := run(api[4])
	require.Equal(t, "202", status(parked), parked)
	require.Regexp(t, `(?i)location: /v1/deliveries/[0-9a-f-]{36}`, parked)
	var st struct{ State, Evidence string }
	require.NoError(t, json.Unmarshal([]byte(run(api[5])), &st))
	require.Equal(t, "awaiting_review", st.State)
	require.NotEmpty(t, st.Evidence)

	require.NoError(t, s.Stop())
	stopped = true
	_, err = http.Get(s.APIURL() + "/healthz")
	require.Error(t, err, "the API process is gone")
}
