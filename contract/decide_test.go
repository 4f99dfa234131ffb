package contract

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNext checks the README's table row by row, for every dedup kind.
// Past retention, a class that applied nothing is passed keyExpired only
// when an earlier attempt may have applied (the workflow's rule): a key
// destination then parks; a unique commit never forgets.
func TestNext(t *testing.T) {
	type row struct {
		class                     Class
		key, unique, lookup, none Step
		expiredKey, expiredUnique Step
	}
	rows := []row{
		{ClassCreated, StepCreated, StepCreated, StepCreated, StepCreated, StepCreated, StepCreated},
		{ClassReplayed, StepDuplicate, StepDuplicate, StepDuplicate, StepDuplicate, StepDuplicate, StepDuplicate},
		{ClassNotSent, StepRetry, StepRetry, StepRetry, StepRetry, StepReview, StepRetry},
		{ClassUnknown, StepRetry, StepRetry, StepLookup, StepReview, StepReview, StepReview},
		{ClassInFlight, StepRetry, StepRetry, StepRetry, StepRetry, StepReview, StepRetry},
		{ClassConflict, StepConflict, StepConflict, StepConflict, StepConflict, StepConflict, StepConflict},
		{ClassRejected, StepRejected, StepRejected, StepRejected, StepRejected, StepRejected, StepRejected},
		{ClassThrottled, StepRetry, StepRetry, StepRetry, StepRetry, StepReview, StepRetry},
		{ClassServerError, StepRetry, StepRetry, StepLookup, StepReview, StepReview, StepReview},
		{ClassEarlierRun, StepReview, StepReview, StepReview, StepReview, StepReview, StepReview},
		{ClassUnconfigured, StepReview, StepReview, StepReview, StepReview, StepReview, StepReview},
		{Class("something new"), StepRetry, StepRetry, StepLookup, StepReview, StepReview, StepReview},
	}
	for _, r := range rows {
		t.Run(string(r.class), func(t *testing.T) {
			next := func(d Dedup, expired bool) Step { return Contract{Dedup: d}.Next(r.class, expired) }
			require.Equal(t, r.key, next(DedupKey, false), "key")
			require.Equal(t, r.unique, next(DedupUniqueCommit, false), "unique-commit")
			require.Equal(t, r.lookup, next(DedupLookup, false), "lookup")
			require.Equal(t, r.none, next(DedupNone, false), "none")
			require.Equal(t, r.expiredKey, next(DedupKey, true), "key past retention")
			require.Equal(t, r.expiredUnique, next(DedupUniqueCommit, true), "unique-commit past retention")
		})
	}
}

func TestRetryInterval(t *testing.T) {
	r := Retry{InitialInterval: Duration(1e9), MaxInterval: Duration(5e9), Backoff: 2}
	got := []int64{}
	for n := 1; n <= 5; n++ {
		got = append(got, int64(r.Interval(n)/1e9))
	}
	require.Equal(t, []int64{1, 2, 4, 5, 5}, got)
}

// TestRunLeftNoEffect pins which finished runs may be run again: only those
// that provably applied nothing.
func TestRunLeftNoEffect(t *testing.T) {
	require.True(t, RunLeftNoEffect(FinalRejected, nil))
	require.True(t, RunLeftNoEffect(FinalRejected, []Class{ClassNotSent, ClassRejected}))
	require.False(t, RunLeftNoEffect(FinalRejected, []Class{ClassUnknown, ClassRejected}),
		"a rejected run whose earlier attempt may have applied is not a clean slate")
	require.True(t, RunLeftNoEffect(FinalAttemptLimit, []Class{ClassNotSent, ClassThrottled, ClassInFlight}))
	require.False(t, RunLeftNoEffect(FinalAttemptLimit, []Class{ClassNotSent, ClassServerError}))
	require.True(t, RunLeftNoEffect(FinalCanceled, []Class{ClassEarlierRun}), "canceled before anything was sent")
	require.False(t, RunLeftNoEffect(FinalCanceled, []Class{ClassUnknown}), "canceled with an attempt in flight")
	for _, st := range []string{"created", "duplicate", "conflict", "delivered_by_review", "abandoned", "terminated", "timed_out", ""} {
		require.False(t, RunLeftNoEffect(st, nil), st)
	}
}

func TestDeduplicatesRepeat(t *testing.T) {
	day := Duration(24 * time.Hour)
	require.True(t, Contract{Dedup: DedupUniqueCommit}.DeduplicatesRepeat(1000*time.Hour))
	require.True(t, Contract{Dedup: DedupKey}.DeduplicatesRepeat(1000*time.Hour))
	require.True(t, Contract{Dedup: DedupKey, KeyRetention: day}.DeduplicatesRepeat(time.Hour))
	require.False(t, Contract{Dedup: DedupKey, KeyRetention: day}.DeduplicatesRepeat(25*time.Hour))
	require.False(t, Contract{Dedup: DedupLookup}.DeduplicatesRepeat(0))
	require.False(t, Contract{Dedup: DedupNone}.DeduplicatesRepeat(0))
}

// TestKeyExpiredAtRetryArrival: a retry decided inside the key retention
// is judged by when it could reach the destination, after its wait and its
// whole attempt timeout.
func TestKeyExpiredAtRetryArrival(t *testing.T) {
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := Contract{Dedup: DedupKey, KeyRetention: Duration(time.Second),
		Retry: Retry{AttemptTimeout: Duration(500 * time.Millisecond)}}
	decided := first.Add(300 * time.Millisecond) // the attempt's answer was lost
	require.False(t, c.KeyExpired(first, decided), "inside the retention at the decision")
	require.Equal(t, first.Add(2800*time.Millisecond), c.RetryArrival(decided, 2*time.Second))
	require.True(t, c.KeyExpired(first, c.RetryArrival(decided, 2*time.Second)), "a retry 2s later arrives past it")
	require.Equal(t, StepReview, c.Next(ClassUnknown, c.KeyExpired(first, c.RetryArrival(decided, 2*time.Second))))
	require.False(t, c.KeyExpired(first, c.RetryArrival(decided, 100*time.Millisecond)), "one 100ms later arrives by 0.9s")
	require.False(t, c.KeyExpired(first, first.Add(time.Second)), "the retention's last moment still recognises the key")
	require.False(t, Contract{Dedup: DedupKey}.KeyExpired(first, first.Add(1000*time.Hour)), "no retention: kept for ever")
}
