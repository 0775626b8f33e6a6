// Package shm maps small arrays of uint64 words shared by every worker.
//
// Workers are separate processes started by systemd; what they must agree on
// (the per-client rate-limit budget, each worker's load for balancing) lives
// in files in the units' common RuntimeDirectory (/run/clusterapp, a tmpfs
// kept across restarts by RuntimeDirectoryPreserve=yes), mapped MAP_SHARED by
// each of them and updated only with atomic operations.
//
// # A file per layout and size
//
// The directory outlives every process, so it holds whatever earlier
// versions and settings left there. Version 1 used one file per table kind
// and refused to start on a file of another size ("remove it"): raising
// CLUSTERAPP_RATE_LIMIT_SLOTS, or an upgrade that changed a layout, made
// every worker exit until someone deleted the file by hand. Now the layout
// version and the size are in the file name (ratelimit.v2.65536.table,
// balance.v4.1024.table): workers started with different settings, as during
// a rolling restart that changes them, map different files and never fight
// over one. A file of the right name whose size or header is wrong
// (truncated, corrupt, a symbolic link) is replaced.
//
// # Replacing, never shrinking
//
// A file mapped by a live process must never be truncated: a mapping whose
// file shrinks faults with SIGBUS on the next access, which kills the
// process; it is not an error anyone can handle. So a table is built in a
// temporary file (sized with fallocate, so a full tmpfs fails here with
// ENOSPC instead of a SIGBUS at the first write to a page), its header
// written, and the file renamed over the name. Whoever still maps the old
// inode keeps it, intact, until it unmaps it; unlink and rename only remove
// a name.
//
// # Locks
//
// Every change of names in the directory (create, replace, remove) is made
// holding an exclusive flock on the directory itself, taken without blocking
// and retried for at most a couple of seconds, so a worker frozen while
// holding it delays the others' start a little, never forever. Every worker
// holds a shared flock on the table file it maps for as long as it maps it
// (the descriptor stays open; a flock belongs to the open file description
// and dies with the process). A table file that can be locked exclusively
// with LOCK_NB is therefore mapped by no live process. After opening its own
// table, a worker removes the files of the same kind and another name (other
// sizes, other layout versions, version 1's name, temporary files of a
// builder that died) that are unused that way: it locks each, checks the
// name still names the inode it locked (lock, then verify), and unlinks it.
// Version 1 workers never held that lock, so their file is removed even while
// one still maps it: harmless, since an unlinked mapping stays valid; the
// old worker just stops sharing with anyone.
//
// # Header
//
// A table file starts with a 64-byte header, little-endian:
//
//	0   magic   uint64    hash of the header format, the kind and its layout version
//	8   words   uint64    how many words follow the header
//	16  secret  [16]byte  random (crypto/rand), written once when the file is built
//	32  zero    [32]byte  reserved
//
// The secret keys what must be the same in every worker and unpredictable
// outside (the rate limit's cell hash): every process that maps the file
// reads the same one. 64 bytes keep the words 8-byte aligned for atomics.
package shm
