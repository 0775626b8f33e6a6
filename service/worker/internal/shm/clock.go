package shm

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Clock returns the time on CLOCK_MONOTONIC: time since boot, on the same
// scale in every process on the host. Every time stored in a shared table
// (the rate limit's GCRA state, the balance heartbeats) is a point on it.
//
// Not wall-clock time: a wall clock stepped back an hour (NTP, an operator,
// a VM restored) left every stored rate-limit state an hour in the future,
// and clients were refused with retry_after=59m58s (the preserved runtime
// directory kept that across restarts); a dead worker's heartbeat looked an
// hour fresh. CLOCK_MONOTONIC never steps, and /run is a tmpfs emptied at
// boot, the only time that clock starts again.
//
// Nor is it the wall-clock seam the worker's packages take (an options field
// Now func() time.Time, default time.Now, as in server.Options): that one
// times things inside one process, and a test may set it to any time. A
// Clock's readings are stored in shared tables and compared with other
// processes' readings, so every process must read the same scale; a package
// that needs both, such as balance, takes both, each for its own reads.
type Clock func() time.Duration

// MonotonicClock reads CLOCK_MONOTONIC once and advances from there with Go's
// monotonic clock (time.Since, the same clock on Linux, read through the vDSO
// without a system call per request).
//
// (clock, nil) normally; (clock, err) when CLOCK_MONOTONIC cannot be read:
// the clock then counts from this call, on another scale than the other
// workers', which the readers bound (the rate limiter clamps stored times
// to one burst ahead; a heartbeat from the future still goes stale).
func MonotonicClock() (Clock, error) {
	var ts unix.Timespec
	err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	// Read after the base, so the clock is never ahead of CLOCK_MONOTONIC.
	start := time.Now()
	base := time.Duration(ts.Nano())
	if err != nil {
		base, err = 0, fmt.Errorf("read CLOCK_MONOTONIC: %w", err)
	}
	return func() time.Duration { return base + time.Since(start) }, err
}
