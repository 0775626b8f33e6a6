// Package oplock makes the operator commands that change the pool
// (`clusterapp reload`, `clusterapp scale`) take turns, on this machine.
//
// Each such command is several systemd jobs in a row, planned from the
// pool as it was when it began. Two at once planned from the same pool and
// undid each other: a second reload restarted a worker the first was
// restarting, then another one beside it, so two workers were down where
// one may be; a scale down drained workers a running reload then restarted,
// which started them again, or their jobs canceled each other and one
// command failed. A package upgrade runs `clusterapp reload` too.
//
// The lock is an flock(2) on Path, released by the kernel when its holder
// exits however it exits, so a killed command never leaves the pool
// locked. The holder writes its name and PID in the file, for the one
// waiting to say whom it waits for.
package oplock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Path is the lock file: in /run/lock, so it never outlives a boot and is
// never a file in the operator's /etc.
const Path = "/run/lock/clusterapp-pool.lock"

// pollInterval is how often a waiter tries the lock again; a context
// cannot interrupt a blocking flock.
const pollInterval = 100 * time.Millisecond

// Lock is a held lock.
type Lock struct{ f *os.File }

// Acquire takes the lock at path for who (say "clusterapp reload"). While
// another process holds it, waiting is called once with the holder's name
// and PID ("clusterapp reload (pid 231)"; "" when the holder has not
// written them yet) and Acquire waits for it. It returns (nil, err) when
// the lock file cannot be used, or (nil, context.Cause(ctx)) when ctx ends
// first.
func Acquire(ctx context.Context, path, who string, waiting func(holder string)) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for told := false; ; told = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close() // the lock error is the one to report
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !told && waiting != nil {
			waiting(Holder(path))
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, context.Cause(ctx)
		case <-time.After(pollInterval):
		}
	}
	// Best effort: the name only helps a waiter say whom it waits for.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("%s (pid %d)\n", who, os.Getpid())), 0)
	}
	return &Lock{f: f}, nil
}

// Holder returns what the lock's holder wrote in path, "" when nothing.
func Holder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Release clears the holder's name and releases the lock.
func (l *Lock) Release() {
	_ = l.f.Truncate(0) // a stale name would only mislead the next waiter's message
	_ = l.f.Close()     // closing the last descriptor releases the flock
}
