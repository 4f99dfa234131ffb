// Package contract holds what a destination promises about duplicates and
// retries, and the one table that turns an attempt's result into the
// workflow's next step. Pure and deterministic: the workflows, activities
// and the destinations file all import it.
package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Dedup is how a destination deduplicates repeated requests.
type Dedup string

const (
	// DedupKey: honours an idempotency-key header and replays the first receipt.
	DedupKey Dedup = "key"
	// DedupUniqueCommit: the key is stored under a UNIQUE constraint in the
	// same transaction as the effect.
	DedupUniqueCommit Dedup = "unique-commit"
	// DedupLookup: no dedup, but an effect can be found by its key.
	DedupLookup Dedup = "lookup"
	// DedupNone: nothing; an unknown outcome needs a human.
	DedupNone Dedup = "none"
)

// Limits that make a retry policy bounded.
const (
	MaxAttemptsLimit = 100
	MaxDeadline      = 30 * 24 * time.Hour
)

// Contract is one destination's declared behaviour.
type Contract struct {
	Dedup     Dedup  `json:"dedup"`
	KeyHeader string `json:"key_header,omitempty"`
	// KeyField places the key in the JSON body too (or instead, for
	// dedup key with no key_header), at a JSON pointer such as
	// "/idempotency_key". Its syntax is the destinations file's
	// (destinations.Pointer), checked there.
	KeyField string `json:"key_field,omitempty"`
	// KeyMaxLength is the longest key the destination accepts; checked
	// at load against the key's length.
	KeyMaxLength int           `json:"key_max_length,omitempty"`
	ReplayMarker *ReplayMarker `json:"replay_marker,omitempty"`
	// KeyRetention is how long the destination remembers keys; once an
	// attempt may have applied, a later send goes only when it would
	// arrive within it (see KeyExpired). Zero: forever.
	KeyRetention Duration `json:"key_retention,omitempty"`
	Retry        Retry    `json:"retry"`
	// ReviewReminder, when set, reminds reviewers of a delivery that has been
	// waiting this long, and again every interval after. It never decides.
	ReviewReminder Duration `json:"review_reminder,omitempty"`
	// Breaker, when set, holds attempts back while the destination is down.
	Breaker *Breaker `json:"breaker,omitempty"`
	// Settle, for dedup lookup only, is how long an effect the destination
	// received may take to appear to its lookup (a queue, a search index):
	// the lookup after an unknown outcome waits this long after the
	// attempt, so that a slow commit is not read as "not found" and sent
	// again. Left out: DefaultSettle (see SettleTime).
	Settle *Duration `json:"settle,omitempty"`
}

// Bounds of Contract.Settle.
const (
	DefaultSettle = 10 * time.Second
	MaxSettle     = time.Hour
)

// SettleTime is how long the lookup after an unknown outcome waits after
// the attempt: the declared settle, or DefaultSettle for a lookup contract
// recorded before it was declared; zero for any other dedup kind.
func (c Contract) SettleTime() time.Duration {
	switch {
	case c.Dedup != DedupLookup:
		return 0
	case c.Settle == nil:
		return DefaultSettle
	}
	return c.Settle.D()
}

// ReplayMarker says how a replayed receipt is recognised: a response header
// with a value (or any of Values; neither: the header's presence), or a
// status code (e.g. 200 for a replay vs 201 for new).
type ReplayMarker struct {
	Header string   `json:"header,omitempty"`
	Value  string   `json:"value,omitempty"`
	Values []string `json:"values,omitempty"`
	Status int      `json:"status,omitempty"`
}

// Retry is the bounded retry budget of a destination.
type Retry struct {
	// MaxAttempts counts the first attempt.
	MaxAttempts     int      `json:"max_attempts"`
	InitialInterval Duration `json:"initial_interval,omitempty"`
	MaxInterval     Duration `json:"max_interval,omitempty"`
	Backoff         float64  `json:"backoff,omitempty"`
	// AttemptTimeout bounds one attempt, connection to receipt.
	AttemptTimeout Duration `json:"attempt_timeout"`
	// Deadline bounds all attempts of one delivery, review time excluded.
	Deadline Duration `json:"deadline"`
}

// Interval is the wait before retry number n (1 = the wait after the first
// attempt): exponential from InitialInterval, capped at MaxInterval.
func (r Retry) Interval(n int) time.Duration {
	d := float64(r.InitialInterval.D())
	for i := 1; i < n; i++ {
		d *= r.Backoff
		if d >= float64(r.MaxInterval.D()) {
			return r.MaxInterval.D()
		}
	}
	return min(time.Duration(d), r.MaxInterval.D())
}

// WithDefaults fills the optional fields a config may leave out.
func (c Contract) WithDefaults() Contract {
	if c.Retry.InitialInterval == 0 {
		c.Retry.InitialInterval = Duration(time.Second)
	}
	if c.Retry.Backoff == 0 {
		c.Retry.Backoff = 2
	}
	if c.Retry.MaxInterval == 0 {
		c.Retry.MaxInterval = Duration(max(time.Minute, c.Retry.InitialInterval.D()))
	}
	if c.Dedup == DedupKey && c.KeyHeader == "" && c.KeyField == "" {
		c.KeyHeader = "Idempotency-Key"
	}
	if c.Dedup == DedupLookup && c.Settle == nil {
		// Stated, so that the terms a delivery records say what it waits.
		s := Duration(DefaultSettle)
		c.Settle = &s
	}
	return c
}

// Validate reports every way the contract is not usable, each naming its
// field. Where the key goes (key_field, key_max_length, the key header's
// name) is checked with the destination (package destinations).
func (c Contract) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch c.Dedup {
	case DedupKey, DedupUniqueCommit, DedupLookup, DedupNone:
	case "":
		bad("dedup", "missing; set one of key, unique-commit, lookup, none")
	default:
		bad("dedup", "unknown kind %q; use one of key, unique-commit, lookup, none", c.Dedup)
	}
	if m := c.ReplayMarker; m != nil && (m.Header == "") == (m.Status == 0) {
		bad("replay_marker", "set either header (with value) or status")
	}
	if m := c.ReplayMarker; m != nil && m.Status != 0 && (m.Value != "" || len(m.Values) > 0) {
		bad("replay_marker", "value and values go with header, not status")
	}
	if c.KeyRetention < 0 {
		bad("key_retention", "must not be negative")
	}
	if c.ReviewReminder < 0 {
		bad("review_reminder", "must not be negative")
	}
	r := c.Retry
	switch {
	case r.MaxAttempts <= 0:
		bad("retry.max_attempts", "must be between 1 and %d (unbounded retries are not allowed)", MaxAttemptsLimit)
	case r.MaxAttempts > MaxAttemptsLimit:
		bad("retry.max_attempts", "%d is over the limit of %d", r.MaxAttempts, MaxAttemptsLimit)
	}
	if r.AttemptTimeout <= 0 {
		bad("retry.attempt_timeout", "required and positive, e.g. \"10s\"")
	}
	if r.Deadline <= 0 || r.Deadline.D() > MaxDeadline {
		bad("retry.deadline", "required, positive and at most %s, e.g. \"10m\"", MaxDeadline)
	}
	if r.InitialInterval < 0 || r.MaxInterval < 0 || r.MaxInterval < r.InitialInterval {
		bad("retry.max_interval", "intervals must be positive with max_interval >= initial_interval")
	}
	if r.Backoff < 1 {
		bad("retry.backoff", "must be at least 1")
	}
	if c.Breaker != nil {
		errs = append(errs, c.Breaker.validate())
	}
	if s := c.Settle; s != nil {
		switch {
		case c.Dedup != DedupLookup:
			bad("settle", "only a dedup lookup destination looks an effect up; remove settle, or declare dedup lookup")
		case *s <= 0:
			bad("settle", "must be positive, e.g. \"10s\": even a destination that shows a write at once may still be "+
				"processing a request the attempt gave up on")
		case s.D() > MaxSettle:
			bad("settle", "%s is over the limit of %s", s, MaxSettle)
		case r.Deadline > 0 && *s >= r.Deadline:
			bad("settle", "%s is not shorter than retry.deadline (%s): no resend could follow the lookup; "+
				"raise the deadline or shorten settle", s, r.Deadline)
		}
	}
	return errors.Join(errs...)
}

// Duration is a time.Duration written in config as "10s", "24h".
type Duration time.Duration

// D returns the standard library value.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"10s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}
