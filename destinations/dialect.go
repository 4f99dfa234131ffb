package destinations

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/abde64c9/courier/contract"
)

// A destination's dialect: how its requests look, where its receipts are
// and what its answers mean. Every field is optional; left out, a
// destination speaks Courier's own dialect (a JSON POST of the payload, the
// key in key_header, the id at a top-level id, ticket_id or resource_id,
// and the default reading of status codes).

// KeyLength is the length of every Courier key (a UUID's text form).
const KeyLength = 36

// Auth kinds.
const (
	// AuthHeader puts the secret in a request header (the default).
	AuthHeader = "header"
	// AuthStandardWebhooks signs each attempt the Standard Webhooks way:
	// webhook-id (the key), webhook-timestamp and webhook-signature, an
	// HMAC-SHA256 under a whsec_ secret.
	AuthStandardWebhooks = "standard-webhooks"
)

// Body says where the payload goes in the request body.
type Body struct {
	// Under places the payload at this pointer of an otherwise empty
	// object, e.g. "/data"; empty: the payload is the body.
	Under Pointer `json:"under,omitempty"`
}

// ReceiptSpec says where a response keeps the receipt's fields.
type ReceiptSpec struct {
	// ID is the resource id's pointer into the response body, e.g.
	// "/payment/id", or a list of pointers tried in order.
	ID Pointers `json:"id,omitempty"`
	// IDFromLocation takes the resource id from the Location header's
	// last path segment instead.
	IDFromLocation bool `json:"id_from_location,omitempty"`
	// Status is the pointer to the resource's status, e.g. "/payment/status".
	Status Pointer `json:"status,omitempty"`
}

// TLS is a destination's client TLS: a private CA, a client certificate
// (mutual TLS), the name to verify. Files are read at worker start.
type TLS struct {
	CAFile     string `json:"ca_file,omitempty"`
	CertFile   string `json:"cert_file,omitempty"`
	KeyFile    string `json:"key_file,omitempty"`
	ServerName string `json:"server_name,omitempty"`
}

// Rule gives an answer its class, ahead of the default reading. Rules are
// tried in order; the first that matches decides.
type Rule struct {
	Status StatusRange    `json:"status"`
	Header *Match         `json:"header,omitempty"`
	Body   *Match         `json:"body,omitempty"`
	Class  contract.Class `json:"class"`
	// Receipt says where this answer keeps the receipt, for an answer read
	// as created or replayed that is shaped unlike the others: a replay
	// that arrives as an error naming the original, say.
	Receipt *ReceiptSpec `json:"receipt,omitempty"`
	// NothingApplied must be set to give a status that may have applied
	// the effect (2xx, 408, 5xx other than 503, 1xx, 3xx) a class that
	// means nothing was applied (rejected, throttled, in_flight): it says
	// the destination documents so, for that one status.
	NothingApplied bool `json:"nothing_applied,omitempty"`
}

// Match is a condition on a response header (Name) or on a body value at a
// JSON pointer (Pointer): Value, or any of Values, compared as text
// (case-insensitive for headers); neither: the header or value is present.
type Match struct {
	Name    string   `json:"name,omitempty"`
	Pointer Pointer  `json:"pointer,omitempty"`
	Value   string   `json:"value,omitempty"`
	Values  []string `json:"values,omitempty"`
}

// Accepts reports whether a value (found) satisfies the match.
func (m *Match) Accepts(v string, found, foldCase bool) bool {
	if !found {
		return false
	}
	want := m.Values
	if m.Value != "" {
		want = append([]string{m.Value}, want...)
	}
	if len(want) == 0 {
		return true
	}
	for _, w := range want {
		if v == w || (foldCase && strings.EqualFold(strings.TrimSpace(v), w)) {
			return true
		}
	}
	return false
}

func (m *Match) same(o *Match) bool {
	switch {
	case m == nil || o == nil:
		return m == o
	}
	return strings.EqualFold(m.Name, o.Name) && m.Pointer == o.Pointer && m.Value == o.Value && slices.Equal(m.Values, o.Values)
}

// StatusRange is a status code (400) or a range ("500-599") in config.
type StatusRange struct{ Lo, Hi int }

// Contains reports whether status is in the range.
func (s StatusRange) Contains(status int) bool { return status >= s.Lo && status <= s.Hi }

func (s StatusRange) String() string {
	if s.Lo == s.Hi {
		return strconv.Itoa(s.Lo)
	}
	return fmt.Sprintf("%d-%d", s.Lo, s.Hi)
}

// MarshalJSON writes a single status as a number, a range as "lo-hi".
func (s StatusRange) MarshalJSON() ([]byte, error) {
	if s.Lo == s.Hi {
		return json.Marshal(s.Lo)
	}
	return json.Marshal(s.String())
}

// UnmarshalJSON reads 400, "400" or "500-599".
func (s *StatusRange) UnmarshalJSON(b []byte) error {
	var n int
	if json.Unmarshal(b, &n) == nil {
		*s = StatusRange{n, n}
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf(`status must be a code such as 400 or a range such as "500-599", got %s`, b)
	}
	lo, hi, isRange := strings.Cut(str, "-")
	l, err1 := strconv.Atoi(strings.TrimSpace(lo))
	h, err2 := l, error(nil)
	if isRange {
		h, err2 = strconv.Atoi(strings.TrimSpace(hi))
	}
	if err1 != nil || err2 != nil {
		return fmt.Errorf(`status %q: use a code such as 400 or a range such as "500-599"`, str)
	}
	*s = StatusRange{l, h}
	return nil
}

// Classes a rule may name.
var ruleClasses = []contract.Class{contract.ClassConflict, contract.ClassInFlight, contract.ClassRejected, contract.ClassThrottled, contract.ClassServerError, contract.ClassUnknown, contract.ClassReplayed, contract.ClassCreated}

// MayHaveApplied reports whether Courier's default reading of status takes
// it as an answer after which the effect may exist: 1xx, 2xx, 3xx, 408 and
// 5xx other than 503. (The HTTP adapter's classify is that reading; its
// test holds the two together.)
func MayHaveApplied(status int) bool {
	switch {
	case status == http.StatusRequestTimeout:
		return true
	case status == http.StatusServiceUnavailable, status >= 400 && status < 500:
		return false
	}
	return true
}
