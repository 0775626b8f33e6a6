package shm

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func monotonic(t *testing.T) time.Duration {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// The production clock is CLOCK_MONOTONIC: between two readings of it, on
// the scale every process shares (not the wall clock, not process uptime).
func TestMonotonicClockIsClockMonotonic(t *testing.T) {
	before := monotonic(t)
	c, err := MonotonicClock()
	if err != nil {
		t.Fatal(err)
	}
	now := c()
	after := monotonic(t)
	if now < before || now > after {
		t.Fatalf("clock read %v, between CLOCK_MONOTONIC readings %v and %v", now, before, after)
	}
}
