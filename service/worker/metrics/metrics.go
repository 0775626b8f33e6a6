// Package metrics counts what each worker does and serves the whole pool's
// numbers: one scrape of the metrics listener returns every live worker's
// series, labelled worker="N". Under systemd the metrics exporter answers
// (Exporter, clusterapp-metrics.service); a worker run on its own answers
// its own listener (Handler).
//
// # Why shared memory
//
// Every worker writes its numbers into its own slot of a table mapped
// MAP_SHARED from the units' runtime directory (package shm, the same
// mechanism as the rate limit and balancing tables), with atomic adds, and
// the process that answers a scrape reads every live slot. The alternatives
// were worse for an operator:
//   - Each worker serving its own registry on a socket shared by all (the
//     first version) made a scrape land on a random worker: counters jumped
//     between workers and rate() read each jump as a reset.
//   - The answering worker asking every other one over a socket makes a
//     scrape as slow as the slowest worker, and a frozen worker (the case
//     the watchdog exists for) would stall or drop out of every scrape.
//
// Reading memory needs no cooperation from the other workers: a frozen
// worker still shows its last numbers, a scrape costs one pass over the
// table, and because the table outlives the processes (the runtime
// directory is preserved across restarts), a restarted worker continues its
// slot's counters instead of resetting them. On the hot path a request is a
// few atomic adds on the worker's own cache lines, cheaper than the client
// library's label lookups.
//
// A slot is live while its owner process holds an OFD lock on it (shm's
// claims): the kernel drops the lock when the process exits, so a scrape
// shows exactly the running workers, a stopped or scaled-away worker's
// series disappear (Prometheus marks them stale), and the pool's worker
// count is the number of live slots.
//
// # Stalled workers
//
// A frozen (SIGSTOP) or hung worker cannot clear its own ready flag, so its
// slot also holds a heartbeat: the shm.Clock time of its last passing
// health probe, the one that gates its watchdog ping (WatchProbes,
// ProbePassed). The process answering a scrape compares it with its own
// clock (CLOCK_MONOTONIC, one clock for every process) and reports a worker
// whose probe has not passed for watchdog.LateAfter as stalled and not
// ready, seconds before systemd's watchdog kills it. That costs one clock
// read per scrape.
//
// A worker outside the pool (no runtime directory, a name that is not a
// worker number, or a table that cannot be opened) counts in a table of its
// own in process memory and its scrapes show only itself.
//
// Route labels come from a fixed set of routes given at construction, never
// from the raw path, so a client requesting random URLs cannot blow up
// cardinality; the layout of the table follows from them.
package metrics

import (
	"context"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/probe"

	"github.com/clusterapp/clusterapp/service/worker/internal/shm"
	"github.com/prometheus/procfs"
	"github.com/sirupsen/logrus"
)

// Options configure New.
type Options struct {
	// Worker is the worker's name: a number 1..Slots shares the pool's
	// table; anything else (pid-123 for a standalone process) counts alone.
	Worker string
	// Version is the build's version, for clusterapp_build_info.
	Version string
	// Routes are every route label Instrument will be called with.
	Routes []string
	// Dir is the runtime directory holding the shared table; "" counts alone.
	Dir string
	// Desired is the pool size the worker was configured with
	// (CLUSTERAPP_WORKERS, 0 already replaced by the CPU count).
	Desired int
	// DesiredNow, when set, reads the pool size configured now, at each
	// scrape; false when it cannot tell, and the newest worker's Desired is
	// reported.
	DesiredNow func() (int, bool)
	// Start is when the process started.
	Start time.Time
	Log   *logrus.Entry
}

// Metrics is one worker's instruments and its view of the pool.
type Metrics struct {
	opts   Options
	lay    *layout
	region *shm.Region
	words  []uint64 // the whole table
	self   int      // this worker's slot
	shared bool     // the table is the pool's, not this process's
	number int      // the worker number for slot self (0 when alone)
	queues listenQueues
	clock  shm.Clock
	// gate and rateMode are sampled by Run (WatchBalanceGate, WatchRateLimitTable).
	gate     atomic.Pointer[func() bool]
	rateMode atomic.Pointer[func() string]
}

// New claims the worker's slot in the shared table in opts.Dir, or counts
// alone when it cannot (the reason is logged): metrics never stop a worker.
func New(opts Options) *Metrics {
	m := &Metrics{opts: opts, lay: newLayout(opts.Routes)}
	m.clock, _ = shm.MonotonicClock() // on error it counts from now, fine for pacing samples
	n, err := strconv.Atoi(opts.Worker)
	numbered := err == nil && n >= 1 && n <= Slots
	if numbered && opts.Dir != "" {
		m.openShared(n)
	}
	if m.region == nil {
		m.region = shm.Local(m.lay.table.Words)
		m.words = m.region.Words()
		if numbered {
			m.self, m.number = n-1, n
		}
	}
	m.claimed()
	return m
}

func (m *Metrics) openShared(n int) {
	log := m.opts.Log.WithField("table", m.lay.table.FileName())
	r, err := shm.Open(m.opts.Dir, m.lay.table, m.opts.Log)
	if err != nil {
		log.WithError(err).Warn("metrics table unavailable: this worker counts alone, and the pool's scrapes (the metrics exporter reads the table) do not show it")
		return
	}
	self := n - 1
	ok, err := r.Claim(self*m.lay.perSlot, m.lay.perSlot)
	if err != nil || !ok {
		_ = r.Close() // nothing written
		log.WithError(err).WithField("claimed_by_another_process", !ok).Warn("metrics slot unavailable (is another process running as this worker?): this worker counts alone, and the pool's scrapes do not show it")
		return
	}
	m.region, m.words, m.self, m.number, m.shared = r, r.Words(), self, n, true
}

// claimed resets the slot's gauges for this process and counts its start.
func (m *Metrics) claimed() {
	for _, w := range []int{wReady, wInFlight, wConnsOpen, wGate, wRateTable, wRSS, wFDs, wGoroutines, wWatchdogNs, wProbedNs} {
		atomic.StoreUint64(m.word(w), 0)
	}
	atomic.StoreUint64(m.word(wPID), uint64(os.Getpid()))
	atomic.StoreUint64(m.word(wStartNs), uint64(m.opts.Start.UnixNano()))
	atomic.StoreUint64(m.word(wDesired), uint64(max(m.opts.Desired, 0)))
	atomic.StoreUint64(m.word(wGOMAXPROCS), uint64(runtime.GOMAXPROCS(0)))
	atomic.AddUint64(m.word(wStarts), 1)
	// Every route's 200 series exists from the start, at 0: a series that
	// first appears mid-window with its count already high loses that count
	// to increase() and rate(), which cannot know it started from zero.
	for _, b := range m.lay.route {
		m.codeEntry(b, http.StatusOK)
	}
}

// Shared reports whether the worker counts in the pool's table.
func (m *Metrics) Shared() bool { return m.shared }

func (m *Metrics) word(w int) *uint64 { return &m.words[m.self*m.lay.perSlot+w] }

func (m *Metrics) add(w int, d uint64) { atomic.AddUint64(m.word(w), d) }

func (m *Metrics) observe(h histogram, d time.Duration) {
	i := sort.SearchFloat64s(h.bounds, d.Seconds()) // first bound >= the value: its le bucket
	atomic.AddUint64(m.word(h.off+i), 1)
	atomic.AddUint64(m.word(h.off+len(h.bounds)+1), uint64(max(d, 0)))
}

// SetReady publishes whether the worker serves (clusterapp_worker_ready).
func (m *Metrics) SetReady(ready bool) {
	v := uint64(0)
	if ready {
		v = 1
	}
	atomic.StoreUint64(m.word(wReady), v)
}

// WatchProbes says that the worker's health probe runs under a watchdog
// timeout (WatchdogSec=), passing probes reported by ProbePassed: from now
// on a scrape calls the worker stalled, and not ready, once no probe has
// passed for watchdog.LateAfter(timeout). A frozen (SIGSTOP) or hung
// worker cannot clear its own ready flag; the process answering the scrape
// sees its heartbeat age instead. Without it the worker is never judged.
func (m *Metrics) WatchProbes(timeout time.Duration) {
	atomic.StoreUint64(m.word(wProbedNs), uint64(max(m.clock(), 0)))
	atomic.StoreUint64(m.word(wWatchdogNs), uint64(max(timeout, 0)))
}

// ProbePassed records a passing health probe: the worker's heartbeat.
func (m *Metrics) ProbePassed() {
	atomic.StoreUint64(m.word(wProbedNs), uint64(max(m.clock(), 0)))
}

// ConnOpened counts a new client connection.
func (m *Metrics) ConnOpened() { m.add(wAccepted, 1); m.add(wConnsOpen, 1) }

// ConnClosed counts a closed client connection.
func (m *Metrics) ConnClosed() { m.add(wConnsOpen, ^uint64(0)) }

// RequestRejected counts a request net/http ended before the handler saw it
// (server.RejectObserver): malformed, headers too large or too slow.
func (m *Metrics) RequestRejected() { m.add(wRejected, 1) }

// Admitted counts a request admitted after waiting wait (admission.Observer).
func (m *Metrics) Admitted(wait time.Duration) { m.add(wAdmitted, 1); m.observe(m.lay.wait, wait) }

// Shed counts a request refused at capacity (admission.Observer).
func (m *Metrics) Shed() { m.add(wShed, 1) }

// Recycled counts this worker recycling itself for reason, one of
// RecycleReasons (another counts as none).
func (m *Metrics) Recycled(reason string) {
	for i, r := range RecycleReasons {
		if r == reason {
			m.add(recyclesOff+i, 1)
		}
	}
}

// Limited counts a request refused by the rate limit (ratelimit.Observer).
func (m *Metrics) Limited() { m.add(wLimited, 1) }

// LimitUnavailable counts a request refused because the worker has no
// rate-limit table (ratelimit.Observer).
func (m *Metrics) LimitUnavailable() { m.add(wUnavailable, 1) }

// Hit counts a result-cache hit (cache.Observer).
func (m *Metrics) Hit() { m.add(wHits, 1) }

// Miss counts a result-cache miss (cache.Observer).
func (m *Metrics) Miss() { m.add(wMisses, 1) }

// ConnMoved counts a keep-alive connection ended so that its client
// reconnects to a less-loaded worker (balance.Balancer.Crowded).
func (m *Metrics) ConnMoved() { m.add(wMoved, 1) }

// AcceptDeferred counts an accept put off for d (balance.Observer).
func (m *Metrics) AcceptDeferred(d time.Duration) { m.observe(m.lay.deferred, d) }

// WatchBalanceGate publishes open() as clusterapp_balance_gate_open, sampled
// with the process statistics (Run).
func (m *Metrics) WatchBalanceGate(open func() bool) { m.gate.Store(&open); m.sampleWatched() }

// WatchRateLimitTable publishes mode() (shared, local or closed) as
// clusterapp_ratelimit_table, sampled with the process statistics (Run).
func (m *Metrics) WatchRateLimitTable(mode func() string) { m.rateMode.Store(&mode); m.sampleWatched() }

// Instrument is the middleware that counts and times a route's requests
// under the given route label, which must be one of Options.Routes (it
// panics otherwise: the table has no place for it).
func (m *Metrics) Instrument(route string) func(http.Handler) http.Handler {
	i := m.lay.routeIndex(route)
	if i < 0 {
		panic("metrics: route " + strconv.Quote(route) + " is not in Options.Routes")
	}
	return func(next http.Handler) http.Handler { return m.instrument(m.lay.route[i], next) }
}

// started is when the process started timing requests: a duration since it
// (sinceStart) reads only the monotonic clock, where time.Now reads the wall
// clock too, and clock reads are a large part of what a fast request costs
// (package deadline).
var started = time.Now()

func sinceStart() time.Duration { return time.Since(started) }

func (m *Metrics) instrument(b routeBlock, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if probe.Is(r) {
			next.ServeHTTP(w, r)
			return
		}
		m.add(wInFlight, 1)
		start := sinceStart()
		sw, ok := w.(StatusReporter)
		if !ok {
			s := &StatusWriter{ResponseWriter: w}
			sw, w = s, s
		}
		returned := false
		defer func() {
			m.add(wInFlight, ^uint64(0))
			m.observe(b.duration, sinceStart()-start)
			code := sw.Status()
			if !returned {
				// The handler panicked (net/http recovers it, logs it and
				// closes the connection): the client got no answer, or a
				// cut one, whatever the writer reports.
				code = http.StatusInternalServerError
			}
			m.countCode(b, code)
		}()
		next.ServeHTTP(w, r)
		returned = true
	})
}

// StatusReporter is a ResponseWriter that records the status written
// through it (StatusWriter; the worker's server wraps every response in
// one). Instrument counts by the status of one it is given, instead of
// wrapping the writer again: one allocation less per request.
type StatusReporter interface {
	http.ResponseWriter
	Status() int // the status written, 200 when nothing was
}

// countCode adds one to the route's count for code: the entry holding code,
// or the first free one (claimed with a compare-and-swap, since requests
// of one worker run concurrently), or "other" when all are taken.
func (m *Metrics) countCode(b routeBlock, code int) {
	atomic.AddUint64(m.codeEntry(b, code), 1)
}

// codeEntry returns the count of code in a route's table, taking a free
// entry for it if needed, or the "other" count when all are taken.
func (m *Metrics) codeEntry(b routeBlock, code int) *uint64 {
	for e := range codeEntries {
		key := m.word(b.codes + 2*e)
		k := atomic.LoadUint64(key)
		if k == 0 && atomic.CompareAndSwapUint64(key, 0, uint64(code)) {
			k = uint64(code)
		} else if k == 0 {
			k = atomic.LoadUint64(key) // another request took it just now
		}
		if k == uint64(code) {
			return m.word(b.codes + 2*e + 1)
		}
	}
	return m.word(b.codes + 2*codeEntries)
}

// Run samples the process (memory, CPU, descriptors, goroutines) and the
// watched gauges every second, and the service sockets' accept queues every
// 100ms, until ctx ends.
func (m *Metrics) Run(ctx context.Context) {
	proc, err := procfs.Self()
	if err != nil {
		m.opts.Log.WithError(err).Warn("cannot read /proc/self: process metrics stay 0")
	}
	t := time.NewTicker(queueEvery)
	defer t.Stop()
	for n := 0; ; n++ {
		if n%10 == 0 {
			m.sampleProcess(proc, err == nil)
		}
		m.sampleQueues()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Metrics) sampleProcess(p procfs.Proc, ok bool) {
	if ok {
		if st, err := p.Stat(); err == nil {
			atomic.StoreUint64(m.word(wRSS), uint64(st.ResidentMemory()))
			atomic.StoreUint64(m.word(wCPUNs), uint64(st.CPUTime()*1e9))
		}
		if n, err := p.FileDescriptorsLen(); err == nil {
			atomic.StoreUint64(m.word(wFDs), uint64(n))
		}
	}
	atomic.StoreUint64(m.word(wGoroutines), uint64(runtime.NumGoroutine()))
	atomic.StoreUint64(m.word(wGOMAXPROCS), uint64(runtime.GOMAXPROCS(0)))
	m.sampleWatched()
}

func (m *Metrics) sampleWatched() {
	if f := m.gate.Load(); f != nil {
		v := uint64(1)
		if (*f)() {
			v = 2
		}
		atomic.StoreUint64(m.word(wGate), v)
	}
	if f := m.rateMode.Load(); f != nil {
		mode := (*f)()
		for i, name := range rateTables {
			if name == mode {
				atomic.StoreUint64(m.word(wRateTable), uint64(i+1))
			}
		}
	}
}

// Close gives up the slot (the process exits next; the kernel would drop
// the claim anyway). Nothing may count afterwards.
func (m *Metrics) Close() error { return m.region.Close() }

// Detached says when the pool's metrics table file no longer has its name
// (shm.Region.Detached): scrapes answered by the workers started since no
// longer show this worker, and this worker's scrapes no longer show them.
// "" when this worker's numbers are its own (no shared table).
func (m *Metrics) Detached() (string, error) { return m.region.Detached() }
