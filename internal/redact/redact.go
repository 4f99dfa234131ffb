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
	// escaped holds the forms' normal forms (see normal) by their first
	// MinLen bytes, longest first, to be found in an answer's normal form:
	// echoes escape a secret in more ways (hex in either case, '/' escaped
	// or not, any character as \u) than a list of forms could hold.
	escaped map[[MinLen]byte][]needle
}

type needle struct{ normal, marker string }

// New builds the redactor of secrets. A secret shorter than MinLen is left
// out, and named in the warnings returned.
func New(secrets ...Secret) (*Redactor, []string) {
	type form struct{ old, marker string }
	var forms []form
	var warnings []string
	seen, seenNormal := map[string]bool{}, map[string]bool{}
	red := &Redactor{escaped: map[[MinLen]byte][]needle{}}
	for _, s := range secrets {
		if len(s.Value) < MinLen {
			warnings = append(warnings, fmt.Sprintf("%s: shorter than %d bytes, so it is not redacted from answers "+
				"(it would replace ordinary words); use a longer secret", s.Label, MinLen))
			continue
		}
		marker := "[redacted: " + s.Label + "]"
		red.labels = append(red.labels, s.Label)
		for _, f := range formsOf(s.Value) {
			if !seen[f] {
				seen[f] = true
				forms = append(forms, form{f, marker})
			}
			// The form escaped is the form's normal form in the answer's;
			// the form itself too, where its own characters look like
			// escapes and the answer escapes them (%2541 for %41). A
			// normal form shorter than MinLen (a secret written mostly in
			// escapes) would match ordinary text: only the form is found.
			for _, n := range []string{f, string(normal(f, nil))} {
				if len(n) >= MinLen && !seenNormal[n] {
					seenNormal[n] = true
					k := [MinLen]byte([]byte(n[:MinLen]))
					red.escaped[k] = append(red.escaped[k], needle{n, marker})
				}
			}
		}
	}
	if len(forms) == 0 {
		return red, warnings
	}
	for _, ns := range red.escaped {
		sort.SliceStable(ns, func(i, j int) bool { return len(ns[i].normal) > len(ns[j].normal) })
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

// formsOf are the ways a secret shows up in an echo that decoding the
// answer's escapes does not reveal: as it is, base64 (std and URL
// alphabets, padded or not), and URL-encoded with '+' for a space. Each is
// also found with any of its characters escaped (URL or JSON), since the
// answer and the forms are compared in their normal forms.
func formsOf(v string) []string {
	b := []byte(v)
	return []string{
		v,
		base64.StdEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b),
		base64.RawURLEncoding.EncodeToString(b),
		url.QueryEscape(v),
	}
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
	return r.replace(s)
}

// replace replaces the forms as they are, then, where s holds an escape,
// those its escapes hide.
func (r *Redactor) replace(s string) string {
	s = r.r.Replace(s)
	if !strings.ContainsAny(s, `%\`) {
		return s
	}
	at := make([]int, 0, len(s)+1)
	n := normal(s, &at)
	var b strings.Builder
	copied, found := 0, false // copied: how much of s is in b
	for i := 0; i+MinLen <= len(n); {
		nd, ok := r.match(n[i:])
		if !ok {
			i++
			continue
		}
		// The match covers whole escapes: from the one that wrote n[i] to
		// the end of the one that wrote its last byte.
		j := i + len(nd.normal)
		for j < len(n) && at[j] == at[j-1] {
			j++
		}
		b.WriteString(s[copied:at[i]])
		b.WriteString(nd.marker)
		copied, i, found = at[j], j, true
	}
	if !found {
		return s
	}
	b.WriteString(s[copied:])
	return b.String()
}

// match is the longest needle n starts with.
func (r *Redactor) match(n []byte) (needle, bool) {
	for _, nd := range r.escaped[[MinLen]byte(n[:MinLen])] {
		if len(n) >= len(nd.normal) && string(n[:len(nd.normal)]) == nd.normal {
			return nd, true
		}
	}
	return needle{}, false
}

// Bytes is b with every secret replaced; b itself when it holds none.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil || r.r == nil || len(b) == 0 {
		return b
	}
	s := string(b)
	if out := r.replace(s); out != s {
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
			vs[i] = r.replace(v)
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
	if red := r.replace(msg); red != msg {
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
