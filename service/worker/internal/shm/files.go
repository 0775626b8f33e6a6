package shm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

const (
	// lockWait bounds how long Open waits for another worker's changes to
	// the directory: building even the largest table takes milliseconds.
	lockWait = 2 * time.Second
	lockPoll = 5 * time.Millisecond
	// maxEntries bounds the directory entries one cleanup looks at.
	maxEntries = 1024
)

// errLockBusy: the directory stayed locked for lockWait.
var errLockBusy = errors.New("shm: table directory locked by another process for too long")

// lockDir takes the directory's exclusive lock, waiting at most lockWait.
func lockDir(d *os.File) error {
	deadline := time.Now().Add(lockWait)
	for {
		err := unix.Flock(int(d.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return err
		}
		if time.Now().After(deadline) {
			return errLockBusy
		}
		time.Sleep(lockPoll)
	}
}

// openExisting opens the table file at path for l. (f, "", nil) when it is
// usable; (nil, problem, nil) when it is absent (problem "") or must be
// replaced; (nil, "", err) when it cannot be opened for another reason
// (permission, a read-only file system).
func openExisting(path string, l Layout) (*os.File, string, error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", nil
	case errors.Is(err, syscall.ELOOP):
		return nil, "a symbolic link", nil
	case err != nil:
		return nil, "", err // an *fs.PathError, naming the file
	}
	if problem := fileProblem(f, l); problem != "" {
		_ = f.Close() // read only so far
		return nil, problem, nil
	}
	return f, "", nil
}

// fileProblem says what is wrong with an open table file, or "".
func fileProblem(f *os.File, l Layout) string {
	st, err := f.Stat()
	if err != nil {
		return "stat: " + err.Error()
	}
	if !st.Mode().IsRegular() {
		return "not a regular file"
	}
	if st.Size() != int64(l.bytes()) {
		return fmt.Sprintf("%d bytes, want %d", st.Size(), l.bytes())
	}
	h := make([]byte, headerBytes)
	if _, err := f.ReadAt(h, 0); err != nil {
		return "read header: " + err.Error()
	}
	return headerProblem(h, l)
}

// build writes a fresh table for l in a temporary file and renames it over
// path, returning it open. Whoever maps the file path named before keeps
// that inode, untouched.
func build(dir, path string, l Layout) (*os.File, error) {
	var suffix [6]byte
	_, _ = rand.Read(suffix[:]) // never fails
	tmp := filepath.Join(dir, "."+l.FileName()+".tmp-"+hex.EncodeToString(suffix[:]))
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create table: %w", err)
	}
	if err := fill(f, l); err != nil {
		_ = f.Close()      // already failing
		_ = os.Remove(tmp) // best effort: a later Open removes it too
		return nil, fmt.Errorf("build %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("install table: %w", err)
	}
	return f, nil
}

// fill sizes a new table file, its words zero, and writes its header.
func fill(f *os.File, l Layout) error {
	// Allocate every page now: a sparse file on a full tmpfs would fault
	// with SIGBUS at the first write to a missing page instead.
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(l.bytes())); err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("allocate %d bytes: %w", l.bytes(), err)
		}
		// The file system cannot preallocate; size it sparse.
		if err := f.Truncate(int64(l.bytes())); err != nil {
			return fmt.Errorf("size: %w", err)
		}
	}
	var secret [16]byte
	_, _ = rand.Read(secret[:]) // never fails
	h := make([]byte, headerBytes)
	putHeader(h, l, secret)
	if _, err := f.WriteAt(h, 0); err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	return nil
}

// removeUnused removes the files of l's kind other than its own that no live
// process maps: other sizes, other layouts, version 1's KIND.table, and
// temporary files of a builder that died (under the directory lock nobody is
// building). Failures are logged: the table works without the cleanup.
func removeUnused(d *os.File, dir string, l Layout, log *logrus.Entry) {
	names, err := d.Readdirnames(maxEntries)
	if err != nil && len(names) == 0 {
		return
	}
	for _, name := range names {
		if name == l.FileName() || !sameKind(name, l.Kind) {
			continue
		}
		path := filepath.Join(dir, name)
		removed, err := removeIfUnused(path)
		switch {
		case err != nil:
			log.WithError(err).WithField("file", path).Warn("could not remove an old table file")
		case removed:
			log.WithField("file", path).Info("removed a table file no worker uses")
		}
	}
}

// sameKind reports whether name is a table file or a temporary table file
// of kind.
func sameKind(name, kind string) bool {
	table := strings.HasPrefix(name, kind+".") && strings.HasSuffix(name, ".table")
	temporary := strings.HasPrefix(name, "."+kind+".") && strings.Contains(name, ".table.tmp-")
	return table || temporary
}

// removeIfUnused unlinks path if no process holds a flock on it: lock it
// exclusively without waiting, then check the name still names the inode
// locked (it may have been replaced in between), then unlink.
func removeIfUnused(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil // mapped by a live worker
	} else if err != nil {
		return false, fmt.Errorf("lock: %w", err)
	}
	if same, err := names(path, f); err != nil || !same {
		return false, err
	}
	if err := os.Remove(path); err != nil {
		return false, err
	}
	return true, nil
}

// names reports whether path still names the file f is open on.
func names(path string, f *os.File) (bool, error) {
	open, err := f.Stat()
	if err != nil {
		return false, err
	}
	named, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(open, named), nil
}
