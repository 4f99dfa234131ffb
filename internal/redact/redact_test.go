package redact

import (
	"encoding/base64"
	"errors"
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
	} {
		got := r.String(`{"echo":"` + form + `"}`)
		if strings.Contains(got, secret) || got != `{"echo":"[redacted: helpdesk auth]"}` {
			t.Errorf("%s: got %s", form, got)
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
	var none *Redactor
	if none.String(secret) != secret || none.Error(nil) != nil {
		t.Error("the nil Redactor changes nothing")
	}
}
