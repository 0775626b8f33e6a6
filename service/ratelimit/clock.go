package ratelimit

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Clock returns the time on CLOCK_MONOTONIC: time since boot, on the same
// scale in every process on the host. GCRA state stored in a shared table is
// a point on this clock.
//
// Not wall-clock time: a wall clock stepped back an hour (NTP, an operator,
// a VM restored) left every stored state an hour in the future, and clients
// were refused with retry_after=59m58s; the preserved runtime directory kept
// that across restarts. CLOCK_MONOTONIC never steps, and /run is a tmpfs
// emptied at boot, the only time that clock starts again.
type Clock func() time.Duration

// MonotonicClock reads CLOCK_MONOTONIC once and advances from there with Go's
// monotonic clock (time.Since, the same clock on Linux, read through the vDSO
// without a system call per request).
//
// (clock, nil) normally; (clock, err) when CLOCK_MONOTONIC cannot be read:
// the clock then counts from this call, on another scale than the other
// workers', which the limiter's bound on stored times keeps harmless (a
// client is refused at most one request interval too long).
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
