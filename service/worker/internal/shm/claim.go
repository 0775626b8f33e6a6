package shm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// # Claims: which process owns a range of words
//
// A worker that owns part of a table (its slot in the metrics table) marks
// it with an open-file-description lock (F_OFD_SETLK) on the bytes of those
// words. The kernel drops the lock when the process dies, however it dies,
// and keeps it while the process is stopped or frozen, so "is that range
// claimed?" (F_OFD_GETLK from any other descriptor) answers "is its owner
// alive?" exactly, with no heartbeat to tune and no stale pid to compare.
// A process-local region has no file: every claim succeeds and no range
// looks claimed by anyone else.

// Claim marks words [word, word+n) as this region's, without waiting.
// (false, nil) when another open file description, another live process,
// holds a claim on any of them.
func (r *Region) Claim(word, n int) (bool, error) {
	if r.file == nil {
		return true, nil
	}
	lk := r.lock(unix.F_WRLCK, word, n)
	err := unix.FcntlFlock(r.file.Fd(), unix.F_OFD_SETLK, &lk)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EACCES):
		return false, nil
	default:
		return false, fmt.Errorf("claim words %d-%d: %w", word, word+n-1, err)
	}
}

// Claimed reports whether another open file description holds a claim on
// any of words [word, word+n). A region never sees its own claims this way.
func (r *Region) Claimed(word, n int) (bool, error) {
	if r.file == nil {
		return false, nil
	}
	lk := r.lock(unix.F_WRLCK, word, n)
	if err := unix.FcntlFlock(r.file.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, fmt.Errorf("test claim on words %d-%d: %w", word, word+n-1, err)
	}
	return lk.Type != unix.F_UNLCK, nil
}

func (r *Region) lock(typ int16, word, n int) unix.Flock_t {
	return unix.Flock_t{Type: typ, Whence: 0, Start: int64(headerBytes + word*8), Len: int64(n * 8)}
}

// OpenReadOnly maps an existing table file for l in dir for reading only,
// for an operator command: it never builds, replaces or removes a file and
// takes no lock. fs.ErrNotExist when no worker has built the table yet.
func OpenReadOnly(dir string, l Layout) (*Region, error) {
	path := filepath.Join(dir, l.FileName())
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err // an *fs.PathError, naming the file
	}
	if problem := fileProblem(f, l); problem != "" {
		_ = f.Close() // read only
		return nil, &fs.PathError{Op: "open", Path: path, Err: errors.New(problem)}
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, l.bytes(), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		_ = f.Close() // read only
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	r := &Region{mem: mem, file: f, path: path}
	if fi, err := f.Stat(); err == nil {
		r.inode = fi // for Detached: a reader that stays (the metrics exporter) follows a replaced table
	}
	copy(r.secret[:], mem[16:32])
	r.words = unsafe.Slice((*uint64)(unsafe.Pointer(&mem[headerBytes])), l.Words)
	return r, nil
}
