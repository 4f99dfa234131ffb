// Package destinations is the destinations file: its schema, its dialect
// and its validation. The contract each destination declares, and what an
// attempt's result means under it, is package contract's. The worker, the
// commands and the adapters import it; the workflows get only what they
// route by.
package destinations

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/abde64c9/courier/contract"
)

// Adapter kinds a destination can use.
const (
	AdapterHTTP = "http"
	AdapterSQL  = "sql"
	// AdapterGo: the worker binary registers the adapter in code by the
	// destination's name (a destination.Adapter); the file declares only
	// its contract, reviewers, tenants and pacing.
	AdapterGo = "go"
	// AdapterNATS publishes to a NATS JetStream stream (nats.go).
	AdapterNATS = "nats"
	// AdapterSMTP sends email (smtp.go).
	AdapterSMTP = "smtp"
)

// Destination is one configured target: where it is, how to reach it, and
// its contract.
type Destination struct {
	Adapter string `json:"adapter"`

	// http
	URL       string `json:"url,omitempty"`
	LookupURL string `json:"lookup_url,omitempty"`
	// Lookup says how to read lookup_url's answer (lookup.go).
	Lookup *LookupReading `json:"lookup,omitempty"`
	Auth   *Auth          `json:"auth,omitempty"`
	// The destination's dialect (see dialect.go); left out: Courier's own.
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    *Body             `json:"body,omitempty"`
	Receipt *ReceiptSpec      `json:"receipt,omitempty"`
	Rules   []Rule            `json:"rules,omitempty"`
	TLS     *TLS              `json:"tls,omitempty"`

	// sql
	Driver string `json:"driver,omitempty"` // sqlite or pgx
	DSN    string `json:"dsn,omitempty"`
	Table  string `json:"table,omitempty"`

	NATS *NATS `json:"nats,omitempty"`
	SMTP *SMTP `json:"smtp,omitempty"`

	// RateLimit, when positive, caps this destination's attempts per second
	// across all workers (a task queue of its own with a server-side limit).
	RateLimit float64 `json:"rate_limit,omitempty"`

	// Notifier, when set, is told of this destination's parked deliveries
	// instead of the file's notifier.
	Notifier *Notifier `json:"notifier,omitempty"`

	// Reviewers, when set, replaces the file's reviewers for this
	// destination's deliveries.
	Reviewers Reviewers `json:"reviewers,omitempty"`

	// Tenants, when set, are the only tenants whose deliveries may use this
	// destination (and its credentials); left out, every tenant may.
	Tenants []string `json:"tenants,omitempty"`

	Contract contract.Contract `json:"contract"`
}

// Auth names where a destination's credential lives on the worker; the
// credential itself never enters config, workflow input or history.
type Auth struct {
	Kind       string `json:"kind,omitempty"`   // header (default) or standard-webhooks
	Header     string `json:"header"`           // e.g. Authorization
	Scheme     string `json:"scheme,omitempty"` // e.g. Bearer
	SecretEnv  string `json:"secret_env,omitempty"`
	SecretFile string `json:"secret_file,omitempty"`
}

// Config is a destinations file.
type Config struct {
	Destinations map[string]Destination `json:"destinations"`
	// Reviewers, when set, is who may decide a review (see Reviewers) where
	// a destination has no list of its own. Plain names only stop mistakes:
	// Temporal does not authenticate who sends a signal or update. Empty:
	// anyone who can signal.
	Reviewers Reviewers `json:"reviewers,omitempty"`
	// Notifier, when set, is told when a delivery parks for review and at
	// each reminder.
	Notifier *Notifier `json:"notifier,omitempty"`
}

// Names lists the destinations in a stable order.
func (c Config) Names() []string {
	names := make([]string, 0, len(c.Destinations))
	for n := range c.Destinations {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Contracts returns each destination's contract by name.
func (c Config) Contracts() map[string]contract.Contract {
	m := make(map[string]contract.Contract, len(c.Destinations))
	for n, d := range c.Destinations {
		m[n] = d.Contract
	}
	return m
}

// Load reads and checks a destinations file; see Parse.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("destinations file: %w", err)
	}
	cfg, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Parse reads a destinations file strictly: unknown fields, unknown dedup
// kinds and unbounded retries are errors, reported with their line and the
// destination they belong to. Defaults are filled in for optional fields.
func Parse(b []byte) (Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("line %d: %w", lineAt(b, dec.InputOffset(), err), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, errors.New("trailing data after the destinations object")
	}
	if len(cfg.Destinations) == 0 {
		return Config{}, errors.New(`no destinations: the file needs {"destinations": {"name": {...}}}`)
	}
	var errs []error
	if err := cfg.Reviewers.validate(); err != nil {
		errs = append(errs, fmt.Errorf("reviewers (line %d): %w", lineOfKey(b, "reviewers"), err))
	}
	if cfg.Notifier != nil {
		if err := cfg.Notifier.validate(); err != nil {
			errs = append(errs, fmt.Errorf("notifier (line %d): %w", lineOfKey(b, "notifier"), Prefixed("notifier.", err)))
		}
	}
	for _, name := range cfg.Names() {
		d := cfg.Destinations[name].withDefaults()
		cfg.Destinations[name] = d
		if err := d.check(ruleLines(b, name)); err != nil {
			errs = append(errs, fmt.Errorf("destination %q (line %d): %w", name, lineOfKey(b, name), err))
		}
	}
	return cfg, errors.Join(errs...)
}

// Declare adds a destination declared in code rather than in the file (a
// team's own adapter, AdapterGo), with the file's defaults and checked
// exactly as Parse checks the file's.
func (c *Config) Declare(name string, d Destination) error {
	if strings.TrimSpace(name) == "" || name != strings.TrimSpace(name) {
		return fmt.Errorf("destination %q: not a destination's name", name)
	}
	if _, ok := c.Destinations[name]; ok {
		return fmt.Errorf("destination %q: declared twice (in the file and in code, or twice in code)", name)
	}
	d = d.withDefaults()
	if err := d.check(func(int) int { return 0 }); err != nil {
		return fmt.Errorf("destination %q (declared in code): %w", name, err)
	}
	if c.Destinations == nil {
		c.Destinations = map[string]Destination{}
	}
	c.Destinations[name] = d
	return nil
}

// withDefaults fills the contract's optional fields. A Go or NATS adapter
// places the key itself, so it gets no default key header.
func (d Destination) withDefaults() Destination {
	header := d.Contract.KeyHeader
	d.Contract = d.Contract.WithDefaults()
	if d.Adapter == AdapterGo || d.Adapter == AdapterNATS {
		d.Contract.KeyHeader = header
	}
	return d
}

// check is every check of one destination; line finds its i-th rule.
func (d Destination) check(line func(i int) int) error {
	return errors.Join(d.validate(), d.validateDialect(line))
}

func (d Destination) validate() error {
	var errs []error
	switch d.Adapter {
	case AdapterHTTP:
		if d.URL == "" {
			errs = append(errs, errors.New("url: required for adapter http"))
		}
		if d.Contract.Dedup == contract.DedupLookup && d.LookupURL == "" {
			errs = append(errs, errors.New("lookup_url: required for dedup lookup"))
		}
		if d.Contract.Dedup == contract.DedupUniqueCommit {
			errs = append(errs, errors.New("contract.dedup: unique-commit needs adapter sql"))
		}
		if c := d.Contract; c.Dedup == contract.DedupKey && c.KeyHeader == "" && c.KeyField == "" {
			errs = append(errs, errors.New("contract.key_header: required for dedup key (or key_field, for a key in the body)"))
		}
	case AdapterSQL:
		if d.Driver != "sqlite" && d.Driver != "pgx" {
			errs = append(errs, fmt.Errorf("driver: %q unknown; use sqlite or pgx", d.Driver))
		}
		if d.DSN == "" {
			errs = append(errs, errors.New("dsn: required for adapter sql"))
		}
		if d.Contract.Dedup != contract.DedupUniqueCommit {
			errs = append(errs, fmt.Errorf("contract.dedup: adapter sql always deduplicates by a UNIQUE key; declare unique-commit, not %q", d.Contract.Dedup))
		}
	case AdapterGo:
		if d.URL != "" || d.LookupURL != "" || d.Auth != nil || d.Driver != "" || d.DSN != "" || d.Table != "" {
			errs = append(errs, errors.New("url, lookup_url, auth, driver, dsn, table: not for adapter go; "+
				"the adapter registered in the worker binary holds where it sends and its credentials"))
		}
		if c := d.Contract; c.KeyHeader != "" || c.KeyField != "" || c.ReplayMarker != nil {
			errs = append(errs, errors.New("contract.key_header, key_field, replay_marker: only for adapter http; "+
				"a Go adapter gives the destination the key itself (destination.Request.Key) and says when it replayed"))
		}
	case AdapterNATS:
		errs = append(errs, d.validateNATS())
	case AdapterSMTP:
		errs = append(errs, d.validateSMTP())
	case "":
		errs = append(errs, errors.New("adapter: missing; use http, sql, nats, smtp or go"))
	default:
		errs = append(errs, fmt.Errorf("adapter: %q unknown; use http, sql, nats, smtp or go", d.Adapter))
	}
	if d.NATS != nil && d.Adapter != AdapterNATS {
		errs = append(errs, errors.New("nats: only for adapter nats"))
	}
	if d.SMTP != nil && d.Adapter != AdapterSMTP {
		errs = append(errs, errors.New("smtp: only for adapter smtp"))
	}
	if d.Auth != nil {
		errs = append(errs, d.Auth.validate("auth"))
	}
	if d.Notifier != nil {
		errs = append(errs, Prefixed("notifier.", d.Notifier.validate()))
	}
	errs = append(errs, d.Reviewers.validate())
	if d.RateLimit < 0 {
		errs = append(errs, errors.New("rate_limit: must not be negative"))
	}
	if d.Tenants != nil && len(d.Tenants) == 0 {
		errs = append(errs, errors.New("tenants: empty; name the tenants that may use it, or leave it out for every tenant"))
	}
	for i, t := range d.Tenants {
		if strings.TrimSpace(t) == "" || t != strings.TrimSpace(t) {
			errs = append(errs, fmt.Errorf("tenants[%d]: %q is not a tenant's name", i, t))
		}
	}
	if err := errors.Join(d.Contract.Validate(), validateKeyPlacement(d.Contract)); err != nil {
		errs = append(errs, Prefixed("contract.", err))
	}
	return errors.Join(errs...)
}

// validate checks the auth block named field (e.g. auth).
func (a *Auth) validate(field string) error {
	var errs []error
	if a.Header == "" && a.Kind != AuthStandardWebhooks {
		errs = append(errs, fmt.Errorf("%s.header: required", field))
	}
	if (a.SecretEnv == "") == (a.SecretFile == "") {
		errs = append(errs, fmt.Errorf("%s: set exactly one of secret_env or secret_file", field))
	}
	return errors.Join(errs...)
}

// HeaderValue is the credential as its header carries it (HeaderValueFor
// the secret read).
func (a *Auth) HeaderValue() (string, error) {
	secret, err := a.Secret()
	if err != nil {
		return "", err
	}
	return a.HeaderValueFor(secret), nil
}

// HeaderValueFor is secret as the header carries it: the scheme, if any,
// then the secret.
func (a *Auth) HeaderValueFor(secret string) string {
	if a.Scheme == "" {
		return secret
	}
	return a.Scheme + " " + secret
}

// Secret reads the destination's credential from the worker's environment or
// file, failing with the variable or path to set.
func (a *Auth) Secret() (string, error) {
	if a.SecretEnv != "" {
		v, ok := os.LookupEnv(a.SecretEnv)
		if !ok || v == "" {
			return "", fmt.Errorf("auth.secret_env: environment variable %s is not set", a.SecretEnv)
		}
		return v, nil
	}
	b, err := os.ReadFile(a.SecretFile)
	if err != nil {
		return "", fmt.Errorf("auth.secret_file: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("auth.secret_file: %s is empty", a.SecretFile)
	}
	return v, nil
}

// Prefixed puts prefix before each line of err: a block's errors named
// by their field as the file names it ("smtp." + "addr: ...").
func Prefixed(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var errs []error
	for _, line := range strings.Split(err.Error(), "\n") {
		errs = append(errs, errors.New(prefix+line))
	}
	return errors.Join(errs...)
}

// Allows says whether the tenant's deliveries may use the destination: one
// without tenants serves every tenant.
func (d Destination) Allows(tenant string) bool {
	return d.Tenants == nil || slices.Contains(d.Tenants, tenant)
}
