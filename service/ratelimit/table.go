package ratelimit

import (
	"fmt"
	"sync/atomic"

	"github.com/clusterapp/clusterapp/service/shm"
)

// magic marks a rate-limit table file and its layout version.
const magic = 0x636c75737472_0001

// Table is a fixed array of GCRA cells, shared between processes when backed
// by a file.
type Table struct {
	region *shm.Region
	cells  []uint64
}

// NewLocal returns a table in this process's memory.
func NewLocal(slots int) *Table {
	r := shm.Local(slots)
	return &Table{region: r, cells: r.Words()}
}

// OpenShared maps the table file at path, creating it with slots cells when
// absent. Every worker opens the same file.
func OpenShared(path string, slots int) (*Table, error) {
	r, err := shm.Open(path, magic, slots)
	if err != nil {
		return nil, fmt.Errorf("rate-limit table (every worker needs the same CLUSTERAPP_RATE_LIMIT_SLOTS): %w", err)
	}
	return &Table{region: r, cells: r.Words()}, nil
}

// Close unmaps a shared table.
func (t *Table) Close() error { return t.region.Close() }

// Slots is the number of cells.
func (t *Table) Slots() int { return len(t.cells) }

func (t *Table) cell(i int) *uint64 { return &t.cells[i] }

func load(p *uint64) uint64               { return atomic.LoadUint64(p) }
func cas(p *uint64, old, new uint64) bool { return atomic.CompareAndSwapUint64(p, old, new) }
