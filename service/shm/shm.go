// Package shm maps a small array of uint64 words shared by every worker.
//
// Workers are separate processes started by systemd; what they must agree on
// (the per-client rate-limit budget, each worker's load for balancing) lives
// in a file in the units' common RuntimeDirectory (/run/clusterapp, a tmpfs),
// mapped MAP_SHARED by each of them and updated only with atomic operations.
// The first worker to open a file sizes it and writes a header (a magic
// number naming the layout, and the word count); later ones check the header
// rather than misread a file of another layout or size.
package shm

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

const headerBytes = 16 // magic, word count

// Region is an array of words, shared when backed by a file.
type Region struct {
	words []uint64
	mem   []byte // the mapping; nil for a process-local region
}

// Local returns a region in this process's memory only.
func Local(words int) *Region { return &Region{words: make([]uint64, words)} }

// Open maps the file at path, creating it with the given layout when absent.
// A file with another magic or word count is an error naming the file.
func Open(path string, magic uint64, words int) (*Region, error) {
	size := headerBytes + words*8
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close() // the mapping outlives the descriptor
	// The lock serialises sizing and header writes between workers starting
	// together. It must be released explicitly: the mapping keeps the open
	// file description, and with it the lock, alive after Close.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	defer func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN) }() // unlocking an open file cannot fail
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	fresh := st.Size() == 0
	if fresh {
		if err := f.Truncate(int64(size)); err != nil {
			return nil, fmt.Errorf("size %s: %w", path, err)
		}
	} else if st.Size() != int64(size) {
		return nil, fmt.Errorf("%s has %d bytes, want %d: it was made with other settings; remove it", path, st.Size(), size)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	if fresh {
		binary.LittleEndian.PutUint64(mem[8:], uint64(words))
		binary.LittleEndian.PutUint64(mem[0:], magic)
	} else if binary.LittleEndian.Uint64(mem[0:]) != magic || binary.LittleEndian.Uint64(mem[8:]) != uint64(words) {
		_ = unix.Munmap(mem) // already failing
		return nil, fmt.Errorf("%s has another layout: remove it", path)
	}
	// The mapping is page aligned, so every word is 8-byte aligned for atomics.
	words64 := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[headerBytes])), words)
	return &Region{words: words64, mem: mem}, nil
}

// Words returns the shared words; use sync/atomic on them.
func (r *Region) Words() []uint64 { return r.words }

// Close unmaps a shared region.
func (r *Region) Close() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem, r.words = nil, nil
	return err
}
