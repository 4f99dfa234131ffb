package destinations

import (
	"errors"
	"fmt"
	"net/url"
)

// Notifier is a webhook told when a delivery parks for review and at each
// reminder: a chat webhook or an incident tool. It only tells; it never
// decides, and a notifier that is down never holds a delivery back.
type Notifier struct {
	URL  string `json:"url"`
	Auth *Auth  `json:"auth,omitempty"`
	// WebUI is the Temporal web UI's address, for the link in each notice.
	WebUI string `json:"web_ui,omitempty"`
}

// NotifierFor is the notifier of a destination: its own, else the file's.
func (c Config) NotifierFor(destination string) *Notifier {
	if n := c.Destinations[destination].Notifier; n != nil {
		return n
	}
	return c.Notifier
}

func (n *Notifier) validate() error {
	var errs []error
	if err := absoluteHTTP(n.URL); err != nil {
		errs = append(errs, fmt.Errorf("url: %w", err))
	}
	if n.WebUI != "" {
		if err := absoluteHTTP(n.WebUI); err != nil {
			errs = append(errs, fmt.Errorf("web_ui: %w", err))
		}
	}
	if n.Auth != nil {
		errs = append(errs, n.Auth.validate("auth"))
		if n.Auth.Kind != "" && n.Auth.Kind != AuthHeader {
			errs = append(errs, fmt.Errorf("auth.kind: %q is for destinations; a notifier's auth is a header", n.Auth.Kind))
		}
	}
	return errors.Join(errs...)
}

func absoluteHTTP(s string) error {
	if s == "" {
		return errors.New("required, an http(s) URL")
	}
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", s)
	}
	return nil
}
