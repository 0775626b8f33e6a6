package shm

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A read-only runtime directory (ReadOnlyPaths=, a remounted /run, wrong
// ownership) is an error from Open, naming the cause, with nothing left
// behind and no file touched: the caller decides how to serve without it.
func TestReadOnlyDirectoryIsAnError(t *testing.T) {
	empty := t.TempDir()
	spoilt := t.TempDir()
	r := open(t, spoilt, small)
	r.Close()
	path := filepath.Join(spoilt, small.FileName())
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	var errEmpty, errSpoilt error
	inReadOnlyDir(t, []string{empty, spoilt}, func() {
		_, errEmpty = Open(empty, small, quiet())
		_, errSpoilt = Open(spoilt, small, quiet())
	})
	t.Logf("no table yet: %v; an unusable table: %v", errEmpty, errSpoilt)
	for _, err := range []error{errEmpty, errSpoilt} {
		if err == nil || !(strings.Contains(err.Error(), "read-only file system") || strings.Contains(err.Error(), "permission denied")) {
			t.Errorf("a read-only directory: %v, want an error saying so", err)
		}
	}
	if got := list(t, empty); got != "" {
		t.Errorf("left in the read-only directory: %s", got)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 100 {
		t.Errorf("the truncated file was touched: %v %v", st, err)
	}
}

// inReadOnlyDir runs fn while dirs are read-only to it. Root ignores
// permission bits, so as root fn runs on a thread of its own in a private
// mount namespace where dirs are bind-mounted read-only (the mounts vanish
// with the thread, and never reach the host's namespace); otherwise dirs
// are made mode 0555 for the call.
func inReadOnlyDir(t *testing.T, dirs []string, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		for _, d := range dirs {
			if err := os.Chmod(d, 0o555); err != nil {
				t.Fatal(err)
			}
			defer os.Chmod(d, 0o700)
		}
		fn()
		return
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with this goroutine, and its
		// mount namespace with it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- err // before any mount: nothing may propagate to the host
			return
		}
		for _, d := range dirs {
			if err := unix.Mount(d, d, "", unix.MS_BIND, ""); err != nil {
				errc <- err
				return
			}
			if err := unix.Mount("", d, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				errc <- err
				return
			}
		}
		fn()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatalf("make the directories read-only: %v", err)
	}
}
