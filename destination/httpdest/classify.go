package httpdest

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
)

// classify maps an HTTP answer onto a contract.Class: the one place where a
// status code gets its meaning. The destination's rules come first, in
// order (rule is the index of the one that matched, or -1); then the
// default reading. contract.Next then decides what to do.
func classify(status int, h http.Header, body []byte, m *contract.ReplayMarker, rules []destinations.Rule) (_ contract.Class, rule int) {
	if len(rules) > 0 {
		doc, _ := decodeBody(body)
		for i, r := range rules {
			if r.Status.Contains(status) && headerMatches(h, r.Header) && bodyMatches(doc, r.Body) {
				return r.Class, i
			}
		}
	}
	return classifyDefault(status, h, body, m), -1
}

// classifyDefault is Courier's own reading of an answer; destinations.MayHaveApplied
// says which statuses it takes as possibly applied.
func classifyDefault(status int, h http.Header, body []byte, m *contract.ReplayMarker) contract.Class {
	switch {
	case status >= 200 && status < 300:
		if replayed(status, h, m) {
			return contract.ClassReplayed
		}
		return contract.ClassCreated
	case (status == http.StatusConflict || status == http.StatusUnprocessableEntity) && keyReused(body):
		return contract.ClassConflict
	case status == http.StatusConflict:
		return contract.ClassInFlight
	case status == http.StatusRequestTimeout:
		// The server gave up on the request; whether it had started on the
		// effect is not said.
		return contract.ClassUnknown
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return contract.ClassThrottled
	case status >= 400 && status < 500:
		return contract.ClassRejected
	case status >= 500:
		return contract.ClassServerError
	}
	// 1xx and 3xx (redirects are not followed): no receipt, and nothing
	// says the effect did not happen.
	return contract.ClassUnknown
}

func headerMatches(h http.Header, m *destinations.Match) bool {
	if m == nil {
		return true
	}
	vs := h.Values(m.Name)
	if len(vs) == 0 {
		return false
	}
	for _, v := range vs {
		if m.Accepts(v, true, true) {
			return true
		}
	}
	return false
}

func bodyMatches(doc any, m *destinations.Match) bool {
	if m == nil {
		return true
	}
	v, found := m.Pointer.Lookup(doc)
	return m.Accepts(scalarText(v), found, false)
}

func replayed(status int, h http.Header, m *contract.ReplayMarker) bool {
	switch {
	case m == nil:
		return false
	case m.Header != "":
		return headerMatches(h, &destinations.Match{Name: m.Header, Value: m.Value, Values: m.Values})
	default:
		return status == m.Status
	}
}

// keyReused reports whether an error body says the key was used before with
// another payload: "key_reused", "idempotency_key_reused", any case.
func keyReused(body []byte) bool {
	return bytes.Contains(bytes.ToLower(body), []byte("key_reused"))
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, int64(contract.MaxDeadline/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
