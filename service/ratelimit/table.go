package ratelimit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// magic marks a table file and its layout version.
const magic = 0x636c75737472_0001

const headerWords = 2 // magic, slots

// Table is a fixed array of GCRA cells, shared between processes when backed
// by a file.
type Table struct {
	cells []uint64
	mem   []byte // the mapping, nil for a process-local table
}

// NewLocal returns a table in this process's memory.
func NewLocal(slots int) *Table {
	return &Table{cells: make([]uint64, slots)}
}

// OpenShared maps the table file at path, creating it with slots cells when
// absent. Every worker opens the same file; the first one sizes it. A file
// of another size or layout is rejected rather than misread.
func OpenShared(path string, slots int) (*Table, error) {
	size := (headerWords + slots) * 8
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open rate-limit table: %w", err)
	}
	defer f.Close() // the mapping outlives the descriptor
	// The lock serialises sizing and header writes between workers starting
	// together. It must be released explicitly: the mapping keeps the open
	// file description, and with it the lock, alive after Close.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("lock rate-limit table: %w", err)
	}
	defer func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN) }() // unlocking an open file cannot fail
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat rate-limit table: %w", err)
	}
	fresh := st.Size() == 0
	if fresh {
		if err := f.Truncate(int64(size)); err != nil {
			return nil, fmt.Errorf("size rate-limit table: %w", err)
		}
	} else if st.Size() != int64(size) {
		return nil, fmt.Errorf("rate-limit table %s has %d bytes, want %d for %d slots: remove it or use the same CLUSTERAPP_RATE_LIMIT_SLOTS in every worker", path, st.Size(), size, slots)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map rate-limit table: %w", err)
	}
	if fresh {
		binary.LittleEndian.PutUint64(mem[8:], uint64(slots))
		binary.LittleEndian.PutUint64(mem[0:], magic)
	} else if binary.LittleEndian.Uint64(mem[0:]) != magic || binary.LittleEndian.Uint64(mem[8:]) != uint64(slots) {
		_ = unix.Munmap(mem)
		return nil, errors.New("rate-limit table " + path + " has an unknown layout: remove it")
	}
	// Cells are 8-byte aligned words: the mapping is page aligned.
	cells := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[headerWords*8])), slots)
	return &Table{cells: cells, mem: mem}, nil
}

// Close unmaps a shared table.
func (t *Table) Close() error {
	if t.mem == nil {
		return nil
	}
	err := unix.Munmap(t.mem)
	t.mem, t.cells = nil, nil
	return err
}

// Slots is the number of cells.
func (t *Table) Slots() int { return len(t.cells) }

func (t *Table) cell(i int) *uint64 { return &t.cells[i] }

func load(p *uint64) uint64               { return atomic.LoadUint64(p) }
func cas(p *uint64, old, new uint64) bool { return atomic.CompareAndSwapUint64(p, old, new) }
