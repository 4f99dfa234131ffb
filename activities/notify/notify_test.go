package notify

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/redact"
)

const secret = "notifier-secret-0123456789"

func webhook(t *testing.T, url string) *Webhook {
	t.Helper()
	t.Setenv("COURIER_TEST_NOTIFIER_TOKEN", secret)
	red, _ := redact.New(redact.Secret{Label: "notifier auth", Value: secret})
	w, err := New(destinations.Notifier{URL: url, Auth: &destinations.Auth{Header: "X-Hook-Token", SecretEnv: "COURIER_TEST_NOTIFIER_TOKEN"}}, red)
	require.NoError(t, err)
	return w
}

var reminder = activities.Reminder{Key: "k", Destination: "helpdesk", Operation: "op", BusinessID: "b", Since: time.Now()}

// TestNoRedirects: a notifier answering 307 to a second host is not
// followed there (the credential header stays with the host it was meant
// for), and the notice fails with the status.
func TestNoRedirects(t *testing.T) {
	var second atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { second.Add(1) }))
	defer other.Close()
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal?token="+r.Header.Get("X-Hook-Token"), http.StatusTemporaryRedirect)
	}))
	defer first.Close()

	err := webhook(t, first.URL).Notify(context.Background(), reminder)
	require.ErrorContains(t, err, "307")
	require.ErrorContains(t, err, "not followed")
	require.NotContains(t, err.Error(), secret)
	require.NotContains(t, err.Error(), other.URL, "where it pointed is not quoted")
	require.Zero(t, second.Load(), "no request reached the second host")
}

// TestRefusalRedactedAndBounded: a refusing notifier that echoes the
// credential is quoted without it, within the bound.
func TestRefusalRedactedAndBounded(t *testing.T) {
	// The secret straddles the bound: cut first, a part of it would stay.
	pad := strings.Repeat("x", maxAnswer-10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, pad+r.Header.Get("X-Hook-Token")+strings.Repeat("y", 2000), http.StatusForbidden)
	}))
	defer hook.Close()
	err := webhook(t, hook.URL).Notify(context.Background(), reminder)
	require.ErrorContains(t, err, "403")
	require.NotContains(t, err.Error(), secret[:10])
	require.Less(t, len(err.Error()), maxAnswer+100)
}

// TestNoticeTextIsNotMarkup: the delivery's values are code spans in the
// notice's text, so a chat tool shows them as typed.
func TestNoticeTextIsNotMarkup(t *testing.T) {
	r := reminder
	r.Operation, r.BusinessID, r.Reason = "[Click to approve](http://example.invalid)", "id`with`ticks", "see <http://example.invalid>"
	n := (&Webhook{}).NoticeOf(r, time.Now())
	require.Contains(t, n.Text, "`[Click to approve](http://example.invalid)`")
	require.Contains(t, n.Text, "``id`with`ticks``")
	require.Contains(t, n.Text, `see \<http://example.invalid\>`)
	require.Equal(t, r.Operation, n.Operation, "the structured fields stay as they are")
}
