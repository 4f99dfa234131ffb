package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
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

// Placeholders a URL template may use, each filled in from the delivery's
// operation and escaped for where it stands (path or query).
var Placeholders = []string{"{key}", "{business_id}", "{tenant}", "{operation}"}

// URLValues fill a URL template's placeholders.
type URLValues struct{ Key, BusinessID, Tenant, Operation string }

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

// LookupReading says how to read a lookup's answer: where the records are,
// which of them is the delivery's effect, and where that effect's id is.
// A lookup finds the effect only when its answer names it; an answer the
// reading cannot read is neither found nor not found.
type LookupReading struct {
	// Items points at the answer's list of records (a list or search
	// endpoint); empty: the answer itself is the one record (a GET by key).
	Items Pointer `json:"items,omitempty"`
	// Match, when set, takes as the effect only a record whose value at its
	// pointer is the delivery's key or business id.
	Match *LookupMatch `json:"match,omitempty"`
	// Count points at the answer's count of records: 0 is not found, and it
	// must agree with the list.
	Count Pointer `json:"count,omitempty"`
	// Receipt is where a found record keeps its id and status, relative to
	// the record; left out: the destination's receipt, else the default.
	Receipt *ReceiptSpec `json:"receipt,omitempty"`
	// NotFound are the statuses that mean no such effect; default 404.
	NotFound []StatusRange `json:"not_found,omitempty"`
}

// LookupMatch names the record's field that must equal one of the
// delivery's own values.
type LookupMatch struct {
	Pointer Pointer `json:"pointer"`
	// Equals is "{key}" or "{business_id}".
	Equals string `json:"equals"`
}

// Value is the delivery's value the match compares with.
func (m LookupMatch) Value(v URLValues) string {
	if m.Equals == "{business_id}" {
		return v.BusinessID
	}
	return v.Key
}

// NotFoundStatus reports whether status means the lookup found no effect.
func (l *LookupReading) NotFoundStatus(status int) bool {
	if l == nil || len(l.NotFound) == 0 {
		return status == http.StatusNotFound
	}
	return slices.ContainsFunc(l.NotFound, func(s StatusRange) bool { return s.Contains(status) })
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
	Status StatusRange `json:"status"`
	Header *Match      `json:"header,omitempty"`
	Body   *Match      `json:"body,omitempty"`
	Class  Class       `json:"class"`
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

// Pointer is a JSON pointer (RFC 6901), e.g. "/payment/id".
type Pointer string

// Pointers is one JSON pointer ("/id") or a list tried in order
// (["/data/id", "/id"]).
type Pointers []Pointer

// MarshalJSON writes a single pointer as a string.
func (ps Pointers) MarshalJSON() ([]byte, error) {
	if len(ps) == 1 {
		return json.Marshal(ps[0])
	}
	return json.Marshal([]Pointer(ps))
}

// UnmarshalJSON reads "/id" or ["/data/id", "/id"].
func (ps *Pointers) UnmarshalJSON(b []byte) error {
	var one Pointer
	if json.Unmarshal(b, &one) == nil {
		*ps = Pointers{one}
		return nil
	}
	var many []Pointer
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf(`a pointer such as "/id" or a list of them, got %s`, b)
	}
	*ps = many
	return nil
}

func (ps Pointers) check() error {
	for _, p := range ps {
		if _, err := p.Tokens(); err != nil {
			return err
		}
		if p == "" {
			return errors.New(`an empty pointer names the whole answer; use a field such as "/id"`)
		}
	}
	return nil
}

// Tokens splits the pointer into its unescaped reference tokens.
func (p Pointer) Tokens() ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(string(p), "/") {
		return nil, fmt.Errorf("%q is not a JSON pointer: it must start with /, e.g. \"/payment/id\"", string(p))
	}
	parts := strings.Split(string(p)[1:], "/")
	for i, t := range parts {
		if strings.Contains(strings.NewReplacer("~0", "", "~1", "").Replace(t), "~") {
			return nil, fmt.Errorf("%q: ~ must be written ~0 and / as ~1 inside a token", string(p))
		}
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	return parts, nil
}

// Lookup finds the value at the pointer in a decoded JSON document.
func (p Pointer) Lookup(doc any) (any, bool) {
	toks, err := p.Tokens()
	if err != nil {
		return nil, false
	}
	for _, t := range toks {
		switch v := doc.(type) {
		case map[string]any:
			var ok bool
			if doc, ok = v[t]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(v) || (len(t) > 1 && t[0] == '0') {
				return nil, false
			}
			doc = v[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

// isPrefixOf reports whether p is p2 or one of its ancestors.
func (p Pointer) isPrefixOf(p2 Pointer) bool {
	return p == p2 || strings.HasPrefix(string(p2), string(p)+"/")
}

var placeholder = regexp.MustCompile(`\{[^{}]*\}`)

// ExpandURL fills a URL template's placeholders, path-escaped in the path
// and query-escaped in the query. It fails when a placeholder is unknown, a
// value in the path is empty (an empty segment would name another
// resource), or the values make a whole path segment . or .. (servers and
// proxies resolve dot-segments away, so the request would reach another
// resource; escaping cannot help, %2E is decoded first).
func ExpandURL(tmpl string, v URLValues) (string, error) {
	values := map[string]string{"{key}": v.Key, "{business_id}": v.BusinessID, "{tenant}": v.Tenant, "{operation}": v.Operation}
	var errs []error
	fill := func(part string, inPath bool) string {
		return placeholder.ReplaceAllStringFunc(part, func(ph string) string {
			val, ok := values[ph]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("unknown placeholder %s; use %s", ph, strings.Join(Placeholders, ", ")))
			case val == "" && inPath:
				errs = append(errs, fmt.Errorf("placeholder %s: the delivery has no %s", ph, strings.Trim(ph, "{}")))
			}
			if inPath {
				return url.PathEscape(val)
			}
			return url.QueryEscape(val)
		})
	}
	path, query, hasQuery := strings.Cut(tmpl, "?")
	out := fill(path, true)
	// A value never adds a segment (PathEscape escapes /), so the template's
	// segments and the URL's pair up.
	if segs, filled := strings.Split(path, "/"), strings.Split(out, "/"); len(segs) == len(filled) {
		for i, seg := range segs {
			if (filled[i] == "." || filled[i] == "..") && placeholder.MatchString(seg) {
				what := "path segment " + seg
				if placeholder.FindString(seg) == seg {
					what = "placeholder " + seg
				}
				errs = append(errs, fmt.Errorf("%s: %q: a path segment of . or .. names another resource; "+
					"use another value, or put the placeholder in the query", what, filled[i]))
			}
		}
	}
	if hasQuery {
		out += "?" + fill(query, false)
	}
	return out, errors.Join(errs...)
}

// CheckURL reports what is wrong with a URL template.
func CheckURL(tmpl string) error {
	u, err := ExpandURL(tmpl, URLValues{Key: "k", BusinessID: "b", Tenant: "t", Operation: "o"})
	if err != nil {
		return err
	}
	p, err := url.Parse(u)
	if err != nil {
		return err
	}
	if (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", tmpl)
	}
	if _, rest, _ := strings.Cut(tmpl, "://"); placeholder.MatchString(strings.SplitN(rest, "/", 2)[0]) {
		return errors.New("placeholders go in the path or query, not the host")
	}
	return nil
}

// validateKeyPlacement checks where the key goes (contract fields).
func (c Contract) validateKeyPlacement() error {
	var errs []error
	if _, err := c.KeyField.Tokens(); err != nil {
		errs = append(errs, fmt.Errorf("key_field: %w", err))
	} else if c.KeyField == "/" || (c.KeyField != "" && strings.TrimPrefix(string(c.KeyField), "/") == "") {
		errs = append(errs, errors.New(`key_field: "/" names a member with an empty name; use a field such as "/idempotency_key"`))
	}
	switch {
	case c.KeyMaxLength < 0:
		errs = append(errs, errors.New("key_max_length: must not be negative"))
	case c.KeyMaxLength > 0 && c.KeyMaxLength < KeyLength:
		errs = append(errs, fmt.Errorf("key_max_length: the destination takes keys of at most %d characters, but Courier's keys are %d; "+
			"this destination cannot take Courier's key", c.KeyMaxLength, KeyLength))
	}
	if c.KeyHeader != "" && !validHeaderName(c.KeyHeader) {
		errs = append(errs, fmt.Errorf("key_header: %q is not a valid header name", c.KeyHeader))
	}
	if m := c.ReplayMarker; m != nil && m.Value != "" && len(m.Values) > 0 {
		errs = append(errs, errors.New("replay_marker: set value or values, not both"))
	}
	return errors.Join(errs...)
}

var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func validHeaderName(s string) bool { return headerName.MatchString(s) }

// Classes a rule may name.
var ruleClasses = []Class{ClassConflict, ClassInFlight, ClassRejected, ClassThrottled, ClassServerError, ClassUnknown, ClassReplayed, ClassCreated}

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

// validateDialect checks the dialect fields of an HTTP destination; line
// finds the line of its i-th rule in the file.
func (d Destination) validateDialect(line func(i int) int) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	isHTTP := d.Adapter == AdapterHTTP
	if !isHTTP && (d.Method != "" || d.Headers != nil || d.Body != nil || d.Receipt != nil || d.Rules != nil || d.TLS != nil || d.Lookup != nil) {
		bad("method, headers, body, receipt, rules, tls, lookup: only for adapter http")
	}
	if isHTTP {
		if d.URL != "" {
			if err := CheckURL(d.URL); err != nil {
				bad("url: %v", err)
			}
		}
		if d.LookupURL != "" {
			if err := CheckURL(d.LookupURL); err != nil {
				bad("lookup_url: %v", err)
			}
		}
	}
	switch d.Method {
	case "", http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		bad("method: %q; use POST, PUT or PATCH", d.Method)
	}
	for name, v := range d.Headers {
		if !validHeaderName(name) {
			bad("headers: %q is not a valid header name", name)
		}
		if strings.ContainsAny(v, "\r\n") {
			bad("headers.%s: a header value must be one line", name)
		}
		switch k := http.CanonicalHeaderKey(name); {
		case k == http.CanonicalHeaderKey(d.Contract.KeyHeader):
			bad("headers.%s: is the key header; Courier sets it", name)
		case d.Auth != nil && k == http.CanonicalHeaderKey(d.Auth.Header):
			bad("headers.%s: is the auth header; its secret goes in auth.secret_env or auth.secret_file", name)
		case k == "Content-Type" || k == "Content-Length" || k == "Host" || strings.HasPrefix(k, "Webhook-"):
			bad("headers.%s: set by Courier", name)
		}
	}
	if b := d.Body; b != nil {
		if _, err := b.Under.Tokens(); err != nil {
			bad("body.under: %v", err)
		} else if b.Under == "" {
			bad("body.under: empty; leave body out for the payload as the body")
		}
		if kf := d.Contract.KeyField; kf != "" && b.Under != "" && kf.isPrefixOf(b.Under) {
			bad("contract.key_field: %s would replace the payload placed at body.under %s; pick a field beside it", kf, b.Under)
		}
	}
	errs = append(errs, prefixed("receipt", d.Receipt.validate()))
	if d.Lookup != nil {
		if d.Contract.Dedup != DedupLookup || d.LookupURL == "" {
			bad("lookup: reads the answer of lookup_url, for dedup lookup")
		}
		errs = append(errs, prefixed("lookup.", d.Lookup.validate()))
	}
	if t := d.TLS; t != nil {
		if (t.CertFile == "") != (t.KeyFile == "") {
			bad("tls: cert_file and key_file go together (a client certificate and its key)")
		}
		if *t == (TLS{}) {
			bad("tls: empty; set ca_file, cert_file with key_file, or server_name")
		}
	}
	if a := d.Auth; a != nil {
		switch a.Kind {
		case "", AuthHeader:
		case AuthStandardWebhooks:
			if !isHTTP {
				bad("auth.kind: standard-webhooks is for adapter http")
			}
			if a.Header != "" || a.Scheme != "" {
				bad("auth: standard-webhooks sets its own headers; leave out header and scheme")
			}
		default:
			bad("auth.kind: %q unknown; use header or standard-webhooks", a.Kind)
		}
	}
	errs = append(errs, validateRules(d.Rules, line))
	if m := d.Contract.ReplayMarker; m != nil && m.Status != 0 {
		for i, r := range d.Rules {
			if r.Status.Contains(m.Status) && r.Header == nil && r.Body == nil && r.Class != ClassReplayed {
				bad("rules[%d] (line %d): reads every %d as %s, so contract.replay_marker (status %d) never applies", i, line(i), m.Status, r.Class, m.Status)
			}
		}
	}
	return errors.Join(errs...)
}

// validate checks a receipt's pointers; nil is valid (the default).
func (r *ReceiptSpec) validate() error {
	if r == nil {
		return nil
	}
	var errs []error
	if err := r.ID.check(); err != nil {
		errs = append(errs, fmt.Errorf(".id: %w", err))
	}
	if _, err := r.Status.Tokens(); err != nil {
		errs = append(errs, fmt.Errorf(".status: %w", err))
	}
	if len(r.ID) > 0 && r.IDFromLocation {
		errs = append(errs, errors.New(": set id or id_from_location, not both"))
	}
	return errors.Join(errs...)
}

// validate checks a lookup's reading.
func (l *LookupReading) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, err := l.Items.Tokens(); err != nil {
		bad("items: %v", err)
	}
	if _, err := l.Count.Tokens(); err != nil {
		bad("count: %v", err)
	}
	if m := l.Match; m != nil {
		if _, err := m.Pointer.Tokens(); err != nil || m.Pointer == "" {
			bad(`match.pointer: needs the record's field that holds the key, such as "/external_id"`)
		}
		if m.Equals != "{key}" && m.Equals != "{business_id}" {
			bad(`match.equals: %q; use "{key}" or "{business_id}"`, m.Equals)
		}
	}
	if err := l.Receipt.validate(); err != nil {
		errs = append(errs, prefixed("receipt", err))
	}
	if l.Receipt != nil && l.Receipt.IDFromLocation {
		bad("receipt.id_from_location: a lookup's record names its id in the answer; use receipt.id")
	}
	for _, s := range l.NotFound {
		if s.Lo < 200 || s.Hi > 599 || s.Lo > s.Hi {
			bad("not_found: status %s: use a code from 200 to 599 or a range within it", s)
		} else if s.Lo < 300 {
			bad("not_found: status %s is a success: an answer that finds nothing says so in its body (lookup.items, lookup.count)", s)
		}
	}
	return errors.Join(errs...)
}

// Warnings are what a destinations file leaves ambiguous without being
// wrong: the worker logs them at start.
func (c Config) Warnings() []string {
	var out []string
	for _, name := range c.Names() {
		d := c.Destinations[name]
		if d.Contract.Dedup == DedupLookup && d.Adapter == AdapterHTTP && d.Lookup == nil {
			out = append(out, fmt.Sprintf("destination %q: lookup_url without a lookup reading: a 2xx answer is found only when it "+
				"names a resource id (at receipt.id, else /id, /ticket_id or /resource_id), else the lookup fails and the delivery parks; "+
				"for a list or search endpoint declare lookup.items and lookup.match", name))
		}
	}
	return out
}

func validateRules(rules []Rule, line func(i int) int) error {
	var errs []error
	for i, r := range rules {
		at := fmt.Sprintf("rules[%d] (line %d)", i, line(i))
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: %s", at, fmt.Sprintf(format, args...)))
		}
		s := r.Status
		if s.Lo < 100 || s.Hi > 599 || s.Lo > s.Hi {
			bad("status %s: use a code from 100 to 599 or a range lo-hi within it", s)
			continue
		}
		if !slices.Contains(ruleClasses, r.Class) {
			bad("class %q: use one of conflict, in_flight, rejected, throttled, server_error, unknown_outcome, replayed, created", r.Class)
			continue
		}
		if r.Receipt != nil {
			if r.Class != ClassCreated && r.Class != ClassReplayed {
				bad("receipt: only an answer read as created or replayed has a receipt, not %s", r.Class)
			}
			if err := r.Receipt.validate(); err != nil {
				bad("receipt%v", err)
			}
		}
		if h := r.Header; h != nil {
			if h.Name == "" || !validHeaderName(h.Name) || h.Pointer != "" {
				bad("header: needs a valid name (and no pointer)")
			}
			if h.Value != "" && len(h.Values) > 0 {
				bad("header: set value or values, not both")
			}
		}
		if b := r.Body; b != nil {
			if _, err := b.Pointer.Tokens(); err != nil || b.Pointer == "" || b.Name != "" {
				bad("body: needs a pointer such as \"/error/type\" (and no name)")
			}
			if b.Value != "" && len(b.Values) > 0 {
				bad("body: set value or values, not both")
			}
		}
		if r.Class.NothingApplied() {
			var risky []int
			for st := s.Lo; st <= s.Hi; st++ {
				if MayHaveApplied(st) {
					risky = append(risky, st)
				}
			}
			switch {
			case len(risky) > 0 && (!r.NothingApplied || s.Lo != s.Hi):
				bad("class %s means nothing was applied, but status %s may have applied the effect; "+
					"to say the destination documents that this answer applies nothing, write a rule for that one status with \"nothing_applied\": true",
					r.Class, ranges(risky))
			case len(risky) == 0 && r.NothingApplied:
				bad("nothing_applied: not needed, status %s is already read as nothing applied", s)
			}
		} else if r.NothingApplied {
			bad("nothing_applied: contradicts class %s, which may have applied the effect", r.Class)
		}
		for j, e := range rules[:i] {
			if e.Status.Lo <= s.Lo && e.Status.Hi >= s.Hi && covers(e.Header, r.Header) && covers(e.Body, r.Body) {
				if e.Class == r.Class {
					bad("unreachable: rules[%d] (line %d) matches every answer this rule matches", j, line(j))
				} else {
					bad("contradicts rules[%d] (line %d), which matches every answer this rule matches and names %s, not %s",
						j, line(j), e.Class, r.Class)
				}
				break
			}
		}
	}
	return errors.Join(errs...)
}

// ranges writes ascending statuses compactly: "500-502, 504-599".
func ranges(sts []int) string {
	var parts []string
	for i := 0; i < len(sts); {
		j := i
		for j+1 < len(sts) && sts[j+1] == sts[j]+1 {
			j++
		}
		parts = append(parts, StatusRange{sts[i], sts[j]}.String())
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// covers reports whether condition a (nil: any) holds whenever b does.
func covers(a, b *Match) bool { return a == nil || a.same(b) }

// ruleLines finds the line of each rule of destination name in file b, so
// that a rule's error names its own line; 0 where it cannot be found.
func ruleLines(b []byte, name string) func(int) int {
	var lines []int
	if start := keyOffset(b, name); start >= 0 {
		dec := json.NewDecoder(bytes.NewReader(b[start:]))
		var obj json.RawMessage
		if dec.Decode(&obj) == nil {
			region := b[start : start+int(dec.InputOffset())]
			if i := bytes.Index(region, []byte(`"rules"`)); i >= 0 {
				if j := bytes.IndexByte(region[i:], '['); j >= 0 {
					at := start + i + j
					ad := json.NewDecoder(bytes.NewReader(b[at:]))
					if _, err := ad.Token(); err == nil {
						for ad.More() {
							off := at + int(ad.InputOffset())
							for off < len(b) && bytes.IndexByte([]byte(" \t\r\n,"), b[off]) >= 0 {
								off++
							}
							lines = append(lines, bytes.Count(b[:off], []byte("\n"))+1)
							var raw json.RawMessage
							if ad.Decode(&raw) != nil {
								break
							}
						}
					}
				}
			}
		}
	}
	return func(i int) int {
		if i < len(lines) {
			return lines[i]
		}
		return 0
	}
}

// keyOffset is the offset of destination name's value in b, or -1.
func keyOffset(b []byte, name string) int {
	quoted, _ := json.Marshal(name)
	for from := 0; ; {
		i := bytes.Index(b[from:], quoted)
		if i < 0 {
			return -1
		}
		i += from + len(quoted)
		rest := bytes.TrimLeft(b[i:], " \t\r\n")
		if len(rest) > 0 && rest[0] == ':' {
			return len(b) - len(rest) + 1
		}
		from = i
	}
}
