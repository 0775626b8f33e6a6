// Package crashloop slows down a worker that keeps failing, so that a crash
// loop neither floods the journal nor spins the CPU, while a worker that
// crashes once comes back at once.
//
// systemd restarts a failed worker immediately (RestartSec=0, so a single
// kill -9 costs only the stop and the new worker's start, where a fixed
// RestartSec= delayed every restart; docs/benchmarks.md, "From `kill -9` to
// the new worker's READY=1"), forever (StartLimitIntervalSec=0).
// systemd 252 has no RestartSteps= to grow the delay, so the worker grows it
// itself, with two counts kept in files in the units' RuntimeDirectory
// (kept between restarts by RuntimeDirectoryPreserve=yes):
//
//   - configuration failures in a row (New): a bad environment file does
//     not fix itself, so the worker waits Delay(count) before it exits,
//     saying so in its STATUS= line; a worker that becomes ready clears it.
//   - unclean starts in a row (NewStarts): every start counts one, and a
//     clean exit (a drain) or StableAfter of serving clears the count, so
//     it is the number of times the worker died soon after starting. From
//     the second on, the worker waits StartDelay(count) before it serves.
//
// SIGTERM ends either wait at once, so a fixed file and a restart take
// effect without waiting.
//
// A process that dies before the worker's code runs cannot count itself:
// the unit's ExecStopPost= counts those and waits instead (Unreached).
package crashloop

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	// First is the wait after the first failure in a row.
	First = 250 * time.Millisecond
	// Max caps the wait.
	Max = 30 * time.Second
)

// StableAfter is how long a worker serves before its unclean starts are
// forgotten: a crash after that is a first one again, replaced at once.
const StableAfter = 10 * time.Second

// MaxStartWait caps StartDelay below the unit's TimeoutStartSec= (30 s):
// the wait happens while systemd is waiting for READY=1.
const MaxStartWait = 20 * time.Second

// StartDelay is the wait before serving at the n-th start in a row without
// running stably: none for the first, then Delay(n-1), at most MaxStartWait.
func StartDelay(n int) time.Duration {
	return min(Delay(n-1), MaxStartWait)
}

// Delay is the wait before exiting after the n-th failure in a row:
// First, doubling each time, at most Max; 0 for n < 1.
func Delay(n int) time.Duration {
	if n < 1 {
		return 0
	}
	d := First
	for i := 1; i < n && d < Max; i++ {
		d *= 2
	}
	return min(d, Max)
}

// Counter is one worker's count of consecutive failures of one kind.
type Counter struct{ path string }

// New returns the counter of worker instance in dir (the RuntimeDirectory).
func New(dir, instance string) Counter {
	if instance == "" {
		instance = "default"
	}
	return Counter{path: filepath.Join(dir, "config-failures."+instance)}
}

// NewStarts returns the count of unclean starts in a row of worker
// instance in dir: Fail at every start, Reset on a clean exit or after
// StableAfter of serving.
func NewStarts(dir, instance string) Counter {
	if instance == "" {
		instance = "default"
	}
	return Counter{path: filepath.Join(dir, "unclean-starts."+instance)}
}

// Fail records one more failure and returns how many there have been in a
// row, this one included. An unreadable count starts again from 1.
func (c Counter) Fail() (int, error) {
	n := 0
	if b, err := os.ReadFile(c.path); err == nil {
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	n = max(n, 0) + 1
	if err := os.WriteFile(c.path, []byte(strconv.Itoa(n)+"\n"), 0o600); err != nil {
		return n, fmt.Errorf("record configuration failure: %w", err)
	}
	return n, nil
}

// Reset clears the count (the worker is ready, or stable, or exits cleanly).
func (c Counter) Reset() error {
	if err := os.Remove(c.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear configuration failures: %w", err)
	}
	return nil
}
