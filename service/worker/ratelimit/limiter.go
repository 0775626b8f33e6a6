package ratelimit

import (
	"github.com/clusterapp/clusterapp/service/worker/internal/shm"
	"math"
	"net/netip"
	"sync/atomic"
	"time"
)

// UnavailableRetryAfter is the Retry-After of a request refused because the
// limiter has no table (FallbackClosed): about when the shared table is
// tried again.
const UnavailableRetryAfter = 5 * time.Second

// Limiter applies a token bucket of Rate requests per second and Burst
// requests at once to each key.
type Limiter struct {
	table    atomic.Pointer[Table] // nil: no table, every limited request is refused
	interval int64                 // ns between requests at the sustained rate (GCRA's T)
	tau      int64                 // how far ahead of now a key may run (GCRA's tolerance): (Burst-1)*T
	burst    int
	now      shm.Clock
	rate     float64 // requests per second, as configured (for messages)
}

// Rate is the sustained requests per second a key may send.
func (l *Limiter) Rate() float64 { return l.rate }

// Burst is the number of requests a key may send at once.
func (l *Limiter) Burst() int { return l.burst }

// NewLimiter returns a limiter over table (nil: none yet, see SetTable).
// rate must be > 0 and burst >= 1; now is the clock the table's times are
// on (shm.MonotonicClock in production).
func NewLimiter(table *Table, rate float64, burst int, now shm.Clock) *Limiter {
	interval := int64(math.Round(float64(time.Second) / rate))
	l := &Limiter{interval: interval, tau: int64(burst-1) * interval, burst: burst, now: now, rate: rate}
	l.SetTable(table)
	return l
}

// SetTable moves the limiter to table (nil: none) for the requests that
// start from now on.
func (l *Limiter) SetTable(t *Table) { l.table.Store(t) }

// Detached says when the limiter's shared table file no longer has its name
// (shm.Region.Detached): the workers started since limit on another table,
// so a client gets a budget in each half of the pool. "" on a local table or
// none.
func (l *Limiter) Detached() (string, error) {
	if t := l.table.Load(); t != nil {
		return t.region.Detached()
	}
	return "", nil
}

// Decision is the outcome for one request.
type Decision struct {
	Allowed bool
	// Unavailable: refused because the limiter has no table.
	Unavailable bool
	Remaining   int           // requests the key may still send at once
	RetryAfter  time.Duration // when Allowed is false: until one request is allowed
	Reset       time.Duration // until the bucket is full again
	Limit       int           // the burst
}

// Allow takes one token for key, if there is one.
func (l *Limiter) Allow(key netip.Addr) Decision {
	t := l.table.Load()
	if t == nil {
		return Decision{Unavailable: true, Limit: l.burst, RetryAfter: UnavailableRetryAfter}
	}
	cell := t.cell(t.slot(key))
	now := int64(l.now())
	// A correct table is never further ahead than one full burst: the TAT
	// after an allowed request is at most now+tau+interval. Anything beyond
	// comes from a table on another clock (version 1's wall clock, a clock
	// that failed to read) or a corrupted word; it is bounded, for good,
	// rather than believed, so it can never lock a client out for longer
	// than its burst.
	bound := now + l.tau + l.interval
	for {
		old := load(cell)
		if old > uint64(bound) {
			cas(cell, old, uint64(bound)) // or another request bounded or used it first: look again
			continue
		}
		tat := max(int64(old), now)
		if tat-now > l.tau {
			return Decision{Limit: l.burst, RetryAfter: time.Duration(tat - l.tau - now), Reset: time.Duration(tat - now)}
		}
		next := tat + l.interval
		if cas(cell, old, uint64(next)) {
			return Decision{
				Allowed: true, Limit: l.burst,
				Remaining: int((l.tau + l.interval - (next - now)) / l.interval),
				Reset:     time.Duration(next - now),
			}
		}
	}
}
