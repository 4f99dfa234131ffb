package testsuite

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/text"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// TestEchoedCredentialsNotRecorded: destinations that echo their requests
// (headers as sent, base64 and URL-encoded, and the body) in 201, 400 and
// 500 answers, one credential from the environment (helpdesk's
// Authorization), one from a file (legacy's X-Api-Key), a notifier with a
// credential of its own, a real `courier worker` process, codec off and on.
// No credential, in clear, base64 or URL-encoded, is in the raw history,
// the results, the status query, the current details, the worker's log, the
// notices, or `temporal batch describe` of the `courier review --all` job;
// with the codec on, neither the payload nor the reviewer's note is in the
// batch job's description. And a caller's Markdown (an operation that is a
// link, a business id with backticks) is shown literally in the details.
func TestEchoedCredentialsNotRecorded(t *testing.T) {
	for _, mode := range []string{"codec-off", "codec-on"} {
		t.Run(mode, func(t *testing.T) { echoedCredentials(t, mode == "codec-on") })
	}
}

func echoedCredentials(t *testing.T, codecOn bool) {
	ctx, rl, env := realTest(t, 4*time.Minute)
	c := rl.Temporal.Client()
	if codecOn {
		c = encryptingClient(ctx, t, rl) // the worker and the courier CLI inherit the key
	}
	envSecret, fileSecret, hookSecret := "env-cred-"+uuid.NewString(), "file-cred-"+uuid.NewString(), "hook-cred-"+uuid.NewString()
	t.Setenv("COURIER_TEST_ECHO_TOKEN", envSecret)
	t.Setenv("COURIER_TEST_HOOK_TOKEN", hookSecret)
	secretFile := filepath.Join(t.TempDir(), "legacy-key")
	require.NoError(t, os.WriteFile(secretFile, []byte(fileSecret+"\n"), 0o600))

	var mu sync.Mutex
	var notices []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		notices = append(notices, string(b))
		mu.Unlock()
	}))
	defer hook.Close()

	cfg := destinations.Config{Destinations: maps.Clone(env.Config.Destinations), Reviewers: env.Config.Reviewers,
		Notifier: &destinations.Notifier{URL: hook.URL, Auth: &destinations.Auth{Header: "X-Hook-Token", SecretEnv: "COURIER_TEST_HOOK_TOKEN"}}}
	hd := cfg.Destinations[lab.DestHelpdesk]
	hd.Auth = &destinations.Auth{Header: "Authorization", Scheme: "Bearer", SecretEnv: "COURIER_TEST_ECHO_TOKEN"}
	cfg.Destinations[lab.DestHelpdesk] = hd
	lg := cfg.Destinations[lab.DestLegacy]
	lg.Auth = &destinations.Auth{Header: "X-Api-Key", SecretFile: secretFile}
	cfg.Destinations[lab.DestLegacy] = lg
	log := courierWorker(ctx, t, rl, cfg)
	st := starter.New(c)

	deliver := func(dest, id string, op string, faults ...sandbox.FaultKind) workflows.DeliveryStatus {
		t.Helper()
		for _, f := range faults {
			require.NoError(t, env.Inject(dest, sandbox.Fault{Kind: f}))
		}
		in := lab.Input(dest, id, lab.Ticket(id, "payload-marker-"+rl.RunID))
		if op != "" {
			in.Operation.Operation = op
		}
		res, err := st.Deliver(ctx, in)
		require.NoError(t, err)
		return res
	}
	// helpdesk: a 500 echoing the Authorization header, then a 201 echoing it.
	created := deliver(lab.DestHelpdesk, "echo-created-"+rl.RunID, "", sandbox.FaultEcho500, sandbox.FaultEchoCreated)
	require.Equal(t, workflows.StatusCreated, created.Status, "%+v", created.Attempts)
	require.Contains(t, string(created.Receipt.Body), "[redacted: helpdesk auth]", "the echo is recorded, redacted")
	// helpdesk: a 400 echoing it.
	rejected := deliver(lab.DestHelpdesk, "echo-rejected-"+rl.RunID, "", sandbox.FaultEcho400)
	require.Equal(t, workflows.StatusRejected, rejected.Status)
	require.Contains(t, rejected.Error, `"Authorization":"[redacted: `, "the excerpt quotes the marker")
	// legacy: a 201 echoing X-Api-Key.
	legacyCreated := deliver(lab.DestLegacy, "echo-legacy-"+rl.RunID, "", sandbox.FaultEchoCreated)
	require.Equal(t, workflows.StatusCreated, legacyCreated.Status)
	require.Contains(t, string(legacyCreated.Receipt.Body), "[redacted: legacy auth]")
	// legacy: a 500 echoing it parks the delivery (nothing says it was not
	// applied), under an operation that is a Markdown link and a business id
	// with backticks; the notifier is told.
	link, bid := "[Click to approve](http://example.invalid)", "id`with``ticks-"+rl.RunID
	parked := deliver(lab.DestLegacy, bid, link, sandbox.FaultEcho500)
	require.Equal(t, workflows.StateAwaitingReview, parked.State, "%+v", parked.Attempts)

	details := func(key string) string {
		v, err := c.QueryWorkflow(ctx, workflows.WorkflowID(key), "", "__temporal_workflow_metadata")
		require.NoError(t, err)
		var meta sdkpb.WorkflowMetadata
		require.NoError(t, v.Get(&meta))
		return meta.GetCurrentDetails()
	}
	d := details(parked.Key)
	require.Contains(t, d, `\[Click to approve\](http://example.invalid)`, "the operation, escaped")
	require.NotContains(t, strings.ReplaceAll(d, `\[`, ""), "[Click to approve]", "no link")
	require.Contains(t, d, text.Code(bid), "the business id, in a code span its backticks cannot close")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(notices) > 0 }, 30*time.Second, 200*time.Millisecond)

	// Abandon it with `courier review --all`: a batch job.
	note := "note-marker-" + rl.RunID
	// Only this delivery: the server is shared with tests that park others.
	only := fmt.Sprintf("%s = %q", workflows.SAKey.GetName(), parked.Key)
	require.Eventually(t, func() bool {
		p, err := st.PreviewBulk(ctx, starter.BulkFilter{Destination: lab.DestLegacy, Query: only}, 1)
		return err == nil && p.Matched == 1
	}, time.Minute, 250*time.Millisecond, "visibility lists the parked delivery")
	review := exec.CommandContext(ctx, rl.Courier, "review", "--all", "--destination", lab.DestLegacy, "--query", only,
		"--decision", "abandon", "--reviewer", "ops", "--note", note, "--yes")
	review.Env = rl.Temporal.Env(os.Environ())
	out, err := review.Output()
	require.NoError(t, err, "%s", out)
	var rep starter.BulkReport
	require.NoError(t, json.Unmarshal(out, &rep), "%s", out)
	require.NotEmpty(t, rep.JobID)
	temporalCLI, err := devserver.Binary()
	require.NoError(t, err)
	describe := exec.CommandContext(ctx, temporalCLI, "batch", "describe", "--job-id", rep.JobID, "-o", "json")
	describe.Env = rl.Temporal.Env(os.Environ())
	job, err := describe.CombinedOutput()
	require.NoError(t, err, "%s", job)
	require.Contains(t, string(job), "abandon", "the reason says what the job does")
	require.NotContains(t, string(job), note, "the note is in the signal's input only")
	if codecOn {
		require.NotContains(t, string(job), "payload-marker-", "the signal's input is encrypted")
	}
	require.Eventually(t, func() bool {
		s, err := st.Status(ctx, parked.Key)
		return err == nil && s.Status == workflows.StatusAbandoned
	}, time.Minute, 250*time.Millisecond, "the batch job abandoned it")

	// Everything Courier recorded or passed on.
	seen := map[string]string{"worker log": log.String(), "batch describe": string(job)}
	mu.Lock()
	seen["notices"] = strings.Join(notices, "\n")
	mu.Unlock()
	for _, k := range []struct {
		key  string
		last enumspb.EventType
	}{
		{created.Key, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED},
		{rejected.Key, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED},
		{legacyCreated.Key, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED},
		{parked.Key, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED},
	} {
		raw, js := closedHistory(ctx, t, rl.Temporal.Client(), workflows.WorkflowID(k.key), k.last)
		seen["history of "+k.key], seen["history JSON of "+k.key] = string(raw), string(js)
		s, err := st.Status(ctx, k.key)
		require.NoError(t, err)
		b, _ := json.Marshal(s)
		seen["status of "+k.key] = string(b)
		seen["details of "+k.key] = details(k.key)
		err = c.GetWorkflow(ctx, workflows.WorkflowID(k.key), "").Get(ctx, &s)
		if res, ok := workflows.UndeliveredResult(err); ok {
			b, _ = json.Marshal(res)
			seen["result of "+k.key] = string(b) + err.Error()
		} else {
			require.NoError(t, err)
			b, _ = json.Marshal(s)
			seen["result of "+k.key] = string(b)
		}
	}
	require.Contains(t, seen["result of "+created.Key], "[redacted: helpdesk auth]", "the search looks where the echo is")
	for _, secret := range []string{envSecret, fileSecret, hookSecret} {
		forms := []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), url.QueryEscape(secret),
			base64.StdEncoding.EncodeToString([]byte("Bearer " + secret)), url.QueryEscape("Bearer " + secret)}
		for where, got := range seen {
			for _, f := range forms {
				require.NotContains(t, got, f, "%s", where)
			}
		}
	}
}

// TestEchoedCredentialFormsNotRecorded: destinations that echo their
// credential the ways partners do (percent-encoded in lowercase hex, as
// Python's quote() writes it, leaving '/'; every character as a JSON \u
// escape, or '/' alone as \u002f; a Basic credential decoded, as
// user:password and the password alone), in a 500 and then in the 201's
// receipt, through a real `courier worker` and `courier deliver`. None of
// it, in any of those forms, is in the history read from the server,
// `courier deliver`'s or `courier status`'s output, or the worker's log.
func TestEchoedCredentialFormsNotRecorded(t *testing.T) {
	ctx, rl, env := realTest(t, 3*time.Minute)
	token := "tok/" + uuid.NewString() + "+x=y&z"
	user, password := "courier-ops", "pw/"+uuid.NewString()+"+!"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	t.Setenv("COURIER_TEST_FORMS_TOKEN", token)
	t.Setenv("COURIER_TEST_FORMS_BASIC", basic)

	// echoes are what each destination's answer quotes of its credential.
	echoes := func(secret string) []string {
		return []string{lowerHex(url.QueryEscape(secret)), pyQuote(secret), uEscape(secret),
			strings.ReplaceAll(secret, "/", `\u002f`)}
	}
	var mu sync.Mutex
	seenKeys := map[string]bool{}
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var quoted []string
		scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if scheme == "Basic" {
			b, _ := base64.StdEncoding.DecodeString(cred)
			_, pass, _ := strings.Cut(string(b), ":")
			quoted = append(echoes(string(b)), string(b), pass, lowerHex(url.QueryEscape(pass)), uEscape(pass))
		} else {
			quoted = echoes(cred)
		}
		// Written by hand: json.Marshal would escape the escapes.
		body := `"` + strings.Join(quoted, `","`) + `"`
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		again := seenKeys[key]
		seenKeys[key] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !again {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"error":"upstream","saw":[%s]}`, body)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"t-%s","saw":[%s]}`, key, body)
	}))
	defer echo.Close()

	hd := env.Config.Destinations[lab.DestHelpdesk]
	hd.URL = echo.URL + "/tickets"
	bearer, basicDest := hd, hd
	bearer.Auth = &destinations.Auth{Header: "Authorization", Scheme: "Bearer", SecretEnv: "COURIER_TEST_FORMS_TOKEN"}
	basicDest.Auth = &destinations.Auth{Header: "Authorization", Scheme: "Basic", SecretEnv: "COURIER_TEST_FORMS_BASIC"}
	log := courierWorker(ctx, t, rl, destinations.Config{
		Destinations: map[string]destinations.Destination{"echo-bearer": bearer, "echo-basic": basicDest}})

	courier := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, rl.Courier, args...)
		cmd.Env = rl.Temporal.Env(os.Environ())
		out, err := cmd.Output()
		require.NoError(t, err, "courier %s: %s", args, out)
		return string(out)
	}
	seen := map[string]string{}
	for _, dest := range []string{"echo-bearer", "echo-basic"} {
		id := "forms-" + rl.RunID
		out := courier("deliver", "--tenant", "acme", "--destination", dest, "--operation", "create-ticket", "--id", id,
			"--payload", string(lab.Ticket(id, "echo my credential")))
		var res workflows.DeliveryStatus
		require.NoError(t, json.Unmarshal([]byte(out), &res), out)
		require.Equal(t, workflows.StatusCreated, res.Status, out)
		require.Contains(t, string(res.Receipt.Body), "[redacted: "+dest+" auth", "the echo is recorded, redacted")
		require.Len(t, res.Attempts, 2, "the 500 is an attempt too")
		seen["deliver of "+dest] = out
		seen["status of "+dest] = courier("status", res.Key)
		raw, js := closedHistory(ctx, t, rl.Temporal.Client(), workflows.WorkflowID(res.Key), enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
		seen["history of "+dest], seen["history JSON of "+dest] = string(raw), string(js)
	}
	seen["worker log"] = log.String()

	forms := append(echoes(token), token, basic, user+":"+password, password,
		lowerHex(url.QueryEscape(password)), uEscape(password))
	forms = append(forms, echoes(user+":"+password)...)
	for where, got := range seen {
		for _, f := range forms {
			require.NotContains(t, got, f, "%s", where)
		}
	}
}

// courierWorker runs a `courier worker` process serving cfg until the
// test ends, and returns its log.
func courierWorker(ctx context.Context, t *testing.T, rl *RealLab, cfg destinations.Config) *lab.SyncBuffer {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "destinations.json")
	require.NoError(t, lab.WriteDestinations(cfgPath, cfg))
	log := &lab.SyncBuffer{}
	w, err := lab.StartWorker(ctx, lab.WorkerOptions{Courier: rl.Courier, Destinations: cfgPath, Temporal: rl.Temporal, Log: log})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = w.Stop(10 * time.Second) })
	return log
}

// lowerHex is s with its percent-escapes in lowercase hex.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = byte(unicode.ToLower(rune(b[i+1]))), byte(unicode.ToLower(rune(b[i+2])))
		}
	}
	return string(b)
}

// pyQuote is s as Python's urllib.parse.quote writes it: '/' left as it is.
func pyQuote(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.-~/", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// uEscape is s with every character as a JSON \u escape.
func uEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}
