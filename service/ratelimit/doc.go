// Package ratelimit limits each client's request rate across the whole
// service, not per worker.
//
// A limiter inside each process silently multiplies the budget by the number
// of processes (the bug Fiber's docs describe for its limiter behind
// prefork). golang.org/x/time/rate cannot be shared between processes, so
// clusterapp keeps one table of token-bucket cells in a file that every
// worker maps (MAP_SHARED) from the units' common RuntimeDirectory
// (/run/clusterapp, one dynamic user for all instances). Each cell is one
// uint64 updated with compare-and-swap: the bucket is the Generic Cell Rate
// Algorithm (GCRA), which is exactly a token bucket of rate r and burst b but
// needs a single word of state, the "theoretical arrival time" (TAT).
//
// Error bound. A client is keyed by its address, hashed into one of Slots
// cells. Clients that collide share a cell and so a budget: the method never
// admits more than r (+ b at once) per client across all workers on a host,
// and may admit less when it collides. With M active clients and S slots a
// given client shares its cell with probability about M/S (65,536 slots: 1.5%
// at 1,000 active clients). Several hosts each enforce the budget on their own
// (N hosts admit up to N*r): put nginx's limit_req in front for a
// multi-host budget (docs/nginx).
//
// Without a shared directory (a standalone worker) the table lives in the
// process's own memory: the same algorithm, for one process.
package ratelimit
