// Package crashloop slows down a worker that cannot start because of its
// configuration.
//
// systemd restarts a failed worker RestartSec= (250 ms) later, forever
// (StartLimitIntervalSec=0), so that a worker that crashed comes back at
// once. A bad environment file does not fix itself, though: every restart
// fails the same way and writes the same error, four times a second per
// worker. systemd 252 has no RestartSteps= to grow the delay, so the worker
// grows it itself: it counts its consecutive configuration failures in a
// file in the units' RuntimeDirectory (kept between restarts by
// RuntimeDirectoryPreserve=yes), and waits Delay(count) before it exits,
// saying so in its STATUS= line. A worker that becomes ready clears the
// count. SIGTERM ends the wait at once, so a fixed file and a restart take
// effect without waiting.
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

// Counter is one worker's count of consecutive configuration failures.
type Counter struct{ path string }

// New returns the counter of worker instance in dir (the RuntimeDirectory).
func New(dir, instance string) Counter {
	if instance == "" {
		instance = "default"
	}
	return Counter{path: filepath.Join(dir, "config-failures."+instance)}
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

// Reset clears the count once the worker is ready.
func (c Counter) Reset() error {
	if err := os.Remove(c.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear configuration failures: %w", err)
	}
	return nil
}
