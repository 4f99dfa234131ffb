package testsuite

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/abde64c9/courier/activities/notify"
	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/workflows"
)

// receiver is a loopback webhook that records every notice it is sent.
type receiver struct {
	mu      sync.Mutex
	notices []received
}

type received struct {
	at     time.Time
	auth   string
	notice notify.Notice
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var n notify.Notice
	b, _ := io.ReadAll(req.Body)
	if err := json.Unmarshal(b, &n); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.notices = append(r.notices, received{at: time.Now(), auth: req.Header.Get("Authorization"), notice: n})
	r.mu.Unlock()
}

func (r *receiver) got() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.notices...)
}

// TestNotifierToldWhenParked: a delivery that parks posts one notice to the
// destination's webhook within seconds, and one per reminder; each says
// why it waits and how to decide. A notifier that is down delays nothing:
// the delivery parks and is decided as promptly, and its history says the
// notice failed.
func TestNotifierToldWhenParked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := newOpsStack(t, map[string]sandbox.Mode{"plain": sandbox.ModeNoKeys, "other": sandbox.ModeNoKeys})
	rcv := &receiver{}
	hook := httptest.NewServer(rcv)
	defer hook.Close()
	// A port nothing listens on: the notifier that is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + ln.Addr().String() + "/hook"
	require.NoError(t, ln.Close())

	t.Setenv("COURIER_TEST_HOOK_TOKEN", "hook-token")
	retry := contract.Retry{MaxAttempts: 3, AttemptTimeout: contract.Duration(2 * time.Second), Deadline: contract.Duration(time.Minute)}
	reminder := contract.Duration(3 * time.Second)
	plain := s.dest("plain", contract.Contract{Dedup: contract.DedupNone, Retry: retry, ReviewReminder: reminder})
	other := s.dest("other", contract.Contract{Dedup: contract.DedupNone, Retry: retry})
	other.Notifier = &destinations.Notifier{URL: down}
	s.deploy(destinations.Config{
		Notifier: &destinations.Notifier{URL: hook.URL + "/hook", WebUI: "http://ui.test:8233",
			Auth: &destinations.Auth{Header: "Authorization", Scheme: "Bearer", SecretEnv: "COURIER_TEST_HOOK_TOKEN"}},
		Destinations: map[string]destinations.Destination{"plain": plain, "other": other},
	})
	s.startWorker()

	t.Run("told when parked and at each reminder", func(t *testing.T) {
		s := s.on(t)
		require.NoError(t, s.sandbox.Inject("plain", sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit, Count: 1}))
		st := s.deliver(ctx, s.input("plain", "notify"))
		require.Equal(t, workflows.StateAwaitingReview, st.State)
		parkedAt := st.Review.Requested

		// Reminders come every 3 s: wait for the park notice and two of them.
		deadline := time.Now().Add(30 * time.Second)
		for len(rcv.got()) < 3 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		got := rcv.got()
		require.GreaterOrEqual(t, len(got), 3, "the park notice and two reminders")
		first := got[0]
		require.Less(t, first.at.Sub(parkedAt), 5*time.Second, "told within 5 s of parking")
		require.Equal(t, "parked", first.notice.Event)
		require.Equal(t, "Bearer hook-token", first.auth, "the secret from the environment")
		n := first.notice
		require.Equal(t, st.Key, n.Key)
		require.Equal(t, "plain", n.Destination)
		require.Equal(t, "create-ticket", n.Operation)
		require.Equal(t, "notify-"+s.run, n.BusinessID)
		require.Contains(t, n.Reason, "plain (dedup none) cannot tell whether it applied")
		require.Contains(t, n.Evidence, "unknown_outcome")
		require.Contains(t, n.Review, "courier review "+st.Key+" --decision")
		require.Equal(t, "http://ui.test:8233/namespaces/"+s.temporal.Namespace+"/workflows/"+workflows.WorkflowID(st.Key), n.WebUI)
		require.Contains(t, n.Text, "is waiting for a review")
		for i, r := range got[1:3] {
			require.Equal(t, "reminder", r.notice.Event)
			require.Equal(t, i+1, r.notice.Reminder)
			require.NotEqual(t, n.ID, r.notice.ID, "each notice has its own id")
		}
		require.Len(t, uniqueIDs(got), len(got), "no notice posted twice")

		s.review(ctx, st.Key, workflows.ReviewDecision{Decision: "delivered", Reviewer: "ops",
			ResourceID: s.firstTicket("plain"), Note: "found it after the notice"})
		res := s.result(ctx, st.Key)
		require.Equal(t, workflows.StatusDeliveredByReview, res.Status)
		s.requireSound(ctx, res)
		// The history tells the story in summaries, and the review timer
		// was closed by the decision, not left pending.
		hist, _, _ := s.historyFacts(ctx, workflows.WorkflowID(st.Key), "")
		var canceled bool
		summaries := map[string]bool{}
		for _, ev := range hist.Events {
			canceled = canceled || ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_CANCELED
			if p := ev.GetUserMetadata().GetSummary(); p != nil {
				var text string
				require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &text))
				summaries[text] = true
			}
		}
		require.True(t, canceled, "the review timer is canceled when the decision comes")
		for _, want := range []string{"attempt 1 of 3 → plain (dedup none)", "notify: parked at plain, waiting for a review",
			"waiting for a review; reminder in 3s", "notify: review reminder 1"} {
			require.True(t, summaries[want], "summary %q in %v", want, summaries)
		}
		desc, err := s.c.DescribeWorkflowExecution(ctx, workflows.WorkflowID(st.Key), "")
		require.NoError(t, err)
		var summary string
		meta := desc.GetExecutionConfig().GetUserMetadata()
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(meta.GetSummary(), &summary))
		require.Equal(t, "create-ticket → plain · notify-"+s.run+" (acme)", summary, "the fixed line names the operation")
		require.Nil(t, meta.GetDetails(), "no static details: the summary, the title (the key) and the current details say it all")
	})

	t.Run("a notifier that is down delays nothing", func(t *testing.T) {
		s := s.on(t)
		require.NoError(t, s.sandbox.Inject("other", sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit, Count: 1}))
		start := time.Now()
		st := s.deliver(ctx, s.input("other", "notify-down"))
		require.Equal(t, workflows.StateAwaitingReview, st.State)
		s.review(ctx, st.Key, workflows.ReviewDecision{Decision: "abandon", Reviewer: "ops", Note: "not needed"})
		res := s.result(ctx, st.Key)
		require.Equal(t, workflows.StatusAbandoned, res.Status)
		require.Less(t, time.Since(start), 20*time.Second, "parked and decided without waiting for the notifier")
		s.requireSound(ctx, res)
		desc, err := s.c.DescribeWorkflowExecution(ctx, workflows.WorkflowID(st.Key), "")
		require.NoError(t, err)
		require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, desc.GetWorkflowExecutionInfo().GetStatus(),
			"an abandoned delivery shows as failed in the web UI's list")
	})
}

func uniqueIDs(rs []received) map[string]bool {
	ids := map[string]bool{}
	for _, r := range rs {
		ids[strings.TrimSpace(r.notice.ID)] = true
	}
	return ids
}
