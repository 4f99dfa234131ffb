package contract

import (
	"math"
	"time"
)

// Class is what one attempt's result says about the effect at the destination.
// Adapters map their transport's facts (HTTP status, SQL error, timeouts) onto
// these; Next decides what they mean for a destination's contract.
type Class string

const (
	// ClassCreated: a receipt for a new effect.
	ClassCreated Class = "created"
	// ClassReplayed: the destination recognised the key and returned the
	// first receipt (a replay marker, or a unique violation with the same
	// fingerprint).
	ClassReplayed Class = "replayed"
	// ClassNotSent: nothing reached the destination (dial refused, DNS, TLS
	// before the request was written).
	ClassNotSent Class = "not_sent"
	// ClassUnknown: the request was, or may have been, written and no answer
	// came back (timeout, reset, crashed worker).
	ClassUnknown Class = "unknown_outcome"
	// ClassInFlight: 409, the same key is being processed right now.
	ClassInFlight Class = "in_flight"
	// ClassConflict: the key was used before with another payload.
	ClassConflict Class = "conflict"
	// ClassRejected: the destination refused the request (validation, other
	// 4xx); nothing was applied and the key is not consumed.
	ClassRejected Class = "rejected"
	// ClassThrottled: 429 or 503, the destination says nothing was applied.
	ClassThrottled Class = "throttled"
	// ClassServerError: any other 5xx; the effect may or may not exist.
	ClassServerError Class = "server_error"
	// ClassEarlierRun: nothing was sent, because an earlier run of the same
	// workflow ID may have applied the effect and this destination would not
	// recognise a repeat. A person decides.
	ClassEarlierRun Class = "earlier_run"
	// ClassUnconfigured: nothing was sent, because the worker that took the
	// attempt has no such destination (removed from its destinations file).
	ClassUnconfigured Class = "unconfigured"
	// ClassHeld: nothing was sent, because the destination is paused or
	// its breaker is open. It is not an attempt: the delivery waits and
	// spends neither attempts nor deadline.
	ClassHeld Class = "held"
)

// NothingApplied reports whether an attempt of this class provably left no
// effect at the destination. It is the one rule behind "may this operation
// run again" (see RunLeftNoEffect).
func (cl Class) NothingApplied() bool {
	switch cl {
	case ClassNotSent, ClassThrottled, ClassInFlight, ClassRejected, ClassEarlierRun, ClassUnconfigured, ClassHeld:
		return true
	}
	return false
}

// Final statuses that RunLeftNoEffect reads; the workflow's Status values.
const (
	FinalRejected     = "rejected"
	FinalAttemptLimit = "attempt_limit"
	FinalCanceled     = "canceled"
)

// RunLeftNoEffect is the one rule for whether a finished run of an operation
// provably applied nothing, so that another run may send again: a run the
// destination rejected, or one that spent its budget on attempts that all
// applied nothing, or one canceled before any attempt that may have
// applied. Any other run may have taken effect and stays final.
func RunLeftNoEffect(status string, attempts []Class) bool {
	switch status {
	case FinalRejected, FinalAttemptLimit, FinalCanceled:
		for _, cl := range attempts {
			if !cl.NothingApplied() {
				return false
			}
		}
		return true
	}
	return false
}

// DeduplicatesForever reports whether the destination recognises a repeat
// however long after the first attempt.
func (c Contract) DeduplicatesForever() bool { return c.DeduplicatesRepeat(math.MaxInt64) }

// DeduplicatesRepeat reports whether the destination would recognise a
// repeat of an attempt first made age ago, so that sending it again cannot
// make a second effect.
func (c Contract) DeduplicatesRepeat(age time.Duration) bool {
	switch c.Dedup {
	case DedupUniqueCommit:
		return true
	case DedupKey:
		return c.KeyRetention <= 0 || age < c.KeyRetention.D()
	}
	return false
}

// KeyExpired reports whether the destination's key retention, counted
// from first (the first attempt's start, before the key can have been
// written), has passed at arrival: a request that reaches the destination
// then may find the key forgotten. It is Next's keyExpired.
func (c Contract) KeyExpired(first, arrival time.Time) bool {
	return c.KeyRetention > 0 && arrival.Sub(first) > c.KeyRetention.D()
}

// RetryArrival is the latest moment a retry sent after wait from now
// reaches the destination: its request may be written at any point of its
// attempt timeout.
func (c Contract) RetryArrival(now time.Time, wait time.Duration) time.Time {
	return now.Add(wait + c.Retry.AttemptTimeout.D())
}

// Step is what the workflow does after an attempt.
type Step string

const (
	StepCreated   Step = "created"   // finish: created
	StepDuplicate Step = "duplicate" // finish: duplicate, with the first receipt
	StepConflict  Step = "conflict"  // finish: conflict, no retry
	StepRejected  Step = "rejected"  // finish: rejected, no retry
	StepRetry     Step = "retry"     // another attempt with the same key, within budget
	StepLookup    Step = "lookup"    // reconcile by lookup before any retry
	StepReview    Step = "review"    // stop and wait for a human decision
)

// Next is the single table behind every delivery decision: what an attempt
// of class cl means for a destination with this contract.
// keyExpired is true when a retry could reach the destination after its
// key retention has passed since the first attempt (KeyExpired at
// RetryArrival): its dedup can no longer be trusted for it. After a class
// that applied nothing the caller passes it only when an earlier attempt
// may have applied: the retry is then a repeat of that one.
func (c Contract) Next(cl Class, keyExpired bool) Step {
	switch cl {
	case ClassCreated:
		return StepCreated
	case ClassReplayed:
		return StepDuplicate
	case ClassConflict:
		return StepConflict
	case ClassRejected:
		return StepRejected
	case ClassNotSent, ClassThrottled, ClassInFlight:
		// Nothing was applied by this attempt; but a retry past the key
		// retention of an earlier attempt that may have applied could be a
		// second effect. A unique commit never forgets.
		if keyExpired && c.Dedup == DedupKey {
			return StepReview
		}
		return StepRetry
	case ClassEarlierRun, ClassUnconfigured:
		return StepReview // nothing sent now, but only a person can say whether to
	case ClassUnknown, ClassServerError:
		return c.afterUncertain(cl, keyExpired)
	}
	// An unclassified result is treated as the worst case: it may have applied.
	return c.afterUncertain(ClassUnknown, keyExpired)
}

// afterUncertain is the row of the table that this project exists for: the
// effect may exist, so only a destination that can deduplicate is retried.
func (c Contract) afterUncertain(cl Class, keyExpired bool) Step {
	switch c.Dedup {
	case DedupKey, DedupUniqueCommit:
		if keyExpired {
			return StepReview
		}
		return StepRetry
	case DedupLookup:
		return StepLookup
	default: // DedupNone: never a blind retry
		return StepReview
	}
}
