package admission

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Computing requests on SCHED_BATCH threads.
//
// The spare P gives the serving path (new requests, rejections, /healthz,
// the watchdog's probe) a P of its own while every slot computes, but a P
// is not a CPU: the kernel shares the CPUs between the process's threads
// and cannot tell which of them computes. Go's threads trade roles, too:
// the thread that has just computed a request goes on to serve, and the
// one that served picks up the next computation. In an execution trace of
// a spike (one worker on one CPU, one slot, /fib?n=30 at 10x), goroutines
// readied on the serving P waited 5-12 ms while that P's thread sat
// runnable behind the computing one, through one or two computations, and
// rejections and /healthz took those waits at p99 (docs/benchmarks.md,
// "The serving thread waited for the kernel").
//
// So while the spare P runs, an admitted request runs on a thread of its
// own (runtime.LockOSThread) set to SCHED_BATCH, the policy sched(7) gives
// CPU-bound threads, and set back to SCHED_OTHER before the thread runs
// anything else; the nice value stays. What the measurements credit is
// the change itself, not the policy's rules: on Linux 6.18 (EEVDF), each
// change takes the running thread off its run queue and puts it back, and
// a runnable serving thread then ran first. Resetting only the thread's
// slice did as much; a call that changes nothing, LockOSThread alone, or a
// sched_yield at the start of each computation did not bring /healthz's
// p99 down. A policy change
// is a change on every kernel; on other kernels its effect was not
// measured, and the cost below is all it can lose.
//
// Cost: two sched_setattr calls per request admitted while the spare P
// runs (about 4 µs here, against 4 ms for /fib?n=30), none otherwise. A
// handler that blocks while its thread is locked hands its P over and
// back each time it blocks (Go's locked-thread switch). The shipped unit's
// seccomp filter allows sched_setattr for this; where it is refused (an
// older unit, a stricter filter), ProbeBatch says so at start and
// requests compute on ordinary threads, as before.

// batch switches the calling thread between SCHED_BATCH and SCHED_OTHER
// for the requests a Limiter admits while the spare P runs.
type batch struct {
	set    func(policy uint32) error // sets the calling thread's policy
	failed atomic.Bool
	onFail func(error)
}

// Threads is how the process's threads are scheduled, as ProbeBatch found
// them: SCHED_OTHER at this nice value, which every switch keeps (a unit's
// Nice= stays the operator's).
type Threads struct{ Nice int32 }

// ErrOwnPolicy is ProbeBatch's answer when the threads run a policy other
// than SCHED_OTHER already (the unit's CPUSchedulingPolicy=): that choice
// is the operator's, and requests compute under it.
var ErrOwnPolicy = errors.New("the threads run a scheduling policy of their own")

// setPolicy returns a setter of the calling thread's policy (pid 0 is the
// calling thread, not the process) at the given nice value.
func setPolicy(nice int32) func(policy uint32) error {
	return func(policy uint32) error {
		return unix.SchedSetAttr(0, &unix.SchedAttr{Policy: policy, Nice: nice}, 0)
	}
}

// ProbeBatch reads how the process's threads are scheduled and tries, on a
// thread of its own, whether one may be moved to SCHED_BATCH and back (the
// unit's seccomp filter decides), the way a Limiter will.
func ProbeBatch() (Threads, error) {
	return probeBatch(func() (*unix.SchedAttr, error) { return unix.SchedGetAttr(0, 0) }, setPolicy)
}

func probeBatch(get func() (*unix.SchedAttr, error), setter func(nice int32) func(uint32) error) (Threads, error) {
	attr, err := get()
	if err != nil {
		return Threads{}, fmt.Errorf("sched_getattr: %w", err)
	}
	if attr.Policy != unix.SCHED_NORMAL {
		return Threads{}, fmt.Errorf("%w: %s", ErrOwnPolicy, policyName(attr.Policy))
	}
	t := Threads{Nice: attr.Nice}
	done := make(chan error, 1)
	go func() { // a goroutine of its own: a thread leave cannot set back ends with it
		b := &batch{set: setter(t.Nice), onFail: func(err error) { done <- err }}
		if b.enter() {
			b.leave()
		}
		if !b.failed.Load() {
			done <- nil
		}
	}()
	return t, <-done
}

// policyName names a scheduling policy as sched(7) does.
func policyName(p uint32) string {
	switch p {
	case unix.SCHED_NORMAL:
		return "SCHED_OTHER"
	case unix.SCHED_FIFO:
		return "SCHED_FIFO"
	case unix.SCHED_RR:
		return "SCHED_RR"
	case unix.SCHED_BATCH:
		return "SCHED_BATCH"
	case unix.SCHED_IDLE:
		return "SCHED_IDLE"
	case unix.SCHED_DEADLINE:
		return "SCHED_DEADLINE"
	}
	return fmt.Sprintf("policy %d", p)
}

// enter locks the calling goroutine to its thread and sets the thread to
// SCHED_BATCH; when it returns true, leave must follow on the same
// goroutine. After a failure it does nothing.
func (b *batch) enter() bool {
	if b == nil || b.failed.Load() {
		return false
	}
	runtime.LockOSThread()
	if err := b.set(unix.SCHED_BATCH); err != nil {
		runtime.UnlockOSThread() // the thread is as it was
		b.fail(fmt.Errorf("sched_setattr(SCHED_BATCH): %w", err))
		return false
	}
	return true
}

// leave sets the thread back to SCHED_OTHER and unlocks it. A thread that
// cannot be set back stays locked to its goroutine, so nothing else runs
// on it, and Go ends it when the goroutine (the connection) ends.
func (b *batch) leave() {
	if err := b.set(unix.SCHED_NORMAL); err != nil {
		b.fail(fmt.Errorf("sched_setattr(SCHED_OTHER) after SCHED_BATCH: %w", err))
		return
	}
	runtime.UnlockOSThread()
}

// fail turns the switch off for good and reports err, once.
func (b *batch) fail(err error) {
	if b.failed.CompareAndSwap(false, true) && b.onFail != nil {
		b.onFail(err)
	}
}
