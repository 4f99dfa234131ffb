package destinations

import (
	"errors"
	"fmt"

	"github.com/abde64c9/courier/contract"
)

// SMTP is where an smtp destination sends its mail (package smtpdest).
type SMTP struct {
	// Addr is the server's host:port.
	Addr string `json:"addr"`
	// From is the sender, e.g. "Courier <courier@example.com>".
	From string `json:"from"`
	// To are the recipients of a payload that names none.
	To []string `json:"to,omitempty"`
	// Domain is the right-hand side of the Message-IDs; left out: the
	// adapter's default.
	Domain string `json:"domain,omitempty"`
}

// validateSMTP checks a destination with adapter smtp.
func (d Destination) validateSMTP() error {
	var errs []error
	if d.SMTP == nil {
		errs = append(errs, errors.New(`smtp: required for adapter smtp, e.g. "smtp": {"addr": "mail.example.com:587", "from": "courier@example.com", "to": ["ops@example.com"]}`))
	} else {
		// The addresses' form is the adapter's to check (smtpdest's
		// Options.Check), when the worker opens it at start.
		if d.SMTP.Addr == "" {
			errs = append(errs, errors.New(`smtp.addr: required, the server's host:port, e.g. "mail.example.com:587"`))
		}
		if d.SMTP.From == "" {
			errs = append(errs, errors.New(`smtp.from: required, the sender, e.g. "Courier <courier@example.com>"`))
		}
	}
	if d.URL != "" || d.LookupURL != "" || d.Auth != nil || d.Driver != "" || d.DSN != "" || d.Table != "" {
		errs = append(errs, errors.New("url, lookup_url, auth, driver, dsn, table: not for adapter smtp; its server is smtp.addr"))
	}
	c := d.Contract
	if c.Dedup != contract.DedupNone {
		errs = append(errs, fmt.Errorf("contract.dedup: SMTP cannot deduplicate (a server that took the mail and lost its answer has delivered it); "+
			"declare none, not %q, so a lost answer parks for review", c.Dedup))
	}
	if c.Dedup == contract.DedupNone && c.KeyHeader != "" || c.KeyField != "" || c.ReplayMarker != nil || c.KeyRetention != 0 {
		errs = append(errs, errors.New("contract.key_header, key_field, replay_marker, key_retention: not for adapter smtp; "+
			"the key goes into the Message-ID, which no server deduplicates by"))
	}
	return errors.Join(errs...)
}
