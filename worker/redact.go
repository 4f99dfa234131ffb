package worker

import (
	"encoding/base64"
	"net/url"
	"strings"

	"github.com/abde64c9/courier/destination/httpdest"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/internal/redact"
)

// Redactor knows every secret the worker loads from cfg: each auth's
// secret and its header value, signing secrets, notifiers' credentials and
// database passwords. It reads them as the adapters do; one it cannot read
// is left to the adapter, which stops the worker with the reason. Warnings
// name the secrets too short to redact.
func Redactor(cfg destinations.Config) (*redact.Redactor, []string) {
	var secrets []redact.Secret
	addAuth := func(label string, a *destinations.Auth) {
		if a == nil {
			return
		}
		s, err := a.Secret()
		if err != nil {
			return
		}
		secrets = append(secrets, redact.Secret{Label: label, Value: s})
		if a.Kind == destinations.AuthStandardWebhooks {
			// The key alone, as a partner quoting its configuration might.
			if key, ok := strings.CutPrefix(s, httpdest.WebhookSecretPrefix); ok && key != "" {
				secrets = append(secrets, redact.Secret{Label: label, Value: key})
			}
			return
		}
		// The whole header value too, from the secret read once.
		v := a.HeaderValueFor(s)
		if v != s {
			secrets = append(secrets, redact.Secret{Label: label, Value: v})
		}
		// A Basic credential decoded, as a partner that shows who called
		// it does: user:password, and the password alone.
		if scheme, b64, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "Basic") {
			if userPass, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64)); err == nil {
				if _, pass, ok := strings.Cut(string(userPass), ":"); ok {
					secrets = append(secrets, redact.Secret{Label: label, Value: string(userPass)},
						redact.Secret{Label: label + " password", Value: pass})
				}
			}
		}
	}
	seen := map[*destinations.Notifier]bool{}
	if cfg.Notifier != nil {
		seen[cfg.Notifier] = true
		addAuth("notifier auth", cfg.Notifier.Auth)
	}
	for _, name := range cfg.Names() {
		d := cfg.Destinations[name]
		addAuth(name+" auth", d.Auth)
		if n := d.Notifier; n != nil && !seen[n] {
			seen[n] = true
			addAuth(name+" notifier auth", n.Auth)
		}
		if p := dsnPassword(d.DSN); p != "" {
			secrets = append(secrets, redact.Secret{Label: name + " dsn password", Value: p})
		}
	}
	return redact.New(secrets...)
}

// dsnPassword is the password of a PostgreSQL DSN, in URL or key=value
// form; "" for none (sqlite's file names have none).
func dsnPassword(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		p, _ := u.User.Password()
		return p
	}
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "password="); ok {
			return strings.Trim(v, `'`)
		}
	}
	return ""
}
