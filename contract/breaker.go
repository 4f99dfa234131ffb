package contract

import (
	"errors"
	"fmt"
)

// Breaker is a destination's circuit breaker: after Failures consecutive
// attempts that found it down (not_sent, throttled, server_error) within
// Window, no attempt is sent for CoolDown; then one attempt goes through,
// and its answer closes the breaker or opens it again. While it is open,
// deliveries wait without spending attempts or deadline. It holds attempts
// back only: what an attempt's result means is still the contract's.
type Breaker struct {
	Failures int      `json:"failures"`
	Window   Duration `json:"window"`
	CoolDown Duration `json:"cool_down"`
}

// MaxBreakerFailures bounds Breaker.Failures.
const MaxBreakerFailures = 1000

func (b *Breaker) validate() error {
	var errs []error
	if b.Failures < 1 || b.Failures > MaxBreakerFailures {
		errs = append(errs, fmt.Errorf("breaker.failures: must be between 1 and %d", MaxBreakerFailures))
	}
	if b.Window <= 0 {
		errs = append(errs, errors.New(`breaker.window: required and positive, e.g. "1m"`))
	}
	if b.CoolDown <= 0 {
		errs = append(errs, errors.New(`breaker.cool_down: required and positive, e.g. "30s"`))
	}
	return errors.Join(errs...)
}

// FoundDown reports whether an attempt of this class found the destination
// down: it counts toward opening the breaker.
func (cl Class) FoundDown() bool {
	return cl == ClassNotSent || cl == ClassThrottled || cl == ClassServerError
}

// Answered reports whether the destination answered for itself: a breaker
// closes on it.
func (cl Class) Answered() bool {
	switch cl {
	case ClassCreated, ClassReplayed, ClassRejected, ClassConflict, ClassInFlight:
		return true
	}
	return false
}
