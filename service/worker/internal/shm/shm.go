package shm

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"unsafe"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// headerBytes is the size of a table file's header (see the package comment).
const headerBytes = 64

// headerFormat names the header layout; it is part of every magic.
const headerFormat = "clusterapp shm header 2"

// Layout describes one kind of table.
type Layout struct {
	// Kind names the table and begins its file name, e.g. "ratelimit".
	Kind string
	// Version is the meaning of the words; bump it when that changes.
	Version int
	// Size is the table's size in its own units (slots), shown in the file
	// name so that tables of different sizes live in different files.
	Size int
	// Words is how many uint64 words follow the header.
	Words int
}

// FileName is the name of the table's file: KIND.vVERSION.SIZE.table.
func (l Layout) FileName() string {
	return l.Kind + ".v" + strconv.Itoa(l.Version) + "." + strconv.Itoa(l.Size) + ".table"
}

func (l Layout) magic() uint64 {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s/%s/v%d", headerFormat, l.Kind, l.Version) // a hash's Write never fails
	return h.Sum64()
}

func (l Layout) bytes() int { return headerBytes + l.Words*8 }

// Region is an array of words, shared when backed by a file.
type Region struct {
	words  []uint64
	secret [16]byte
	mem    []byte   // the mapping; nil for a process-local region
	file   *os.File // holds the shared flock that marks the file in use
	path   string   // the table's name in the runtime directory
	inode  os.FileInfo
}

// Local returns a region in this process's memory only, with a fresh secret.
func Local(words int) *Region {
	r := &Region{words: make([]uint64, words)}
	_, _ = rand.Read(r.secret[:]) // crypto/rand.Read never returns an error (it crashes the program instead)
	return r
}

// Open maps the table file for l in dir, building it when it is absent or
// unusable (another size, another layout, truncated), and then removes the
// files of the same kind that no live process maps. Replacements and
// removals are logged on log.
//
// (region, nil) when the table is mapped; (nil, err) when dir cannot be
// used: missing, read-only, full, or its lock held for too long. The region
// stays valid until Close, whatever later happens to the file's name.
func Open(dir string, l Layout, log *logrus.Entry) (*Region, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err // an *fs.PathError: "open DIR: no such file or directory"
	}
	defer d.Close()
	if err := lockDir(d); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	defer func() { _ = unix.Flock(int(d.Fd()), unix.LOCK_UN) }() // closing d would release it anyway
	path := filepath.Join(dir, l.FileName())
	f, problem, err := openExisting(path, l)
	if err != nil {
		return nil, err
	}
	if f == nil {
		if f, err = build(dir, path, l); err != nil {
			return nil, err
		}
		if problem != "" {
			log.WithFields(logrus.Fields{"file": path, "problem": problem}).Warn("table file was unusable: replaced it with a fresh one")
		}
	}
	r, err := mapFile(f, path, l)
	if err != nil {
		_ = f.Close() // already failing
		return nil, err
	}
	removeUnused(d, dir, l, log)
	return r, nil
}

// mapFile marks f in use and maps it.
func mapFile(f *os.File, path string, l Layout) (*Region, error) {
	// Shared, for the region's lifetime: a file nobody holds this way may
	// be removed by the next worker that opens a table of this kind.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, l.bytes(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	r := &Region{mem: mem, file: f, path: path}
	if st, err := f.Stat(); err == nil {
		r.inode = st
	}
	copy(r.secret[:], mem[16:32])
	// The mapping is page aligned, so every word is 8-byte aligned for atomics.
	r.words = unsafe.Slice((*uint64)(unsafe.Pointer(&mem[headerBytes])), l.Words)
	return r, nil
}

// Detached says what became of the table's name when it no longer names the
// file this region maps: removed (an operator's rm in the runtime
// directory), or replaced by another file. "" while it still does, and for
// a local region.
//
// A worker keeps its mapping either way (unlink and rename only remove a
// name), so it goes on sharing with the workers started before, while every
// worker started after builds or maps the new file: the pool splits in two,
// each half with its own rate-limit budgets, balance loads and metrics, for
// as long as an old worker runs. The worker checks this now and then and
// restarts to rejoin (service/worker, tables.go). It reads only the name:
// Close may run at the same time.
func (r *Region) Detached() (string, error) {
	if r.path == "" || r.inode == nil {
		return "", nil
	}
	named, err := os.Lstat(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r.path + " was removed", nil
	case err != nil:
		return "", err
	case !os.SameFile(r.inode, named):
		return r.path + " now names another file", nil
	}
	return "", nil
}

// Words returns the shared words; use sync/atomic on them.
func (r *Region) Words() []uint64 { return r.words }

// Secret returns the table's random secret: the same for every process that
// maps the file, fresh for every file built and every local region.
func (r *Region) Secret() [16]byte { return r.secret }

// Close unmaps a shared region and gives up its claim on the file. Nothing
// may touch the words afterwards: a write to an unmapped table is a SIGSEGV.
func (r *Region) Close() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	if cerr := r.file.Close(); err == nil {
		err = cerr
	}
	r.mem, r.words, r.file = nil, nil, nil
	return err
}

func putHeader(h []byte, l Layout, secret [16]byte) {
	binary.LittleEndian.PutUint64(h[0:], l.magic())
	binary.LittleEndian.PutUint64(h[8:], uint64(l.Words))
	copy(h[16:32], secret[:])
}

// headerProblem says what is wrong with a header read from a file for l, or
// "" when nothing is.
func headerProblem(h []byte, l Layout) string {
	switch {
	case binary.LittleEndian.Uint64(h[0:]) != l.magic():
		return "another layout (its magic differs)"
	case binary.LittleEndian.Uint64(h[8:]) != uint64(l.Words):
		return fmt.Sprintf("its header says %d words, want %d", binary.LittleEndian.Uint64(h[8:]), l.Words)
	case [16]byte(h[16:32]) == [16]byte{}:
		return "no secret in its header"
	}
	return ""
}
