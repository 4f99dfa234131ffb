package redact

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestRedactsEveryForm(t *testing.T) {
	secret := "s3cr3t/t0ken+with=odd&chars"
	r, warnings := New(Secret{"helpdesk auth", secret}, Secret{"helpdesk auth", "Bearer " + secret}, Secret{"tiny", "abc"})
	if len(warnings) != 1 || !strings.Contains(warnings[0], "tiny") {
		t.Fatalf("warnings = %q, want one naming the short secret", warnings)
	}
	for _, form := range []string{
		secret, "Bearer " + secret,
		base64.StdEncoding.EncodeToString([]byte(secret)), base64.RawStdEncoding.EncodeToString([]byte(secret)),
		base64.URLEncoding.EncodeToString([]byte(secret)), base64.RawURLEncoding.EncodeToString([]byte(secret)),
		base64.StdEncoding.EncodeToString([]byte("Bearer " + secret)),
		url.QueryEscape(secret), url.PathEscape(secret), strings.ReplaceAll(secret, "/", `\/`), `s3cr3t/t0ken+with=odd\u0026chars`,
		// Lowercase hex; Python's quote(), which leaves '/'; every
		// character \u-escaped, in either case; '/' alone as \u002f;
		// the key header's value with its secret escaped.
		strings.ToLower(url.QueryEscape(secret)), "s3cr3t/t0ken%2Bwith%3Dodd%26chars", uEscaped(secret),
		strings.ReplaceAll(strings.ToUpper(uEscaped(secret)[:30]), `\U`, `\u`) + uEscaped(secret)[30:], `s3cr3t\u002ft0ken+with=odd\u0026chars`,
		"Bearer%20s3cr3t%2ft0ken%2bwith%3dodd%26chars", url.QueryEscape(url.QueryEscape(secret)),
	} {
		got := r.String(`{"echo":"` + form + `"}`)
		if strings.Contains(got, secret) || got != `{"echo":"[redacted: helpdesk auth]"}` {
			t.Errorf("%s: got %s", form, got)
		}
	}
	// Around the echo, the text and its escapes stay as they were; a match
	// covers whole escapes.
	for in, want := range map[string]string{
		`{"a":"x\n","b":"` + uEscaped(secret) + `\u00e9%41"}`: `{"a":"x\n","b":"[redacted: helpdesk auth]\u00e9%41"}`,
		`%2f%2F\u0041 s3cr3t`:                   `%2f%2F\u0041 s3cr3t`,
		`s3cr3t%2ft0ken%2bwith%3dodd%26chars%2`: `[redacted: helpdesk auth]%2`,
		`\ud83d\ude00\ud83d s3cr3t\u002`:        `\ud83d\ude00\ud83d s3cr3t\u002`,
	} {
		if got := r.String(in); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
	if got := r.String("abc is short"); got != "abc is short" {
		t.Errorf("a short secret was redacted: %s", got)
	}
	h := http.Header{"Location": {"https://x.test/tickets?token=" + url.QueryEscape(secret)}}
	r.Header(h)
	if strings.Contains(h.Get("Location"), "t0ken") {
		t.Errorf("header kept the secret: %s", h.Get("Location"))
	}
	err := r.Error(&fs.PathError{Op: "open", Path: secret, Err: fs.ErrNotExist})
	if strings.Contains(err.Error(), secret) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %q: redacted and still wrapping", err)
	}
	// Beside the first MinLen bytes of a form, a secret's escapes decode to
	// the secret's bytes, multibyte ones too.
	u, _ := New(Secret{"u", "pässwörd-ünïcode"})
	if got := u.String(`"p\u00e4ssw\u00f6rd-\u00fcn\u00efcode"`); got != `"[redacted: u]"` {
		t.Errorf("unicode: got %s", got)
	}
	var none *Redactor
	if none.String(secret) != secret || none.Error(nil) != nil {
		t.Error("the nil Redactor changes nothing")
	}
}

// uEscaped is s with every character written as a JSON \u escape.
func uEscaped(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// BenchmarkEscapedAnswer: a 1 MiB answer full of escapes (the most the
// HTTP adapter reads), against 40 secrets.
func BenchmarkEscapedAnswer(b *testing.B) {
	var secrets []Secret
	for i := range 40 {
		secrets = append(secrets, Secret{fmt.Sprint("s", i), fmt.Sprintf("secret/%02d+token=%x", i, i*7919)})
	}
	r, _ := New(secrets...)
	answer := strings.Repeat(`{"a":"x\n%2f\u0041secret/"}`, (1<<20)/28)
	b.SetBytes(int64(len(answer)))
	for b.Loop() {
		_ = r.String(answer)
	}
}
