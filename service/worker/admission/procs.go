package admission

// Admission slots and GOMAXPROCS.
//
// Go runs goroutines on GOMAXPROCS Ps and preempts a goroutine that computes
// without yielding only about every 10 ms. When every P runs an admitted
// CPU-bound request, the goroutines that read new requests, answer 503,
// /healthz and the watchdog probe wait for one of those preemptions, and wait
// again each time, so under a spike a rejection waits behind the very
// computations it was meant to spare the client (docs/benchmarks.md,
// "GOMAXPROCS=1 with one slot" in the notes). With one P more than the slots, the serving path
// always has a P of its own; the kernel then shares the CPUs between the
// threads, and preempts the computation within its scheduling slice instead.
//
// A spare P is not free, though. An idle P makes Go wake a thread to look for
// work each time a goroutine becomes runnable, and in a pool every worker
// does so on the same CPUs: the wake-ups per request grow with the number of
// workers and take the fast routes' throughput with them (docs/benchmarks.md,
// "The pool at every worker count: GOMAXPROCS, and the shared accept"). So a
// worker runs with as many Ps as it has slots (never more than Go's own
// choice), and a Governor adds the spare P only while the serving path
// actually waits behind computing requests, and only while its NoSpare
// allows it: a pool worker forbids it past one worker per CPU.
//
// Setting GOMAXPROCS also stops Go from following later changes of the CPU
// quota (systemctl set-property CPUQuota=); a worker picks those up at its
// next restart, as it does every other setting.

// Procs is a worker's GOMAXPROCS policy: Base Ps while goroutines get a P
// promptly, Serving (Base+1) while every P computes and the serving path
// waits. Base == Serving means nothing is adjusted.
type Procs struct {
	Base, Serving int
	// TooFew says the operator's GOMAXPROCS leaves the serving path no P of
	// its own when every slot computes.
	TooFew bool
}

// PlanProcs returns the policy for a worker with maxInFlight admission slots
// whose GOMAXPROCS is current. When Go chose current (from the CPU count,
// affinity or CPU quota), the base is the smaller of current and the slots,
// since at most that many requests run at once, and the serving level one
// more. A value the operator set (explicit) is kept as it is.
func PlanProcs(current, maxInFlight int, explicit bool) Procs {
	if explicit {
		return Procs{Base: current, Serving: current, TooFew: current <= maxInFlight}
	}
	base := max(1, min(current, maxInFlight))
	return Procs{Base: base, Serving: base + 1}
}
