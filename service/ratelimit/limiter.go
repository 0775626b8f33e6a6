package ratelimit

import (
	"hash/fnv"
	"math"
	"time"
)

// Limiter applies a token bucket of Rate requests per second and Burst
// requests at once to each key.
type Limiter struct {
	table    *Table
	interval int64 // ns between requests at the sustained rate (GCRA's T)
	tau      int64 // how far ahead of now a key may run (GCRA's tolerance): (Burst-1)*T
	burst    int
	now      func() time.Time
}

// NewLimiter returns a limiter over table. rate must be > 0 and burst >= 1.
func NewLimiter(table *Table, rate float64, burst int, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	interval := int64(math.Round(float64(time.Second) / rate))
	return &Limiter{table: table, interval: interval, tau: int64(burst-1) * interval, burst: burst, now: now}
}

// Decision is the outcome for one request.
type Decision struct {
	Allowed    bool
	Remaining  int           // requests the key may still send at once
	RetryAfter time.Duration // when Allowed is false: until one request is allowed
	Reset      time.Duration // until the bucket is full again
	Limit      int           // the burst
}

// Allow takes one token for key, if there is one.
func (l *Limiter) Allow(key string) Decision {
	cell := l.table.cell(l.slot(key))
	now := l.now().UnixNano()
	for {
		old := load(cell)
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

func (l *Limiter) slot(key string) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key)) // a hash's Write never fails
	return int(h.Sum64() % uint64(l.table.Slots()))
}
