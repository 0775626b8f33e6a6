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
// Balancing is an optimisation: when the table cannot be opened (the runtime
// directory missing, read-only or full), Open fails and the worker accepts
// as the kernel decides, which costs evenness, never a connection.
package balance

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/exclusive"
	"github.com/clusterapp/clusterapp/service/worker/internal/shm"
	"github.com/sirupsen/logrus"
)

// layoutVersion is the meaning of the words (version 1 was the same words
// under version 1's header, in balance.table).
const layoutVersion = 2

// Slots is the largest number of workers (1..Slots) balanced: config.MaxWorkers.
const Slots = config.MaxWorkers

// wordsPerSlot: heartbeat (ns on CLOCK_MONOTONIC, see shm.Clock; 0 = not
// serving), open connections.
const wordsPerSlot = 2

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
}

const (
	reuseOne    = 1 << 10
	reuseWeight = 16 // each event moves the average 1/16 of the way
)

// Layout is the shared table's layout; its FileName is balance.v2.1024.table.
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
	if opts.Clock == nil {
		opts.Clock, _ = shm.MonotonicClock() // on error it counts from now: heartbeats then go stale on others, never fresh
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	b := &Balancer{opts: opts, region: r, words: r.Words()}
	b.reuse.Store(reuseOne)
	atomic.StoreUint64(b.slot(opts.Self, 1), 0)
	return b
}

func (b *Balancer) slot(i, word int) *uint64 { return &b.words[i*wordsPerSlot+word] }

// ConnOpened and ConnClosed keep this worker's published connection count,
// in the shared word itself: a private count stored after each change could
// publish a stale value when two connections changed at once (the later
// store carrying the earlier count) until the next change.
func (b *Balancer) ConnOpened() { atomic.AddUint64(b.slot(b.opts.Self, 1), 1) }

// ConnClosed counts a closed connection.
func (b *Balancer) ConnClosed() { atomic.AddUint64(b.slot(b.opts.Self, 1), ^uint64(0)) }

// Beat marks this worker alive now.
func (b *Balancer) Beat() {
	atomic.StoreUint64(b.slot(b.opts.Self, 0), uint64(b.opts.Clock()))
}

// Leave marks this worker as not accepting (draining or exiting), so the
// others stop deferring to it at once.
func (b *Balancer) Leave() { atomic.StoreUint64(b.slot(b.opts.Self, 0), 0) }

// Run beats until ctx ends, then leaves.
func (b *Balancer) Run(ctx context.Context) {
	t := time.NewTicker(b.opts.Heartbeat)
	defer t.Stop()
	defer b.Leave()
	for {
		b.Beat()
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
	mine := int64(atomic.LoadUint64(b.slot(b.opts.Self, 1)))
	now := int64(b.opts.Clock())
	stale := b.opts.StaleAfter.Nanoseconds()
	for i := range Slots {
		if i == b.opts.Self {
			continue
		}
		beat := int64(atomic.LoadUint64(b.slot(i, 0)))
		if beat == 0 || now-beat > stale {
			continue
		}
		if int64(atomic.LoadUint64(b.slot(i, 1))) < mine {
			return true
		}
	}
	return false
}

// Observer learns how long accepts were put off (the metrics package
// implements it).
type Observer interface {
	AcceptDeferred(d time.Duration)
}

// Listener wraps l so each Accept first yields to less-loaded workers, for
// at most MaxDefer; obs, if not nil, is told of every deferred accept.
func (b *Balancer) Listener(l net.Listener, obs Observer) net.Listener {
	return &listener{Listener: l, b: b, obs: obs}
}

type listener struct {
	net.Listener
	b   *Balancer
	obs Observer
}

func (l *listener) Accept() (net.Conn, error) {
	if l.b.ShouldDefer() {
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
	return l.Listener.Accept()
}
