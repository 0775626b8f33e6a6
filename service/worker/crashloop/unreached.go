package crashloop

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Starts that never reach the worker.
//
// The two counts above live in the worker's own code, so they pace only a
// process that gets as far as the worker's main. A process can die before
// that, at every start, for a reason no restart fixes: systemd cannot set
// up the unit's sandbox (a drop-in's SystemCallFilter= that the Go runtime
// cannot start under: "failed to create new OS thread", a status 2 with a
// stack dump), or the Go runtime refuses the environment. systemd 252 then
// restarts the unit at once (RestartSec=0), forever (StartLimitIntervalSec=0):
// measured, 117 restarts and 14,000 journal lines in 10 s for one worker.
//
// The unit's ExecStopPost= (`clusterapp-worker exited`, with '+': outside the
// sandbox, so it runs when the sandbox is what fails) paces those. It keeps
// a mark, a file in the RuntimeDirectory, between a process's end and the
// next process's main, which removes it (Arrived). Finding the mark still
// there when a process ends means that process never reached the worker
// (Ended counts it), and the command waits UnreachedDelay before systemd
// restarts the unit; a process that reached the worker waits nothing. The
// mark exists from the first end of a process on (the RuntimeDirectory is
// kept until reboot), so a loop that begins with the first start after a
// boot is counted from its second start.
//
// What it cannot pace: a failure that also stops ExecStopPost= from
// running, as it shares the unit's binary, BindPaths=, WorkingDirectory=
// and limits (the binary missing, a bind-mount source missing, a LimitAS=
// the runtime cannot start under). systemd 254's RestartSteps= would.

// MaxUnreachedWait caps UnreachedDelay. The wait runs in ExecStopPost=,
// where systemctl stop waits for it rather than ending it, so it is kept
// short; at one start per 5 s a loop writes a journal line or two a second.
const MaxUnreachedWait = 5 * time.Second

// UnreachedDelay is the wait after the n-th start in a row whose process
// ended before the worker ran: Delay(n), at most MaxUnreachedWait; none for
// n < 1.
func UnreachedDelay(n int) time.Duration {
	return min(Delay(n), MaxUnreachedWait)
}

// Unreached is the mark of worker instance's starts that have not reached
// the worker yet, in dir (the RuntimeDirectory).
type Unreached struct{ dir, path string }

// NewUnreached returns worker instance's mark in dir.
func NewUnreached(dir, instance string) Unreached {
	if instance == "" {
		instance = "default"
	}
	return Unreached{dir: dir, path: filepath.Join(dir, "unreached-starts."+instance)}
}

// Arrived removes the mark: this process reached the worker. The worker
// calls it first thing.
func (u Unreached) Arrived() error {
	if err := os.Remove(u.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("clear the mark of starts that did not reach the worker: %w", err)
	}
	return nil
}

// Ended records that the unit's process ended and returns how many starts
// in a row ended before their process reached the worker: 0 when this one
// reached it (no mark), else one more than the mark held. It leaves the
// mark, with that count, for the next start to remove.
//
// It runs as root in a directory the worker's user owns, so it never
// follows or writes through what that user could have put there: it reads
// only a regular file opened without following a symbolic link, and writes
// a new file it created itself, owned by the directory's owner, renamed
// over the mark.
func (u Unreached) Ended() (int, error) {
	n, err := u.read()
	if err != nil {
		return n, err
	}
	return n, u.write(n)
}

// read returns 0 without a mark and the mark's count plus one with one; an
// unreadable count is read as 0.
func (u Unreached) read() (int, error) {
	f, err := os.OpenFile(u.path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		// A symbolic link (ELOOP) or worse: a start is being counted all
		// the same, and the write replaces it.
		return 1, nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 1, nil
	}
	b, err := io.ReadAll(io.LimitReader(f, 32))
	if err != nil {
		return 1, nil
	}
	k, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || k < 0 {
		k = 0
	}
	return min(k, 1000) + 1, nil
}

func (u Unreached) write(n int) error {
	dst, err := os.Stat(u.dir)
	if err != nil {
		return fmt.Errorf("mark the next start: %w", err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", u.path, os.Getpid())
	_ = os.Remove(tmp) // a left-over of a killed run; unlink never follows a link
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("mark the next start: %w", err)
	}
	_, err = f.WriteString(strconv.Itoa(n) + "\n")
	if sys, ok := dst.Sys().(*syscall.Stat_t); ok && err == nil && os.Geteuid() == 0 {
		// The worker's user owns its runtime directory's files.
		err = f.Chown(int(sys.Uid), int(sys.Gid))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, u.path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("mark the next start: %w", err)
	}
	return nil
}
