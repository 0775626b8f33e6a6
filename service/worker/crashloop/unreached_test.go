package crashloop

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestUnreachedDelayDoublesUpTo5s(t *testing.T) {
	for n, want := range map[int]time.Duration{
		0: 0, 1: 250 * time.Millisecond, 2: 500 * time.Millisecond, 3: time.Second,
		5: 4 * time.Second, 6: MaxUnreachedWait, 1000: MaxUnreachedWait,
	} {
		if got := UnreachedDelay(n); got != want {
			t.Errorf("UnreachedDelay(%d) = %v, want %v", n, got, want)
		}
	}
}

// The sequence the unit runs: ExecStopPost= (Ended) after every process,
// the worker's main (Arrived) at the start of each process that gets there.
func TestUnreachedCountsOnlyEndsWithoutArrival(t *testing.T) {
	dir := t.TempDir()
	u, other := NewUnreached(dir, "1"), NewUnreached(dir, "2")
	ended := func(u Unreached, want int) {
		t.Helper()
		if n, err := u.Ended(); err != nil || n != want {
			t.Fatalf("Ended() = %d, %v; want %d", n, err, want)
		}
	}
	// No mark yet: the first end of all is not known to be one (0), and it
	// leaves the mark for the next start.
	ended(u, 0)
	if _, err := os.Stat(u.path); err != nil {
		t.Fatalf("no mark left for the next start: %v", err)
	}
	// Three processes in a row that never reach the worker.
	ended(u, 1)
	ended(u, 2)
	ended(u, 3)
	ended(other, 0) // worker 2 has its own
	// One that reaches the worker ends the loop.
	if err := u.Arrived(); err != nil {
		t.Fatal(err)
	}
	if err := u.Arrived(); err != nil {
		t.Fatalf("a second Arrived without a mark: %v", err)
	}
	ended(u, 0)
	ended(u, 1)
	ended(other, 1)
}

// Ended runs as root in a directory the worker's user owns: whatever that
// user puts at the mark's name, it never writes through it, never blocks on
// it, and leaves a plain file of its own there.
func TestUnreachedNeverWritesThroughWhatIsAtTheMark(t *testing.T) {
	dir, outside := t.TempDir(), filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := NewUnreached(dir, "1")
	for name, plant := range map[string]func() error{
		"symbolic link": func() error { return os.Symlink(outside, u.path) },
		"fifo":          func() error { return syscall.Mkfifo(u.path, 0o600) },
		"directory":     func() error { return os.Mkdir(u.path, 0o700) },
	} {
		_ = os.RemoveAll(u.path)
		if err := plant(); err != nil {
			t.Fatal(err)
		}
		n, err := u.Ended()
		if name == "directory" {
			// rename cannot replace a directory with a file: an error, and
			// nothing outside touched.
			if err == nil {
				t.Errorf("%s at the mark: no error", name)
			}
		} else if err != nil || n != 1 {
			t.Errorf("%s at the mark: Ended() = %d, %v; want 1 (a start that did not reach the worker)", name, n, err)
		}
		if b, _ := os.ReadFile(outside); string(b) != "keep\n" {
			t.Fatalf("%s at the mark: the file outside now holds %q", name, b)
		}
		if st, err := os.Lstat(u.path); err == nil && name != "directory" && !st.Mode().IsRegular() {
			t.Errorf("%s at the mark: still a %v after Ended", name, st.Mode().Type())
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// As root, the mark belongs to the directory's owner (the units' dynamic
// user), like the worker's own files, so the worker removes it and
// systemd's ownership fix-ups have nothing to do.
func TestUnreachedMarkBelongsToTheDirectorysOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a file for another user (CI runs as root)")
	}
	dir := t.TempDir()
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	u := NewUnreached(dir, "1")
	if _, err := u.Ended(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(u.path)
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 65534 || sys.Gid != 65534 || st.Mode().Perm() != 0o600 {
		t.Fatalf("mark owned by %d:%d mode %v, want 65534:65534 0600", sys.Uid, sys.Gid, st.Mode().Perm())
	}
}
