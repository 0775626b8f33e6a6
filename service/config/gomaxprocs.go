package config

import (
	"fmt"
	"strconv"
)

// GOMAXPROCS is the Go runtime's variable. It is not a CLUSTERAPP_* setting,
// but the environment file passes it to the workers like one, and a worker
// that finds it set keeps the operator's number of Ps: it neither lowers
// them to its admission slots nor adds the spare one while requests compute
// (package admission, PlanProcs).
//
// The runtime applies the variable only when it is a whole number from 1
// (strconv.ParseInt(v, 10, 32), then n > 0); anything else ("3n", "0", an
// empty value) it ignores without a word and picks the number itself. A worker
// that took such a value for the operator's would run with Go's choice and
// no governor: with one CPU and one slot, it then never sheds a spike (the
// computation that holds the slot also holds the only P, so no request finds
// the slot taken) and requests queued for seconds.
const GOMAXPROCS = "GOMAXPROCS"

// GOMAXPROCSApplies reports whether the Go runtime applies v as GOMAXPROCS:
// its own test (runtime/proc.go, schedinit).
func GOMAXPROCSApplies(v string) bool {
	n, err := strconv.ParseInt(v, 10, 32)
	return err == nil && n > 0
}

// GOMAXPROCSAdvice says what a worker does with a GOMAXPROCS the runtime
// ignores.
const GOMAXPROCSAdvice = "expected a whole number from 1; the Go runtime ignores any other value, " +
	"and so does the worker: its admission slots set its Ps, with one more while requests compute"

// ProcsAtMostSlots says what a worker does with a GOMAXPROCS, valid, that
// is not above its admission slots: it runs those Ps and no governor, so a
// request that computes holds its P as well as its slot until it ends. The
// requests behind it run only once a slot is free again, so admission
// control turns none of them away: they queue. Measured on one CPU with
// GOMAXPROCS=1 and one slot, under a 10x spike of /fib?n=30: no 503 at
// all, /healthz p50 2.3 s (1.7 ms without GOMAXPROCS).
func ProcsAtMostSlots(procs, slots int) string {
	return fmt.Sprintf("GOMAXPROCS=%d is not above the %d admission slot(s) of a worker (CLUSTERAPP_MAX_IN_FLIGHT): "+
		"a request that computes holds its P until it ends, so under a spike the others queue for seconds instead of getting 503, "+
		"and /healthz waits with them; remove GOMAXPROCS (a worker then adds a P while requests compute) or set CLUSTERAPP_MAX_IN_FLIGHT below it", procs, slots)
}
