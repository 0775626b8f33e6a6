// Package balance spreads connections evenly over workers that share one
// listening socket, without a master process.
//
// Which worker's accept() wins a new connection is up to the kernel, and
// under keep-alive load a connection stays with the worker that won it: the
// split is uneven, often by a wide margin, and a worker may get no connection
// at all (docs/benchmarks.md, "Share, and why balancing matters" in the
// notes). Node's cluster master fixes this with round-robin, at the cost of a
// hop and a single point of failure; per-worker SO_REUSEPORT sockets fix it
// at the cost of black-holing 1/N of new connections while a worker is down.
//
// Here every worker publishes, in a small table shared through /run/clusterapp
// (package shm), how many connections it holds and a heartbeat. Before each
// accept, a worker that holds more connections than the least-loaded live
// worker steps aside for a moment (MaxDefer at most, in short sleeps) so that
// worker's accept takes the connection: least-connections balancing, decided
// by the workers themselves. The socket stays shared, so nothing is ever
// black-holed: a worker that is dead, frozen or draining stops refreshing its
// heartbeat and is ignored after StaleAfter, and a deferral never lasts longer
// than MaxDefer even when the table is wrong.
//
// Deferring has a cost: the deferring worker sleeps, and when the table
// changes under it (short connections come and go faster than it looks),
// both workers can be deferring at once while connections wait in the
// backlog; with a new connection per request, the gate costs a pool a large
// part of its throughput (docs/benchmarks.md, "Faults" in the notes). Such
// connections need no balancing either, since each one is one request and
// the kernel spreads them as they come. So a worker gates its accepts only
// while its clients reuse connections: an average (EWMA) over connection
// events, a connection's second request counting as reuse and a connection
// closed after at most one request counting against, kept above one half. A
// worker starts out assuming reuse, so the opening burst of a keep-alive load
// is balanced.
//
// Connections live long under keep-alive, so the balance made when they are
// accepted would otherwise last forever (for instance after a worker
// restarts, every client stays on the others). The server therefore ends a
// keep-alive connection after a bounded number of requests (nginx's
// keepalive_requests), and clients reconnect to wherever the balance sends
// them.
//
// Workers past one per CPU step back under new-connection load. In a pool
// with more workers than CPUs, most of them are idle at any moment, and a
// new connection wakes one of them (package exclusive): a process woken
// for each request, where a pool of one worker per CPU serves the same load
// with its workers busy, taking connections as they look for work, without
// being woken (docs/benchmarks.md, "Workers past one per CPU step back").
// So a surplus worker (instance number above the pool's CPU count, Primaries)
// takes its wait out of the socket (exclusive.Pause) while every primary
// worker is live, its clients open a connection per request, and none of
// its requests waited PressureWait for an admission slot or was turned away
// within PressureFor. It looks every StepPoll and comes back at once when
// any of that changes, when connections wait in the accept queue while no
// primary accepted one since the last look (a primary frozen, or all of
// them behind), or when the primaries accepted nothing for IdleAfter (the
// load is gone: a worker at rest in its poller costs nothing, a looking one
// does). Keep-alive loads are left alone: there the gate above balances the
// connections over every worker, and a pool of long connections is not
// woken per request.
//
// A worker whose admission slots are all taken stays out of the socket's
// wait while another worker has a slot free. The kernel passes over a
// worker with no thread asleep in its poller, which is what a worker
// computing on all of its Ps looks like; but a worker running the spare P
// (a P more than its slots, package admission's Governor) has one asleep
// while its slots compute, and took connections only to queue them behind
// those while another worker idled: on /fib?n=30 with a connection per
// request, one of two workers took 615 of 896 (TestNewConnectionsGoToAFreeWorker).
// So while this worker runs more Ps than slots, every slot it takes or
// frees, every accept and every beat look at the table: with every slot
// taken, and a live worker that has not stepped back holding fewer
// connections than a worker has slots (the same for every worker of the
// pool: one env file), it holds its listeners out of the wait
// (exclusive.Hold) until either is no longer so. Two workers cannot both
// hold for long: a worker with every slot taken holds at least as many
// connections as slots, so it is not the free one another holds for; and
// while every worker is busy none holds, so a connection is still accepted
// at once, to be queued or turned away by admission as before. Like a
// deferral, a hold trusts the table for MaxDefer at most: when the other
// workers accepted nothing in that time while connections wait in the
// accept queue (the free one is frozen, its heartbeat not yet stale), the
// worker lets its listeners back, and holds again only once the others
// accept.
//
// A keep-alive connection stays with the worker that accepted it, so the
// gate's balance is the one the opening burst made. A burst finds workers
// busy computing, whose accepts wait for a P, and the gate defers to them
// only for MaxDefer: on /fib?n=30, 64 connections opened at once over 4
// workers on 2 CPUs left 48-59 on one worker in 3 runs of 4, and each
// worker's admission queue is its own: the crowded worker's requests
// waited past the admission wait and were answered 503 (9-28% of all
// responses) while one process, one queue, answered none. The keep-alive
// bounds mend that only after KeepAliveRequests or KeepAliveTime (30 s).
// So while a worker's requests are turned away or wait for admission slots
// close to being turned away (MoveWait), and a live worker that has not
// stepped back holds at least two connections fewer, the worker ends the
// connection it answers (Crowded; Connection: close): its client
// reconnects, and the gate hands the new connection to the less-loaded
// worker. Each move narrows the gap
// by two, so the counts settle within one of each other and stay there;
// while no request comes near a 503 nothing moves: an uneven split that
// only queues requests for a few milliseconds costs less than the
// reconnections (with PressureWait's 10 ms instead, a pool of 4 on 2 CPUs
// moved 30 to 90 connections a second under /fib?n=25, where no request
// was turned away).
//
// Balancing is an optimisation: when the table cannot be opened (the runtime
// directory missing, read-only or full), Open fails and the worker accepts
// as the kernel decides, which costs evenness, never a connection.
package balance

import (
	"context"
	"fmt"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/exclusive"
	"github.com/clusterapp/clusterapp/service/worker/internal/shm"
	"github.com/sirupsen/logrus"
)

// layoutVersion is the meaning of the words (version 1 was version 2's
// words under version 1's header, in balance.table; version 2 had the
// heartbeat and the connections only; version 3 had no CPU mask).
const layoutVersion = 4

// Slots is the largest number of workers (1..Slots) balanced: config.MaxWorkers.
const Slots = config.MaxWorkers

// The words of a slot: heartbeat (ns on CLOCK_MONOTONIC, see shm.Clock; 0 =
// not serving), open connections, connections accepted, flags (flagNew,
// flagBack), when a request last waited for an admission slot or was
// turned away (ns on the heartbeat's clock; 0 = never), and the CPUs the
// worker may run on (Options.CPUs).
const (
	wordBeat = iota
	wordConns
	wordAccepted
	wordFlags
	wordPressure
	wordCPUs
	wordsPerSlot
)

const (
	// flagNew: the worker's clients open a connection per request (its
	// gate is off).
	flagNew = 1 << iota
	// flagBack: the worker has stepped back and accepts nothing.
	flagBack
)

// Options configure a Balancer.
type Options struct {
	// Self is this worker's slot, its instance number minus one.
	Self int
	// MaxDefer bounds how long one accept is put off. Default 20ms.
	MaxDefer time.Duration
	// Poll is the pause between looks at the table while deferring. Default 200µs.
	Poll time.Duration
	// Heartbeat is how often this worker says it is alive. Default 100ms.
	Heartbeat time.Duration
	// StaleAfter ignores a worker whose heartbeat is older. Default 500ms.
	StaleAfter time.Duration
	// Primaries is how many workers (slots 0..Primaries-1) keep taking new
	// connections under new-connection load; the others step back while
	// those keep up. The worker sets it to its CPU count; 0 (or Slots):
	// no worker steps back. While every live worker publishes its CPUs,
	// the primaries are as many as the CPUs of all of them together: the
	// pool's CPUs, not this worker's, which differ when an operator pins
	// workers one by one (each then counts one CPU, and worker 1 alone
	// would take every one-request connection).
	Primaries int
	// CPUs is the set of CPUs this worker may run on, bit i for CPU i, 0
	// when unknown (a CPU past 63): a worker that publishes none keeps
	// every worker at Primaries.
	CPUs uint64
	// StepPoll is the pause between looks while stepped back. Default 10ms.
	StepPoll time.Duration
	// PressureWait is the wait for an admission slot that counts as
	// pressure. Shorter waits come with any busy worker on shared CPUs: a
	// request queued on the P behind others, and the kernel switching the
	// worker out for its ticks of a few ms, meets the slot held. With 1 ms,
	// 8 workers on 2 CPUs under new connections to `/` found a primary
	// under pressure at almost every look, and the surplus ones kept taking
	// connections; with 10 ms, at none (docs/benchmarks.md). Default 10ms.
	PressureWait time.Duration
	// PressureFor is how long a request that waited PressureWait for a
	// slot, or was turned away, on a primary keeps the others from
	// stepping back. Default 1s.
	PressureFor time.Duration
	// MoveWait is the wait for an admission slot past which this worker
	// moves connections to a less-loaded one (Crowded), as a request
	// turned away does: near the admission wait, where requests begin to
	// be answered 503. The worker sets half its admission wait; 0: only
	// requests turned away count.
	MoveWait time.Duration
	// IdleAfter ends a step back when the primaries accepted nothing for
	// this long. Default 50ms.
	IdleAfter time.Duration
	// Clock stamps heartbeats; default shm.MonotonicClock, on which a
	// wall-clock step can neither revive a dead worker nor bury a live one.
	// It is not Now: heartbeats are compared with other processes' clocks.
	Clock shm.Clock
	// Now is the clock a deferred accept is timed on (MaxDefer, and what the
	// Observer is told); default time.Now.
	Now func() time.Time
}

// Balancer is one worker's view of the shared table.
type Balancer struct {
	opts   Options
	region *shm.Region
	words  []uint64
	// reuse is the EWMA of connection reuse, in 1/reuseOne; the gate is on
	// at or above reuseOne/2.
	reuse atomic.Int64
	// primaries is Options.Primaries, or the pool's CPU count (Options.CPUs),
	// counted again at every beat.
	primaries atomic.Int64
	// beatAt is the clock at the last Beat: Crowded, asked at every
	// response, reads it instead of the clock.
	beatAt atomic.Int64
	// strained is the clock when a request here was last turned away or
	// waited MoveWait for a slot (0: never); only this worker reads it.
	strained atomic.Int64
	// poolWorkers and poolCPUs are the live workers and the CPUs of their
	// union (0: a worker's are unknown), counted with the primaries (Pool).
	poolWorkers, poolCPUs atomic.Int64
	// The hold while every admission slot is taken (package comment).
	spare atomic.Bool // more Ps than slots: the kernel cannot tell this worker is busy
	hold  struct {
		sync.Mutex
		slots     int        // admission slots, of this worker and (the same env file) the others
		inFlight  func() int // admitted requests running; nil: no hold
		held      bool
		listeners []net.Listener
		check     *time.Timer // MaxDefer into a hold: are the others accepting?
		accepts   uint64      // the others' accepted connections at the last check
		stuck     bool        // the others accepted none in a hold: no hold until they do
	}
}

const (
	reuseOne    = 1 << 10
	reuseWeight = 16 // each event moves the average 1/16 of the way
)

// Layout is the shared table's layout; its FileName is balance.v4.1024.table.
var Layout = shm.Layout{Kind: "balance", Version: layoutVersion, Size: Slots, Words: Slots * wordsPerSlot}

// Open maps the shared table in dir (the workers' common runtime directory),
// building it when absent or unusable. (nil, nil, err) when dir cannot be
// used: balancing is an optimisation, and the caller serves without it.
func Open(dir string, opts Options, log *logrus.Entry) (*Balancer, *shm.Region, error) {
	r, err := shm.Open(dir, Layout, log)
	if err != nil {
		return nil, nil, fmt.Errorf("balance table: %w", err)
	}
	return New(r, opts), r, nil
}

// Detached says when the table's file name no longer names the file this
// balancer maps (shm.Region.Detached): the workers started since balance
// among themselves, apart from this one.
func (b *Balancer) Detached() (string, error) { return b.region.Detached() }

// New returns a balancer over region (Slots*2 words).
func New(r *shm.Region, opts Options) *Balancer {
	if opts.MaxDefer == 0 {
		opts.MaxDefer = 20 * time.Millisecond
	}
	if opts.Poll == 0 {
		opts.Poll = 200 * time.Microsecond
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 100 * time.Millisecond
	}
	if opts.StaleAfter == 0 {
		opts.StaleAfter = 500 * time.Millisecond
	}
	if opts.StepPoll == 0 {
		opts.StepPoll = 10 * time.Millisecond
	}
	if opts.PressureWait == 0 {
		opts.PressureWait = 10 * time.Millisecond
	}
	if opts.PressureFor == 0 {
		opts.PressureFor = time.Second
	}
	if opts.IdleAfter == 0 {
		opts.IdleAfter = 50 * time.Millisecond
	}
	if opts.Clock == nil {
		opts.Clock, _ = shm.MonotonicClock() // on error it counts from now: heartbeats then go stale on others, never fresh
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	b := &Balancer{opts: opts, region: r, words: r.Words()}
	b.reuse.Store(reuseOne)
	for w := wordConns; w < wordsPerSlot; w++ { // a previous process's
		atomic.StoreUint64(b.slot(opts.Self, w), 0)
	}
	atomic.StoreUint64(b.slot(opts.Self, wordCPUs), opts.CPUs)
	b.countPrimaries()
	return b
}

// countPrimaries counts the live workers (this one counted even before its
// first beat) and, while every one of them publishes its CPUs, the CPUs of
// their union; and sets the primaries: that many, or Options.Primaries
// when a worker's CPUs are unknown.
func (b *Balancer) countPrimaries() {
	now := int64(b.opts.Clock())
	var union uint64
	workers, known := int64(0), true
	for i := range Slots {
		if i != b.opts.Self && !b.live(i, now) {
			continue
		}
		workers++
		m := atomic.LoadUint64(b.slot(i, wordCPUs))
		known = known && m != 0
		union |= m
	}
	cpus := int64(bits.OnesCount64(union))
	if !known {
		cpus = 0
	}
	b.poolWorkers.Store(workers)
	b.poolCPUs.Store(cpus)
	n := int64(b.opts.Primaries)
	if n > 0 && n < Slots && cpus > 0 {
		n = cpus
	}
	b.primaries.Store(n)
}

// Pool reports the pool as the last beat counted it: the live workers,
// this one included, and how many CPUs they may run on together, 0 when a
// worker's CPUs are unknown (a CPU past 63). Workers pinned one per CPU
// (CPUAffinity= per instance) are N workers on N CPUs, though each runs on
// one; N workers confined to the same CPUs share them.
func (b *Balancer) Pool() (workers, cpus int) {
	return int(b.poolWorkers.Load()), int(b.poolCPUs.Load())
}

func (b *Balancer) slot(i, word int) *uint64 { return &b.words[i*wordsPerSlot+word] }

// ConnOpened and ConnClosed keep this worker's published connection count,
// in the shared word itself: a private count stored after each change could
// publish a stale value when two connections changed at once (the later
// store carrying the earlier count) until the next change.
func (b *Balancer) ConnOpened() { atomic.AddUint64(b.slot(b.opts.Self, wordConns), 1) }

// ConnClosed counts a closed connection.
func (b *Balancer) ConnClosed() { atomic.AddUint64(b.slot(b.opts.Self, wordConns), ^uint64(0)) }

// Beat marks this worker alive now.
func (b *Balancer) Beat() {
	now := b.opts.Clock()
	b.beatAt.Store(int64(now))
	atomic.StoreUint64(b.slot(b.opts.Self, wordBeat), uint64(now))
}

// Leave marks this worker as not accepting (draining or exiting), so the
// others stop deferring to it at once.
func (b *Balancer) Leave() { atomic.StoreUint64(b.slot(b.opts.Self, wordBeat), 0) }

// Admitted and Shed tell the other workers that this one's requests wait
// for admission slots (PressureWait or longer) or are turned away
// (admission.Observer, through the worker): surplus workers do not step
// back while a primary is short of slots, even when its CPU is not
// (requests waiting on I/O).
func (b *Balancer) Admitted(waited time.Duration) {
	if waited >= b.opts.PressureWait {
		b.pressed()
	}
	if b.opts.MoveWait > 0 && waited >= b.opts.MoveWait {
		b.strained.Store(int64(b.opts.Clock()))
	}
}

// Shed is Admitted's counterpart for a request turned away.
func (b *Balancer) Shed() {
	b.pressed()
	b.strained.Store(int64(b.opts.Clock()))
}

func (b *Balancer) pressed() {
	atomic.StoreUint64(b.slot(b.opts.Self, wordPressure), uint64(b.opts.Clock()))
}

// setFlag sets or clears f in this worker's flags; only this worker writes
// them, so a load and a store suffice.
func (b *Balancer) setFlag(f uint64, on bool) {
	p := b.slot(b.opts.Self, wordFlags)
	old := atomic.LoadUint64(p)
	v := old &^ f
	if on {
		v |= f
	}
	if v != old {
		atomic.StoreUint64(p, v)
	}
}

// Run beats until ctx ends, then leaves.
func (b *Balancer) Run(ctx context.Context) {
	t := time.NewTicker(b.opts.Heartbeat)
	defer t.Stop()
	defer b.Leave()
	for {
		b.Beat()
		b.countPrimaries()
		b.SlotsChanged() // the others' connections change without telling
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ConnReused feeds the reuse average (server.ReuseObserver); the server
// serialises the calls.
func (b *Balancer) ConnReused(reused bool) {
	x := int64(0)
	if reused {
		x = reuseOne
	}
	e := b.reuse.Load()
	b.reuse.Store(e + (x-e)/reuseWeight)
	b.setFlag(flagNew, !b.Gating())
}

// Gating reports whether clients reuse connections enough for the accept
// gate to be on.
func (b *Balancer) Gating() bool { return b.reuse.Load() >= reuseOne/2 }

// ShouldDefer reports whether clients reuse connections and a live worker
// holds fewer connections than this one.
func (b *Balancer) ShouldDefer() bool {
	if !b.Gating() {
		return false
	}
	return b.peerBelow(atomic.LoadUint64(b.slot(b.opts.Self, wordConns)))
}

// peerBelow reports whether a live worker other than this one, and not
// stepped back, holds fewer than limit connections.
func (b *Balancer) peerBelow(limit uint64) bool {
	now := int64(b.opts.Clock())
	for i := range Slots {
		if i == b.opts.Self || !b.live(i, now) || atomic.LoadUint64(b.slot(i, wordFlags))&flagBack != 0 {
			continue
		}
		if atomic.LoadUint64(b.slot(i, wordConns)) < limit {
			return true
		}
	}
	return false
}

// Crowded reports whether this worker should end the connection it is
// answering so that its client reconnects to a less-loaded worker (package
// comment): clients reuse connections (the gate is on), a request here
// was turned away or waited MoveWait for an admission slot at most a
// Heartbeat before the last beat, and a live worker that has not stepped
// back holds at least two connections fewer than this one. Until then it
// costs one or two loads: it is asked at every response.
func (b *Balancer) Crowded() bool {
	p := b.strained.Load()
	if p == 0 || p < b.beatAt.Load()-b.opts.Heartbeat.Nanoseconds() || !b.Gating() {
		return false
	}
	mine := atomic.LoadUint64(b.slot(b.opts.Self, wordConns))
	return mine >= 2 && b.peerBelow(mine-1) // at most mine-2
}

// live reports whether worker i's heartbeat is fresh at now.
func (b *Balancer) live(i int, now int64) bool {
	beat := int64(atomic.LoadUint64(b.slot(i, wordBeat)))
	return beat != 0 && now-beat <= b.opts.StaleAfter.Nanoseconds()
}

// Surplus reports whether this worker is past the primaries: one that steps
// back under new-connection load while they keep up.
func (b *Balancer) Surplus() bool {
	p := int(b.primaries.Load())
	return p > 0 && p < Slots && b.opts.Self >= p
}

// PrimariesCalm reports whether every primary worker is live, serves
// clients that open a connection per request, and had no request wait for
// an admission slot or turned away within PressureFor.
func (b *Balancer) PrimariesCalm() bool {
	now := int64(b.opts.Clock())
	for i := range int(b.primaries.Load()) {
		if !b.live(i, now) || atomic.LoadUint64(b.slot(i, wordFlags))&flagNew == 0 {
			return false
		}
		if p := int64(atomic.LoadUint64(b.slot(i, wordPressure))); p != 0 && now-p < b.opts.PressureFor.Nanoseconds() {
			return false
		}
	}
	return true
}

// primaryAccepts is the connections the primaries accepted so far.
func (b *Balancer) primaryAccepts() uint64 {
	var n uint64
	for i := range int(b.primaries.Load()) {
		n += atomic.LoadUint64(b.slot(i, wordAccepted))
	}
	return n
}

// Observer learns how long accepts were put off (the metrics package
// implements it).
type Observer interface {
	AcceptDeferred(d time.Duration)
}

// Listener wraps l so each Accept first yields to less-loaded workers, for
// at most MaxDefer; obs, if not nil, is told of every deferred accept.
func (b *Balancer) Listener(l net.Listener, obs Observer) net.Listener {
	b.hold.Lock()
	b.hold.listeners = append(b.hold.listeners, l)
	if b.hold.held {
		_ = exclusive.Hold(l, true)
	}
	b.hold.Unlock()
	return &listener{Listener: l, b: b, obs: obs}
}

// WatchSlots starts the hold while every admission slot is taken: slots
// is a worker's admission slots, inFlight how many of this worker's are
// taken now, and spare whether it runs more Ps than slots (SetSpare
// follows later changes). Call it before serving; SlotsChanged must then
// be called after every slot taken or freed (admission.Options).
func (b *Balancer) WatchSlots(slots int, inFlight func() int, spare bool) {
	b.hold.Lock()
	b.hold.slots, b.hold.inFlight = slots, inFlight
	b.hold.Unlock()
	b.SetSpare(spare)
}

// SetSpare says whether this worker now runs more Ps than admission slots
// (the Governor moved GOMAXPROCS): only then can the kernel not tell that
// it is busy.
func (b *Balancer) SetSpare(on bool) {
	b.hold.Lock()
	defer b.hold.Unlock()
	b.spare.Store(on)
	b.syncHold()
}

// SlotsChanged looks again whether this worker should hold its listeners
// out of the socket's wait. It costs a load while the worker runs no more
// Ps than slots; otherwise requests are long (the Governor added the
// spare P for them) and a lock and a look at the table are not.
func (b *Balancer) SlotsChanged() {
	if !b.spare.Load() {
		return // and SetSpare(false) let the listeners back
	}
	b.hold.Lock()
	defer b.hold.Unlock()
	b.syncHold()
}

// syncHold holds the listeners out or lets them back, as the table and the
// slots say now; b.hold is locked. A failure leaves the state to try again
// at the next look (a beat at the latest): the kernel took the entry a
// moment ago, and refusing it back would mean it is out of memory.
func (b *Balancer) syncHold() {
	h := &b.hold
	want := b.spare.Load() && h.inFlight != nil && h.inFlight() >= h.slots && b.peerFree()
	if want && h.stuck {
		if b.othersAccepted() == h.accepts {
			want = false
		} else {
			h.stuck = false
		}
	}
	if want == h.held {
		return
	}
	if !b.setHold(want) {
		return
	}
	if want {
		h.accepts = b.othersAccepted()
		if h.check == nil {
			h.check = time.AfterFunc(b.opts.MaxDefer, b.checkHold)
		} else {
			h.check.Reset(b.opts.MaxDefer)
		}
	}
}

// setHold holds every listener out or lets them back; b.hold is locked.
func (b *Balancer) setHold(out bool) bool {
	for _, l := range b.hold.listeners {
		if err := exclusive.Hold(l, out); err != nil && !out {
			return false
		}
	}
	b.hold.held = out
	return true
}

// checkHold runs MaxDefer into a hold, and every MaxDefer while it lasts:
// when the others accepted nothing since the last look and connections
// wait in the accept queue (or the queue cannot be read), the table is
// wrong about the free worker, and this worker lets its listeners back.
func (b *Balancer) checkHold() {
	h := &b.hold
	h.Lock()
	defer h.Unlock()
	if !h.held {
		return
	}
	if acc := b.othersAccepted(); acc != h.accepts {
		h.accepts = acc
		h.check.Reset(b.opts.MaxDefer)
		return
	}
	waiting := false
	for _, l := range h.listeners {
		if n, ok := exclusive.Queued(l); !ok || n > 0 {
			waiting = true
		}
	}
	if !waiting {
		h.check.Reset(b.opts.MaxDefer)
		return
	}
	if b.setHold(false) {
		h.stuck = true
	} else {
		h.check.Reset(b.opts.MaxDefer) // try again; refused means out of memory
	}
}

// othersAccepted is the connections the other workers accepted so far.
func (b *Balancer) othersAccepted() uint64 {
	var n uint64
	for i := range Slots {
		if i != b.opts.Self {
			n += atomic.LoadUint64(b.slot(i, wordAccepted))
		}
	}
	return n
}

// Held reports whether this worker holds its listeners out of the socket's
// wait because its slots are all taken while another's are not.
func (b *Balancer) Held() bool {
	b.hold.Lock()
	defer b.hold.Unlock()
	return b.hold.held
}

// peerFree reports whether a live worker that has not stepped back holds
// fewer connections than a worker has admission slots: it has one free.
func (b *Balancer) peerFree() bool { return b.peerBelow(uint64(b.hold.slots)) }

type listener struct {
	net.Listener
	b   *Balancer
	obs Observer
}

func (l *listener) Accept() (net.Conn, error) {
	l.b.SlotsChanged() // a look between slot changes: another worker may have freed one since
	if stepped := l.b.Surplus() && l.stepBack(); !stepped && l.b.ShouldDefer() {
		_ = exclusive.Pause(l.Listener) // leave the wait to the worker deferred to; a failure costs a wake-up
		now := l.b.opts.Now
		start := now()
		deadline := start.Add(l.b.opts.MaxDefer)
		for now().Before(deadline) {
			time.Sleep(l.b.opts.Poll)
			if !l.b.ShouldDefer() {
				break
			}
		}
		_ = exclusive.Resume(l.Listener) // or Accept fails, if it cannot
		if l.obs != nil {
			l.obs.AcceptDeferred(now().Sub(start))
		}
	}
	c, err := l.Listener.Accept()
	if err == nil {
		atomic.AddUint64(l.b.slot(l.b.opts.Self, wordAccepted), 1)
	}
	return c, err
}

// stepBack keeps this surplus worker out of the socket's wait while the
// primaries keep up with a new-connection load (the package comment says
// when), and reports whether it stepped back at all. The Observer is not
// told: its histogram times the gate's deferrals, of milliseconds, and a
// step back lasts as long as the load. A surplus worker's accepted
// connections (clusterapp_http_connections_accepted_total) stay flat
// instead.
func (l *listener) stepBack() bool {
	b := l.b
	if !b.PrimariesCalm() {
		return false
	}
	if _, ok := exclusive.Queued(l.Listener); !ok {
		return false // nothing would tell this worker that connections wait
	}
	if exclusive.Pause(l.Listener) != nil {
		return false
	}
	b.setFlag(flagBack, true)
	now := b.opts.Now
	last, progressed := b.primaryAccepts(), now()
	for {
		time.Sleep(b.opts.StepPoll)
		at := now()
		acc := b.primaryAccepts()
		moved := acc != last
		if moved {
			last, progressed = acc, at
		}
		// A closed listener (the worker drains) has no queue to read: the
		// step back ends at the next look.
		n, ok := exclusive.Queued(l.Listener)
		if !ok || !b.PrimariesCalm() || at.Sub(progressed) >= b.opts.IdleAfter || (n > 0 && !moved) {
			break
		}
	}
	b.setFlag(flagBack, false)
	_ = exclusive.Resume(l.Listener) // or Accept fails, if it cannot
	return true
}
