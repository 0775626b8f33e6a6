// Package admission bounds the work a worker takes on at once.
//
// A process that accepts every request queues them all, and each new
// request slows every other one: under overload every client waits behind
// all the others (docs/benchmarks.md, "Spike: /fib?n=30 at 10x its
// sustainable rate", the "protection off" column). Instead, at most
// MaxInFlight requests run at a time (by default GOMAXPROCS: CPU-bound
// handlers gain nothing from running more at once than there are threads);
// a request that finds them all busy waits at most Wait for a slot and is
// otherwise answered 503 with Retry-After at once, so a client or a front
// load balancer can go elsewhere while the admitted requests keep their
// unloaded latency.
//
// Health, readiness and metrics are exempt: systemd's watchdog, load
// balancers and Prometheus must see the truth about an overloaded worker,
// not queue behind its work.
package admission

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Observer counts admission decisions (the metrics package implements it).
type Observer interface {
	Admitted(wait time.Duration)
	Shed()
}

// Limiter admits at most MaxInFlight requests at a time.
type Limiter struct {
	slots    chan struct{}
	released atomic.Uint64  // admitted requests finished
	started  chan Admission // an admission, when none is pending
	// long is signalled when a request releases a slot it held watch or
	// longer (WatchLong); watch is 0 while nobody watches.
	long       chan struct{}
	watch      atomic.Int64
	wait       time.Duration
	retryAfter string
	shedBody   []byte // the 503 answer, the same for every request shed
	exempt     map[string]bool
	obs        Observer
	changed    func() // Options.SlotsChanged
	now        func() time.Time
	stall      stallLook   // what Stalled saw last
	batch      *batch      // nil: admitted requests run where Go puts them
	spare      atomic.Bool // SetSpare
}

// stallLook is Stalled's memory between calls.
type stallLook struct {
	mu       sync.Mutex
	released uint64    // finished requests at since
	since    time.Time // the first look that found every slot taken after released; zero when the last look found one free
}

// Options configure a Limiter.
type Options struct {
	MaxInFlight int           // concurrent requests admitted; must be > 0
	Wait        time.Duration // longest wait for a slot; 0 sheds at once
	RetryAfter  time.Duration // sent in Retry-After (whole seconds, at least 1)
	Exempt      []string      // paths never limited
	Observer    Observer      // optional
	// Now is the clock a request's wait for a slot is measured on (what
	// Observer.Admitted is told); default time.Now.
	Now func() time.Time
	// SlotsChanged, when set, is called on the request's goroutine after
	// it takes a slot and after it frees one (InFlight then tells how many
	// are taken): the balancer keeps a worker whose slots are all taken out
	// of the socket's wait while another has one free (package balance).
	SlotsChanged func()
	// Batch, from ProbeBatch, runs each request admitted while
	// SetSpare(true) said the spare P runs on a thread of its own set to
	// SCHED_BATCH, at the threads' nice value (batch.go); nil never does.
	// A thread that cannot be switched turns it off for good, and
	// BatchFailed, when set, is told why, once.
	Batch       *Threads
	BatchFailed func(error)
}

// New returns a Limiter.
func New(opts Options) *Limiter {
	exempt := map[string]bool{}
	for _, p := range opts.Exempt {
		exempt[p] = true
	}
	secs := max(int(opts.RetryAfter.Round(time.Second)/time.Second), 1)
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	l := &Limiter{
		slots: make(chan struct{}, opts.MaxInFlight), started: make(chan Admission, 1), long: make(chan struct{}, 1), wait: opts.Wait,
		retryAfter: strconv.Itoa(secs), exempt: exempt, obs: opts.Observer, changed: opts.SlotsChanged, now: now,
		shedBody: shedBody(opts.MaxInFlight, opts.Wait, secs),
	}
	if opts.Batch != nil {
		l.batch = &batch{set: setPolicy(opts.Batch.Nice), onFail: opts.BatchFailed}
	}
	return l
}

// SetSpare tells the Limiter whether the worker runs the spare P (a P more
// than its slots, Governor): while it does, and Options.Batch is set,
// admitted requests compute on SCHED_BATCH threads (batch.go). The worker
// tells it so only while its pool also has no more workers than CPUs.
func (l *Limiter) SetSpare(on bool) { l.spare.Store(on) }

// shedBody is the JSON of a 503: what was full, for how long the request
// waited, and when to come back.
func shedBody(slots int, wait time.Duration, retryAfter int) []byte {
	waited := "none was free (CLUSTERAPP_ADMISSION_WAIT=0: no waiting)"
	if wait > 0 {
		waited = fmt.Sprintf("none came free within %s (CLUSTERAPP_ADMISSION_WAIT)", wait)
	}
	msg := fmt.Sprintf("worker at capacity: all %d admission slots (CLUSTERAPP_MAX_IN_FLIGHT) were taken and %s; retry after %d s", slots, waited, retryAfter)
	b, _ := json.Marshal(map[string]any{"error": msg, "status": http.StatusServiceUnavailable, "retry_after_seconds": retryAfter})
	return append(b, '\n')
}

// Middleware admits or sheds each request before next sees it.
func (l *Limiter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.exempt[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		waited, ok := l.acquire(r)
		if !ok && r.Context().Err() != nil {
			// The client left while it waited for a slot: nothing was
			// shed, and nobody reads an answer. 499 is nginx's "client
			// closed request", for the access log.
			w.WriteHeader(StatusClientClosed)
			return
		}
		if !ok {
			if l.obs != nil {
				l.obs.Shed()
			}
			w.Header().Set("Retry-After", l.retryAfter)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(l.shedBody)
			return
		}
		defer l.release(mono())
		if l.changed != nil {
			l.changed()
		}
		if len(l.started) == 0 { // one load per request while a signal is pending
			select {
			case l.started <- Admission{At: time.Now(), CPU: processCPU()}: // the Governor's clocks, not Options.Now
			default:
			}
		}
		if l.obs != nil {
			l.obs.Admitted(waited)
		}
		if l.spare.Load() && l.batch.enter() {
			defer l.batch.leave() // before release's deferred yield: the thread serves again as SCHED_OTHER
		}
		next.ServeHTTP(w, r)
	})
}

// yieldAfter is the hold after which release yields the P first: a request
// that held its slot this long may have kept the goroutines behind it off
// its P for as long (Go preempts only after 10 ms).
const yieldAfter = time.Millisecond

// release frees a slot taken at start (on the monotonic clock) and signals
// Long when it was held the watched hold or longer.
//
// A request that held its slot yieldAfter or longer first yields its P
// once. Requests whose goroutines became runnable on that P while it ran
// (they arrived during its computation, and the kernel ran the computing
// thread rather than the spare P's) then meet the slot still taken: turned
// away at once, or queued behind the waiters, as the ones that got to run
// during the computation were. The slot goes to a request found after
// them, one that arrived later. Without the yield, Go runs its local run
// queue first, and the oldest of those requests took the slot with a whole
// computation already waited: the spike's slowest admitted requests took
// two computations (docs/benchmarks.md, "An admitted request that waited a
// whole computation"). The yield costs the answer the time those requests
// take to be turned away, and a request that held its slot while it slept
// (it kept no P) finds nothing to yield to.
func (l *Limiter) release(start time.Duration) {
	held := mono() - start
	if held >= yieldAfter {
		runtime.Gosched()
	}
	<-l.slots
	l.released.Add(1)
	if l.changed != nil {
		l.changed()
	}
	if w := time.Duration(l.watch.Load()); w > 0 && held >= w {
		select {
		case l.long <- struct{}{}:
		default: // one is pending already
		}
	}
}

// epoch is the origin of mono.
var epoch = time.Now()

// mono reads the monotonic clock alone (one clock read; time.Now takes two).
func mono() time.Duration { return time.Since(epoch) }

// StatusClientClosed is the status recorded for a request whose client
// went away before it was answered (nginx's 499); no client reads it.
const StatusClientClosed = 499

// acquire takes a slot at once, or within the wait, or gives up.
func (l *Limiter) acquire(r *http.Request) (time.Duration, bool) {
	select {
	case l.slots <- struct{}{}:
		return 0, true
	default:
	}
	if l.wait <= 0 {
		return 0, false
	}
	start := l.now()
	t := time.NewTimer(l.wait) // a real timer; Now only measures the wait
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return l.now().Sub(start), true
	case <-t.C:
		return l.wait, false
	case <-r.Context().Done():
		return l.now().Sub(start), false
	}
}

// InFlight is the number of admitted requests running now.
func (l *Limiter) InFlight() int { return len(l.slots) }

// Slots reports the slots, how many are taken now, and how many admitted
// requests have finished since the start: what a Governor needs to tell
// long requests holding every slot from many short ones.
func (l *Limiter) Slots() SlotUse {
	return SlotUse{Slots: cap(l.slots), InFlight: len(l.slots), Released: l.released.Load()}
}

// Started carries a request's admission (its time, and the process's CPU
// time then) when no earlier one is pending: a request never waits on it,
// and while one is pending (a Governor takes it only when it goes idle)
// costs a single load. A Governor asleep while nothing runs wakes up on it
// and judges from the admission on how long it then waited for a P.
func (l *Limiter) Started() <-chan Admission { return l.started }

// WatchLong makes Long signal a request that held its slot hold or longer,
// from the requests admitted next on; 0 stops it. It costs the requests
// nothing more: each reads the monotonic clock when it takes its slot and
// when it releases it anyway (release).
func (l *Limiter) WatchLong(hold time.Duration) { l.watch.Store(int64(max(hold, 0))) }

// Long is signalled when a request released a slot it held for the hold
// WatchLong set or longer; one signal is pending at most, so a request
// never waits on it. A Governor at its base level listens to it while its
// looks see only short requests, instead of ticking: the end of the first
// long request ends its quiet period.
func (l *Limiter) Long() <-chan struct{} { return l.long }

// Stalled reports for how long every slot has been taken with no admitted
// request finishing, as its calls saw it: 0 when a slot is free or a
// request finished since the last call, otherwise the time since the first
// call that found the slots in that state. Every request holding a slot
// then has held it at least that long, since none could take one without a
// release. It reads no clock of its own (now is the caller's) and costs the
// requests nothing: the watchdog's health probe calls it, so a worker whose
// handlers hold every slot and never return (a deadlock of the handlers
// alone: /healthz, exempt from admission, still answers) can be told from
// one that is only busy.
func (l *Limiter) Stalled(now time.Time) time.Duration {
	released := l.released.Load()
	full := len(l.slots) == cap(l.slots)
	l.stall.mu.Lock()
	defer l.stall.mu.Unlock()
	switch {
	case !full:
		l.stall.since = time.Time{}
	case l.stall.since.IsZero() || released != l.stall.released:
		l.stall.released, l.stall.since = released, now
	default:
		return now.Sub(l.stall.since)
	}
	return 0
}
