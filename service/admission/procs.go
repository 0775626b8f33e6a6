package admission

// Admission slots and GOMAXPROCS.
//
// Go runs goroutines on GOMAXPROCS Ps and preempts a goroutine that computes
// without yielding only about every 10 ms. When every P runs an admitted
// CPU-bound request, the goroutines that read new requests, answer 503,
// /healthz and the watchdog probe wait for one of those preemptions, and wait
// again each time: under a 10x spike on /fib?n=30 with one slot and
// GOMAXPROCS=1, rejections took about 1 s and admitted requests 5 s. With one
// P more than the slots, the serving path always has a P of its own; the
// kernel then shares the CPUs between the threads, and preempts the
// computation within its scheduling slice instead.
//
// Setting GOMAXPROCS also stops Go from following later changes of the CPU
// quota (systemctl set-property CPUQuota=); a worker picks those up at its
// next restart, as it does every other setting.

// ServingProcs returns the GOMAXPROCS a worker with maxInFlight admission
// slots should run with, and whether to change it. When Go chose the value
// (from the CPU count, affinity or CPU quota) and the slots can occupy every
// P, it is one more: current+1, never more, since slots far above the CPUs
// (admission as good as off) are not a reason for a hundred threads. A value
// the operator set (explicit) is kept; tooFew then says it leaves the
// serving path no P of its own.
func ServingProcs(current, maxInFlight int, explicit bool) (procs int, change, tooFew bool) {
	if current > maxInFlight {
		return current, false, false
	}
	if explicit {
		return current, false, true
	}
	return current + 1, true, false
}
