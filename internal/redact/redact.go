// Package redact replaces the credentials a worker holds with a marker in
// what Courier records or passes on. A destination may echo its request
// (a debugging proxy, an error body quoting the headers, a test double),
// and whatever Courier keeps of its answer lands in history, results,
// details, logs and notices: so answers are redacted where they enter,
// before anything is cut, read or recorded. Imported by the worker and the
// adapters that read partners' answers.
package redact

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// MinLen is the shortest secret redacted: a shorter one would also replace
// ordinary words and numbers in the answers it guards.
const MinLen = 8

// Secret is one credential and what to call it in its marker.
type Secret struct {
	Label string // e.g. "helpdesk auth"
	Value string
}

// Redactor replaces every form of its secrets with "[redacted: label]".
// The nil Redactor changes nothing.
type Redactor struct {
	r      *strings.Replacer
	labels []string
}

// New builds the redactor of secrets. A secret shorter than MinLen is left
// out, and named in the warnings returned.
func New(secrets ...Secret) (*Redactor, []string) {
	type form struct{ old, marker string }
	var forms []form
	var warnings []string
	seen := map[string]bool{}
	red := &Redactor{}
	for _, s := range secrets {
		if len(s.Value) < MinLen {
			warnings = append(warnings, fmt.Sprintf("%s: shorter than %d bytes, so it is not redacted from answers "+
				"(it would replace ordinary words); use a longer secret", s.Label, MinLen))
			continue
		}
		marker := "[redacted: " + s.Label + "]"
		red.labels = append(red.labels, s.Label)
		for _, f := range Forms(s.Value) {
			if !seen[f] {
				seen[f] = true
				forms = append(forms, form{f, marker})
			}
		}
	}
	if len(forms) == 0 {
		return red, warnings
	}
	// The longest first: strings.Replacer tries its pairs in order at each
	// position, and "Bearer s3cret" must win over "s3cret" alone.
	sort.SliceStable(forms, func(i, j int) bool { return len(forms[i].old) > len(forms[j].old) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f.old, f.marker)
	}
	red.r = strings.NewReplacer(pairs...)
	return red, warnings
}

// Forms are the ways a secret shows up in an echo: as it is, base64 (std
// and URL alphabets, padded or not), URL-encoded (query and path escaping),
// and inside a JSON string (escaped as Go and as PHP write it).
func Forms(v string) []string {
	b := []byte(v)
	forms := []string{
		v,
		base64.StdEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b),
		base64.RawURLEncoding.EncodeToString(b),
		url.QueryEscape(v),
		url.PathEscape(v),
		strings.ReplaceAll(v, "/", `\/`),
	}
	if j, err := json.Marshal(v); err == nil {
		forms = append(forms, strings.Trim(string(j), `"`))
	}
	return forms
}

// Labels names the secrets redacted.
func (r *Redactor) Labels() []string {
	if r == nil {
		return nil
	}
	return r.labels
}

// String is s with every secret replaced by its marker.
func (r *Redactor) String(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Bytes is b with every secret replaced; b itself when it holds none.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil || r.r == nil || len(b) == 0 {
		return b
	}
	s := string(b)
	if out := r.r.Replace(s); out != s {
		return []byte(out)
	}
	return b
}

// Header redacts h's values in place (a Location the receipt's id is read
// from, a header a rule matches).
func (r *Redactor) Header(h http.Header) {
	if r == nil || r.r == nil {
		return
	}
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = r.r.Replace(v)
		}
		h[k] = vs
	}
}

// Error is err with its message redacted; errors.Is and As still see what
// it wraps.
func (r *Redactor) Error(err error) error {
	if err == nil || r == nil || r.r == nil {
		return err
	}
	msg := err.Error()
	if red := r.r.Replace(msg); red != msg {
		return &redacted{msg: red, err: err}
	}
	return err
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }
