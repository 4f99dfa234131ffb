package destinations

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/abde64c9/courier/contract"
)

// validateKeyPlacement checks where the key goes (contract fields). It
// lives here, not in Contract.Validate, because it needs the pointer and
// header-name syntax of the file's dialect.
func validateKeyPlacement(c contract.Contract) error {
	var errs []error
	if _, err := Pointer(c.KeyField).Tokens(); err != nil {
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
		if kf := Pointer(d.Contract.KeyField); kf != "" && b.Under != "" && kf.isPrefixOf(b.Under) {
			bad("contract.key_field: %s would replace the payload placed at body.under %s; pick a field beside it", kf, b.Under)
		}
	}
	errs = append(errs, Prefixed("receipt", d.Receipt.validate()))
	if d.Lookup != nil {
		if d.Contract.Dedup != contract.DedupLookup || d.LookupURL == "" {
			bad("lookup: reads the answer of lookup_url, for dedup lookup")
		}
		errs = append(errs, Prefixed("lookup.", d.Lookup.validate()))
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
			if r.Status.Contains(m.Status) && r.Header == nil && r.Body == nil && r.Class != contract.ClassReplayed {
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
			if r.Class != contract.ClassCreated && r.Class != contract.ClassReplayed {
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
