package ratelimit

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/clusterapp/clusterapp/service/worker/internal/shm"
	"github.com/sirupsen/logrus"
)

// layoutVersion is the meaning of a cell. Version 1 held wall-clock TATs
// hashed by unkeyed FNV; version 2 holds CLOCK_MONOTONIC TATs hashed under
// the table's secret.
const layoutVersion = 2

// Table is a fixed array of GCRA cells, shared between processes when backed
// by a file, and the key of its cell hash.
type Table struct {
	region *shm.Region
	cells  []uint64
	hash   cipher.Block // AES-128 under the table's secret
}

// Layout is the shared table's layout for slots cells; its FileName is
// ratelimit.v2.SLOTS.table.
func Layout(slots int) shm.Layout {
	return shm.Layout{Kind: "ratelimit", Version: layoutVersion, Size: slots, Words: slots}
}

// NewLocal returns a table in this process's memory, with a secret of its own.
func NewLocal(slots int) *Table { return newTable(shm.Local(slots)) }

// OpenShared maps the table for slots cells in dir (the workers' common
// runtime directory), building it when absent or unusable; every worker with
// the same CLUSTERAPP_RATE_LIMIT_SLOTS maps the same file and so shares its
// budgets and its secret. (nil, err) when dir cannot be used.
func OpenShared(dir string, slots int, log *logrus.Entry) (*Table, error) {
	r, err := shm.Open(dir, Layout(slots), log)
	if err != nil {
		return nil, fmt.Errorf("rate-limit table: %w", err)
	}
	return newTable(r), nil
}

func newTable(r *shm.Region) *Table {
	secret := r.Secret()
	block, _ := aes.NewCipher(secret[:]) // only a key of another length than 16, 24 or 32 bytes is refused
	return &Table{region: r, cells: r.Words(), hash: block}
}

// Close unmaps a shared table.
func (t *Table) Close() error { return t.region.Close() }

// Slots is the number of cells.
func (t *Table) Slots() int { return len(t.cells) }

// slot is the cell of key: one AES-128 block encryption of its 16 bytes
// under the table's secret (a keyed pseudo-random permutation, so a keyed
// PRF on distinct inputs), 8 bytes of it reduced mod Slots. The bias of the
// reduction is below 2^-40 at the largest table (2^24 cells).
func (t *Table) slot(key netip.Addr) int {
	b := key.As16()
	t.hash.Encrypt(b[:], b[:]) // in place: one 16-byte allocation, as b escapes through the interface
	return int(binary.LittleEndian.Uint64(b[:8]) % uint64(len(t.cells)))
}

func (t *Table) cell(i int) *uint64 { return &t.cells[i] }

func load(p *uint64) uint64               { return atomic.LoadUint64(p) }
func cas(p *uint64, old, new uint64) bool { return atomic.CompareAndSwapUint64(p, old, new) }
