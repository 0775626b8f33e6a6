// Package ratelimit limits each client's request rate across the whole
// service, not per worker.
//
// A limiter inside each process silently multiplies the budget by the number
// of processes (the bug Fiber's docs describe for its limiter behind
// prefork). golang.org/x/time/rate cannot be shared between processes, so
// clusterapp keeps one table of token-bucket cells in a file that every
// worker maps (MAP_SHARED) from the units' common RuntimeDirectory
// (/run/clusterapp, one dynamic user for all instances; package shm). Each
// cell is one uint64 updated with compare-and-swap: the bucket is the Generic
// Cell Rate Algorithm (GCRA), which is exactly a token bucket of rate r and
// burst b but needs a single word of state, the "theoretical arrival time"
// (TAT).
//
// Time. TATs are points on CLOCK_MONOTONIC (see shm.Clock), which every process
// on the host shares and which never steps; version 1 stored wall-clock time,
// and a clock stepped back an hour refused clients for an hour. Every TAT read
// is also bounded by now plus one full burst, the furthest a correct table
// can be ahead, so a stale or foreign table never holds a client longer.
//
// Keys. A client is its address masked to a prefix: /32 for IPv4 and /64 for
// IPv6 by default (Guard.IPv4Prefix, IPv6Prefix), since one IPv6 host
// usually holds a whole /64 and rotating addresses in it escaped a per-/128
// limit. Behind a trusted proxy the client is the rightmost untrusted
// X-Forwarded-For hop (ip, ip:port, [v6]:port or [v6]).
//
// Cells. A key's cell is one AES-128 encryption of its 16 bytes under a
// random secret kept in the table's header, reduced mod Slots: a keyed PRF,
// with the same secret in every worker, so all workers put a client in the
// same cell and nobody outside can tell which. Version 1's unkeyed FNV let an
// attacker with a /64 find, offline, an address sharing a victim's cell
// (hashing addresses of the /64 until one lands there: about Slots tries, as
// the tests' fnvColliders does) and spend the victim's budget from it. AES is
// in the standard library and in hardware (AES-NI): one block costs
// nanoseconds, with no dependency added; SipHash would do as well but is not
// in the standard library.
//
// Error bound. Clients that share a cell share a budget: the method never
// admits more than r (+ b at once) per client across all workers on a host,
// and may admit less when keys collide. With M active clients and S slots a
// given client shares its cell with probability about M/S (65,536 slots: 1.5%
// at 1,000 active clients), by chance only, as the hash is keyed. Several
// hosts each enforce the budget on their own (N hosts admit up to N*r): put
// nginx's limit_req in front for a multi-host budget (docs/nginx).
//
// Without the shared table. Without a runtime directory (a standalone worker)
// the table lives in the process's own memory: the same algorithm, for one
// process. When the directory exists but the table cannot be opened
// (read-only, missing, full), a Keeper puts the limiter on the operator's
// fallback (a table of its own, so up to one budget per worker, or none, so
// limited routes answer 503) and retries every few seconds until it opens.
// Tables are in files named by layout and size (ratelimit.v2.SLOTS.table), so
// changing CLUSTERAPP_RATE_LIMIT_SLOTS gives new workers a new table while
// the old ones finish on theirs: during a rolling restart a client may get
// one budget on each.
package ratelimit
