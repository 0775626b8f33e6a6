package balance

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/clusterapp/clusterapp/service/worker/exclusive"
	"github.com/clusterapp/clusterapp/service/worker/internal/shm"
)

type clock struct{ t time.Duration }

func (c *clock) now() time.Duration { return c.t }

// pool returns n balancers over one region, as n workers would see it.
func pool(n int, c *clock) []*Balancer {
	r := shm.Local(Slots * wordsPerSlot)
	bs := make([]*Balancer, n)
	for i := range bs {
		bs[i] = New(r, Options{Self: i, Clock: c.now, MaxDefer: 50 * time.Millisecond})
		bs[i].Beat()
	}
	return bs
}

func TestDefersToALessLoadedLiveWorker(t *testing.T) {
	c := &clock{1000 * time.Second}
	w := pool(3, c)
	if w[0].ShouldDefer() {
		t.Fatal("deferring with equal loads")
	}
	w[0].ConnOpened()
	if !w[0].ShouldDefer() {
		t.Fatal("worker 0 holds 1 connection, the others 0: it must defer")
	}
	w[1].ConnOpened()
	w[2].ConnOpened()
	if w[0].ShouldDefer() {
		t.Fatal("deferring with equal loads again")
	}
	w[0].ConnOpened()
	w[1].ConnClosed()
	if !w[0].ShouldDefer() || w[1].ShouldDefer() {
		t.Fatal("only the most loaded worker defers")
	}
}

// A worker whose requests are turned away, or wait MoveWait for a slot,
// and that holds two connections more than another ends connections
// (Crowded) until the counts are within one; not for shorter waits, not for pressure a heartbeat older than the last beat,
// not while clients open a connection per request, and not towards a
// worker that is stale, draining or stepped back.
func TestCrowdedWorkerMovesConnectionsUntilEven(t *testing.T) {
	c := &clock{1000 * time.Second}
	w := pool(3, c)
	for _, b := range w {
		b.opts.MoveWait = 100 * time.Millisecond
	}
	open := func(b *Balancer, n int) {
		for range n {
			b.ConnOpened()
		}
	}
	open(w[0], 6)
	open(w[1], 2)
	open(w[2], 4)
	if w[0].Crowded() {
		t.Fatal("moved a connection while no request waited")
	}
	w[0].Admitted(99 * time.Millisecond)
	if w[0].Crowded() {
		t.Fatal("a wait under MoveWait moved a connection: an uneven split that queues requests briefly costs less than reconnections")
	}
	w[0].Admitted(100 * time.Millisecond)
	w[1].Shed()
	if w[1].Crowded() || w[2].Crowded() {
		t.Fatal("the least-loaded worker, or one without pressure, moved a connection")
	}
	moves := 0
	for w[0].Crowded() {
		if moves++; moves > 10 {
			t.Fatal("never settles")
		}
		w[0].ConnClosed() // the client reconnects; the gate sends it to the least-loaded
		least := w[1]
		if atomic.LoadUint64(w[2].slot(2, wordConns)) < atomic.LoadUint64(w[1].slot(1, wordConns)) {
			least = w[2]
		}
		least.ConnOpened()
	}
	got := []uint64{atomic.LoadUint64(w[0].slot(0, wordConns)), atomic.LoadUint64(w[0].slot(1, wordConns)), atomic.LoadUint64(w[0].slot(2, wordConns))}
	if moves != 2 || got[0] != 4 || got[1] != 4 || got[2] != 4 {
		t.Fatalf("after %d moves the counts are %v, want 2 moves to 4 4 4", moves, got)
	}
	w[0].ConnOpened()
	if w[0].Crowded() {
		t.Fatal("5 against 4 moved a connection: the move would only swap which worker holds one more")
	}
	w[0].ConnOpened()
	if !w[0].Crowded() {
		t.Fatal("6 against 4 after a long wait: must move")
	}
	w[0].opts.MoveWait = 0
	c.t += 200 * time.Millisecond
	w[0].Beat()
	w[1].Beat()
	w[2].Beat()
	w[0].Admitted(time.Second)
	if w[0].Crowded() {
		t.Fatal("with MoveWait 0 a wait moved a connection: only requests turned away may")
	}
	w[0].Shed()
	if !w[0].Crowded() {
		t.Fatal("a request turned away: must move")
	}
	c.t += 100 * time.Millisecond // a heartbeat
	w[0].Beat()
	w[1].Beat()
	w[2].Beat()
	if !w[0].Crowded() {
		t.Fatal("pressure a heartbeat before the last beat counts")
	}
	c.t += 100 * time.Millisecond
	w[0].Beat()
	w[1].Beat()
	w[2].Beat()
	if w[0].Crowded() {
		t.Fatal("pressure older than a heartbeat before the last beat still moves connections")
	}
	w[0].Shed()
	for range 64 {
		w[0].ConnReused(false)
	}
	if w[0].Crowded() {
		t.Fatal("moved a connection of clients that open one per request: the gate would not balance it")
	}
	for range 64 {
		w[0].ConnReused(true)
	}
	if !w[0].Crowded() {
		t.Fatal("keep-alive clients again: must move")
	}
	w[1].Leave()
	w[2].setFlag(flagBack, true)
	if w[0].Crowded() {
		t.Fatal("moved connections towards a draining worker and a stepped-back one")
	}
	w[1].Beat()
	c.t += time.Second
	w[0].Beat()
	w[0].Shed()
	if w[0].Crowded() {
		t.Fatal("moved connections towards a worker whose heartbeat is stale")
	}
}

func TestIgnoresDeadAndDrainingWorkers(t *testing.T) {
	c := &clock{1000 * time.Second}
	w := pool(3, c)
	w[0].ConnOpened()
	w[1].Leave() // draining
	c.t += time.Second
	w[0].Beat() // worker 2 stopped beating a second ago: frozen or dead
	if w[0].ShouldDefer() {
		t.Fatal("deferring to a draining and a stale worker would black-hole connections")
	}
}

func TestAcceptIsDeferredAtMostMaxDefer(t *testing.T) {
	c := &clock{1000 * time.Second}
	w := pool(2, c)
	for range 5 {
		w[0].ConnOpened()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	deferred := &deferrals{}
	gated := w[0].Listener(l, deferred)
	go dialAndHold(l)
	conn, err := gated.Accept() // the table says defer forever; MaxDefer says no
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if deferred.n != 1 {
		t.Fatalf("%d deferred accepts reported, want 1", deferred.n)
	}
	// The least-loaded worker accepts at once, and reports nothing.
	other := w[1].Listener(l, deferred)
	go dialAndHold(l)
	if conn, err = other.Accept(); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if deferred.n != 1 {
		t.Fatalf("the least-loaded worker reported a deferral: %d", deferred.n)
	}
}

// pausing records Pause, Resume and Accept in order (package exclusive's
// listener).
type pausing struct {
	net.Listener
	mu  sync.Mutex
	log []string
}

func (p *pausing) add(s string)  { p.mu.Lock(); p.log = append(p.log, s); p.mu.Unlock() }
func (p *pausing) Pause() error  { p.add("pause"); return nil }
func (p *pausing) Resume() error { p.add("resume"); return nil }

func (p *pausing) Accept() (net.Conn, error) {
	p.add("accept")
	return p.Listener.Accept()
}

// A deferring worker leaves the socket's exclusive wait while it defers, so
// that the connection wakes the worker it defers to; the least-loaded
// worker does not touch it.
func TestDeferringLeavesTheSocketsWait(t *testing.T) {
	w := pool(2, &clock{1000 * time.Second})
	for range 5 {
		w[0].ConnOpened()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, want := range []string{"pause resume accept", "accept"} {
		rec := &pausing{Listener: l}
		go dialAndHold(l)
		conn, err := w[i].Listener(rec, nil).Accept()
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
		if got := strings.Join(rec.log, " "); got != want {
			t.Errorf("worker %d: %q, want %q", i+1, got, want)
		}
	}
}

// dialAndHold connects to l and keeps the connection open for 5 s, so an
// Accept has one to take.
func dialAndHold(l net.Listener) {
	if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
		defer c.Close()
		time.Sleep(5 * time.Second)
	}
}

type deferrals struct {
	n    int
	last time.Duration
}

func (d *deferrals) AcceptDeferred(took time.Duration) { d.n++; d.last = took }

// A deferral is timed on Options.Now, for MaxDefer and for the Observer: with
// MaxDefer an hour and a clock that moves 20 minutes a reading (start at 20,
// the deadline at 80, two sleeps, the report at 100), the accept goes ahead
// within milliseconds and reports 80 minutes.
func TestDeferralIsTimedOnTheInjectedClock(t *testing.T) {
	c := &clock{1000 * time.Second}
	r := shm.Local(Slots * wordsPerSlot)
	var reads time.Duration
	now := func() time.Time { reads += 20 * time.Minute; return time.Unix(0, 0).Add(reads) }
	busy := New(r, Options{Self: 0, Clock: c.now, Now: now, MaxDefer: time.Hour})
	idle := New(r, Options{Self: 1, Clock: c.now})
	busy.Beat()
	idle.Beat()
	busy.ConnOpened()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go dialAndHold(l)
	deferred := &deferrals{}
	accepted := make(chan error, 1)
	go func() {
		conn, err := busy.Listener(l, deferred).Accept()
		if err == nil {
			conn.Close()
		}
		accepted <- err
	}()
	select {
	case err := <-accepted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still deferring: MaxDefer is not read on Options.Now") // on the real clock it would wait an hour
	}
	if deferred.n != 1 || deferred.last != 80*time.Minute {
		t.Fatalf("%d deferrals reported, the last %v; want 1 of 80m", deferred.n, deferred.last)
	}
}

// Clients opening a connection per request turn the gate off (deferring
// would only cost: the kernel spreads such connections as they come); the
// gate comes back as soon as connections are reused again.
func TestGateFollowsConnectionReuse(t *testing.T) {
	c := &clock{1000 * time.Second}
	w := pool(2, c)
	w[0].ConnOpened()
	if !w[0].Gating() || !w[0].ShouldDefer() {
		t.Fatal("a fresh worker must gate: the opening burst of a keep-alive load needs balancing")
	}
	for range 64 {
		w[0].ConnReused(false)
	}
	if w[0].Gating() || w[0].ShouldDefer() {
		t.Fatal("still deferring after 64 connections that carried one request each")
	}
	for range 16 {
		w[0].ConnReused(true)
	}
	if !w[0].Gating() || !w[0].ShouldDefer() {
		t.Fatal("not deferring after 16 reused connections")
	}
}

// Workers opening the table in one directory share it; a directory that
// cannot be used is an error for the caller to serve without balancing.
func TestOpenSharesTheTable(t *testing.T) {
	dir := t.TempDir()
	c := &clock{1000 * time.Second}
	a, ra, err := Open(dir, Options{Self: 0, Clock: c.now}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	b, rb, err := Open(dir, Options{Self: 1, Clock: c.now}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	a.Beat()
	b.Beat()
	a.ConnOpened()
	if !a.ShouldDefer() || b.ShouldDefer() {
		t.Fatal("two workers opening the table in one directory do not see each other")
	}
	if _, _, err := Open(filepath.Join(dir, "gone"), Options{}, quietLog()); err == nil {
		t.Fatal("a missing directory opened")
	}
}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

// Heartbeats are on CLOCK_MONOTONIC by default, not the wall clock: a
// clock stepped back an hour made a dead worker's last beat look fresh for
// that hour, and the others kept deferring to it.
func TestHeartbeatIsOnTheMonotonicClock(t *testing.T) {
	var before, after unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &before)
	b := New(shm.Local(Slots*wordsPerSlot), Options{Self: 3})
	b.Beat()
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &after)
	if beat := int64(b.words[3*wordsPerSlot]); beat < before.Nano() || beat > after.Nano() {
		t.Fatalf("heartbeat %d, not between CLOCK_MONOTONIC readings %d and %d", beat, before.Nano(), after.Nano())
	}
}

// Connections opening and closing at once on many goroutines leave the
// published count exact: it is what the other workers compare against.
// (The count used to be kept privately and stored after each change, so
// two changes at once could publish the earlier one's value; that race is
// rare, and this test shows the invariant rather than the race.)
func TestPublishedCountIsExactUnderConcurrency(t *testing.T) {
	c := &clock{1000 * time.Second}
	w := pool(2, c)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20000 {
				w[0].ConnOpened()
				if i%2 == 0 || g%2 == 0 {
					w[0].ConnClosed()
				}
			}
		}()
	}
	wg.Wait()
	// Goroutines 1, 3, 5, 7 leave every other connection open.
	if got, want := int64(atomic.LoadUint64(w[0].slot(0, 1))), int64(4*10000); got != want {
		t.Fatalf("published count %d, want %d", got, want)
	}
	if !w[0].ShouldDefer() || w[1].ShouldDefer() {
		t.Fatal("the loaded worker must defer to the idle one, and only it")
	}
}

// stepPool is a primary (slot 0) and a surplus worker (slot 1) of a pool
// with one primary per CPU on a machine of one CPU, over one table, with
// the primary's clients opening a connection per request; and a real
// listener whose wait is exclusive (so the surplus worker can read the
// accept queue and pause). Both beat until the test ends; stopPrimary ends
// the primary's beating and leaves, as a draining worker does.
func stepPool(t *testing.T) (primary, surplus *Balancer, l net.Listener, stopPrimary func()) {
	t.Helper()
	r := shm.Local(Slots * wordsPerSlot)
	opts := func(self int) Options {
		return Options{Self: self, Primaries: 1, StepPoll: 10 * time.Millisecond, IdleAfter: time.Hour}
	}
	primary, surplus = New(r, opts(0)), New(r, opts(1))
	beat := func(b *Balancer) func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		b.Beat()
		go func() { defer close(done); b.Run(ctx) }()
		return func() { cancel(); <-done }
	}
	stopPrimary, stopSurplus := beat(primary), beat(surplus)
	t.Cleanup(func() { stopPrimary(); stopSurplus() })
	for range 64 {
		primary.ConnReused(false)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x, err := exclusive.Register(raw)
	if err != nil {
		raw.Close()
		t.Skipf("no exclusive wait here: %v", err)
	}
	t.Cleanup(func() { x.Close() })
	return primary, surplus, x, stopPrimary
}

// acceptAsync accepts on b's gated view of l and sends the outcome.
func acceptAsync(b *Balancer, l net.Listener, obs Observer) <-chan error {
	done := make(chan error, 1)
	go func() {
		c, err := b.Listener(l, obs).Accept()
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	return done
}

// accepting stands in for a primary that keeps accepting: its count of
// accepted connections moves many times a StepPoll until stop is closed.
func accepting(b *Balancer, stop <-chan struct{}) {
	t := time.NewTicker(100 * time.Microsecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			atomic.AddUint64(b.slot(b.opts.Self, wordAccepted), 1)
		}
	}
}

// Under new-connection load a surplus worker leaves the connection waiting
// in the queue to the primaries while they accept; once they stop
// accepting with a connection waiting (a primary frozen, or behind), it
// comes back and takes it.
func TestSurplusWorkerStepsBackWhileThePrimariesAccept(t *testing.T) {
	primary, surplus, l, _ := stepPool(t)
	stop := make(chan struct{})
	go accepting(primary, stop)
	deferred := &deferrals{}
	done := acceptAsync(surplus, l, deferred)
	go dialAndHold(l)
	stepped := backs(surplus)
	select {
	case err := <-done:
		close(stop)
		t.Fatalf("the surplus worker accepted (%v) while the primary kept accepting", err)
	case <-time.After(300 * time.Millisecond):
	}
	if atomic.LoadUint64(surplus.slot(1, wordFlags))&flagBack == 0 {
		t.Error("a stepped-back worker does not say so in the table: the others would defer to it")
	}
	close(stop)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a connection waited in the queue with no primary accepting, and the surplus worker stayed back")
	}
	if n := <-stepped; n != 1 {
		t.Fatalf("stepped back %d times, want once", n)
	}
	if deferred.n != 0 {
		t.Fatalf("a step back was reported as %d deferred accepts (a histogram of milliseconds)", deferred.n)
	}
}

// backs counts b's step backs (its flagBack raised, then cleared) until one
// ends with the flag clear for 100ms; -1 when b is still stepped back 10s
// on.
func backs(b *Balancer) <-chan int {
	out := make(chan int, 1)
	go func() {
		n, back, clear := 0, false, time.Time{}
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Microsecond) {
			now := atomic.LoadUint64(b.slot(b.opts.Self, wordFlags))&flagBack != 0
			switch {
			case now && !back:
				n++
			case !now && back:
				clear = time.Now()
			case !now && n > 0 && time.Since(clear) > 100*time.Millisecond:
				out <- n
				return
			}
			back = now
		}
		if back {
			n = -1
		}
		out <- n
	}()
	return out
}

// A surplus worker does not step back, and comes back at once, when a
// primary is dead or draining, its clients reuse connections (the gate
// balances those over every worker), or its requests wait for admission
// slots or are turned away (short of slots, whatever its CPU).
func TestSurplusWorkerServesWhenAPrimaryCannot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state func(p *Balancer, stopPrimary func())
	}{
		{"draining", func(_ *Balancer, stopPrimary func()) { stopPrimary() }},
		{"keep-alive clients", func(p *Balancer, _ func()) {
			for range 64 {
				p.ConnReused(true)
			}
		}},
		{"requests turned away", func(p *Balancer, _ func()) { p.Shed() }},
		{"requests waiting for a slot", func(p *Balancer, _ func()) { p.Admitted(10 * time.Millisecond) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, when := range []string{"before", "during"} {
				primary, surplus, l, stopPrimary := stepPool(t)
				stop := make(chan struct{})
				go accepting(primary, stop)
				if when == "before" {
					tc.state(primary, stopPrimary)
				}
				done := acceptAsync(surplus, l, nil)
				go dialAndHold(l)
				if when == "during" {
					time.Sleep(50 * time.Millisecond)
					tc.state(primary, stopPrimary)
				}
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: the surplus worker stayed back", when)
				}
				close(stop)
			}
		})
	}
	// A wait shorter than PressureWait comes with any busy worker on
	// shared CPUs, not pressure.
	primary, surplus, l, _ := stepPool(t)
	stop := make(chan struct{})
	defer close(stop)
	go accepting(primary, stop)
	primary.Admitted(9 * time.Millisecond)
	done := acceptAsync(surplus, l, nil)
	go dialAndHold(l)
	select {
	case err := <-done:
		t.Fatalf("the surplus worker accepted (%v) after a wait of 9ms on the primary", err)
	case <-time.After(200 * time.Millisecond):
	}
}

// A stepped-back worker is not one to defer to: it takes no connection.
func TestNoWorkerDefersToAStepBack(t *testing.T) {
	w := pool(2, &clock{1000 * time.Second})
	w[0].ConnOpened()
	if !w[0].ShouldDefer() {
		t.Fatal("not deferring to the idle worker")
	}
	w[1].setFlag(flagBack, true)
	if w[0].ShouldDefer() {
		t.Fatal("deferring to a worker that stepped back")
	}
}

// When the primaries accept nothing for IdleAfter the load is gone: the
// surplus worker ends its step back and waits in its poller again, where
// waiting costs nothing, instead of looking every StepPoll.
func TestStepBackEndsWhenTheLoadDoes(t *testing.T) {
	_, surplus, l, _ := stepPool(t)
	surplus.opts.IdleAfter = 20 * time.Millisecond
	stepped := backs(surplus)
	done := acceptAsync(surplus, l, nil)
	if n := <-stepped; n != 1 {
		t.Fatalf("stepped back %d times with no primary accepting, want once (and then never again)", n)
	}
	go dialAndHold(l)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A draining worker closes its listeners: a step back in progress ends at
// its next look, and Accept returns the listener's error.
func TestClosingTheListenerEndsAStepBack(t *testing.T) {
	primary, surplus, l, _ := stepPool(t)
	stop := make(chan struct{})
	defer close(stop)
	go accepting(primary, stop)
	done := acceptAsync(surplus, l, nil)
	time.Sleep(50 * time.Millisecond)
	l.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("accepted on a closed listener")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still stepped back 5s after its listener closed")
	}
}

// The primaries are the pool's CPUs, counted from every live worker's
// published set: workers pinned one by one (each counting one CPU) are
// all primaries, a dead worker's set no longer counts, and a worker that
// publishes none keeps everyone at Options.Primaries.
func TestPrimariesCountThePoolsCPUs(t *testing.T) {
	c := &clock{1000 * time.Second}
	r := shm.Local(Slots * wordsPerSlot)
	join := func(self int, cpus uint64, primaries int) *Balancer {
		b := New(r, Options{Self: self, Clock: c.now, Primaries: primaries, CPUs: cpus})
		b.Beat()
		return b
	}
	recount := func(bs ...*Balancer) {
		for _, b := range bs {
			b.countPrimaries()
		}
	}
	pool := func(b *Balancer, workers, cpus int) {
		t.Helper()
		if w, c := b.Pool(); w != workers || c != cpus {
			t.Fatalf("worker %d: Pool() = %d workers on %d CPUs, want %d on %d", b.opts.Self+1, w, c, workers, cpus)
		}
	}
	// Two workers pinned to CPU 0 and CPU 1, each counting one CPU.
	w0 := join(0, 0b01, 1)
	if got := w0.primaries.Load(); got != 1 {
		t.Fatalf("alone on CPU 0: %d primaries, want 1", got)
	}
	pool(w0, 1, 1)
	w1 := join(1, 0b10, 1)
	recount(w0, w1)
	if w1.Surplus() || w0.primaries.Load() != 2 || w1.primaries.Load() != 2 {
		t.Fatalf("pinned to CPUs 0 and 1: primaries %d and %d, worker 2 surplus %v; want 2, 2, false",
			w0.primaries.Load(), w1.primaries.Load(), w1.Surplus())
	}
	pool(w0, 2, 2)
	pool(w1, 2, 2)
	// A third worker on CPU 0 is past the pool's two CPUs.
	w2 := join(2, 0b01, 1)
	recount(w0, w1, w2)
	if !w2.Surplus() || w1.Surplus() {
		t.Fatalf("third worker on CPU 0: surplus %v (want true), second %v (want false)", w2.Surplus(), w1.Surplus())
	}
	pool(w2, 3, 2)
	// A worker that cannot say its CPUs: everyone falls back to its own count.
	w3 := join(3, 0, 1)
	recount(w0, w1, w2, w3)
	if !w1.Surplus() || w0.primaries.Load() != 1 {
		t.Fatalf("with a worker of unknown CPUs: primaries %d, second worker surplus %v; want 1, true", w0.primaries.Load(), w1.Surplus())
	}
	pool(w0, 4, 0)
	w3.Leave()
	w1.Leave()
	recount(w0, w2)
	if got := w0.primaries.Load(); got != 1 {
		t.Fatalf("the workers on CPU 1 and of unknown CPUs gone: %d primaries, want 1 (CPU 0)", got)
	}
	pool(w0, 2, 1)
	// Primaries 0 turns stepping back off, whatever the sets.
	off := New(shm.Local(Slots*wordsPerSlot), Options{Self: 5, Clock: c.now, CPUs: 0b11})
	if off.Surplus() || off.primaries.Load() != 0 {
		t.Fatalf("Primaries 0: primaries %d, surplus %v; want 0, false", off.primaries.Load(), off.Surplus())
	}
}

// Unpinned workers publish the same set: the primaries are its CPUs, as
// many as each worker counts, and the worker past them is surplus.
func TestPrimariesOfUnpinnedWorkersAreTheCPUCount(t *testing.T) {
	c := &clock{1000 * time.Second}
	r := shm.Local(Slots * wordsPerSlot)
	var bs []*Balancer
	for i := range 3 {
		b := New(r, Options{Self: i, Clock: c.now, Primaries: 2, CPUs: 0b11})
		b.Beat()
		bs = append(bs, b)
	}
	for _, b := range bs {
		b.countPrimaries()
	}
	if bs[0].Surplus() || bs[1].Surplus() || !bs[2].Surplus() {
		t.Fatalf("3 workers on CPUs 0-1: surplus %v %v %v, want false false true", bs[0].Surplus(), bs[1].Surplus(), bs[2].Surplus())
	}
}

// holding records Hold calls (package exclusive's listener).
type holding struct {
	net.Listener
	mu  sync.Mutex
	log []string
}

func (h *holding) Hold(out bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, map[bool]string{true: "out", false: "back"}[out])
	return nil
}

func (h *holding) take() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := strings.Join(h.log, " ")
	h.log = nil
	return s
}

// A worker running the spare P with every admission slot taken holds its
// listeners out of the socket's wait while another worker has a slot free,
// and lets them back when its own slot frees, when the other's are taken
// too, or when the spare P goes; without the spare P it never looks.
func TestFullWorkerLeavesTheWaitToAFreeOne(t *testing.T) {
	c := &clock{1000 * time.Second}
	w := pool(3, c)
	w[0].opts.MaxDefer = time.Hour // no look at the others' accepts in between (TestHoldEndsWhenTheFreeWorkerTakesNothing)
	var inFlight atomic.Int64
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec := &holding{Listener: l}
	w[0].Listener(rec, nil)
	w[0].WatchSlots(1, func() int { return int(inFlight.Load()) }, false)
	w[1].ConnOpened() // worker 1 busy, worker 2 free
	w[1].ConnOpened()

	step := func(what string, change func(), held bool, log string) {
		t.Helper()
		change()
		w[0].SlotsChanged()
		if w[0].Held() != held || rec.take() != log {
			t.Fatalf("%s: held %v (want %v), listener told %q, want %q", what, w[0].Held(), held, rec.log, log)
		}
	}
	step("every slot taken, no spare P", func() { inFlight.Store(1) }, false, "")
	step("the spare P comes", func() { w[0].SetSpare(true) }, true, "out")
	step("worker 2 takes a connection", func() { w[2].ConnOpened() }, false, "back")
	step("worker 2's connection ends", func() { w[2].ConnClosed() }, true, "out")
	step("worker 0's slot frees", func() { inFlight.Store(0) }, false, "back")
	step("taken again", func() { inFlight.Store(1) }, true, "out")
	step("the spare P goes", func() { w[0].SetSpare(false) }, false, "back")
	w[0].SetSpare(true)
	rec.take()
	step("worker 2 steps back", func() { w[2].setFlag(flagBack, true) }, false, "back")
	step("worker 2 serves again", func() { w[2].setFlag(flagBack, false) }, true, "out")
	step("worker 2 stops beating", func() { c.t += time.Second; w[0].Beat(); w[1].Beat() }, false, "back")

	// A listener that comes while held is held out at once.
	later := &holding{Listener: l}
	step("worker 2 beats again", func() { w[2].Beat() }, true, "out")
	w[0].Listener(later, nil)
	if got := later.take(); got != "out" {
		t.Fatalf("a listener added while held was told %q, want \"out\"", got)
	}
}

// Two workers with every slot taken never hold each other out: each holds
// at least as many connections as slots, so neither is free.
func TestBusyWorkersDoNotBothLeave(t *testing.T) {
	w := pool(2, &clock{1000 * time.Second})
	for i := range w {
		w[i].ConnOpened()
		w[i].WatchSlots(1, func() int { return 1 }, true)
	}
	for i := range w {
		w[i].SlotsChanged()
		if w[i].Held() {
			t.Fatalf("worker %d held out while the other's only slot is taken", i)
		}
	}
}

// A hold trusts the table for MaxDefer at most: when the free worker
// accepts nothing (frozen, its heartbeat not yet stale) while a connection
// waits, the worker lets its listener back and holds again only once the
// others accept.
func TestHoldEndsWhenTheFreeWorkerTakesNothing(t *testing.T) {
	w := pool(2, &clock{1000 * time.Second})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x, err := exclusive.Register(l)
	if err != nil {
		t.Skipf("no exclusive wait here: %v", err)
	}
	defer x.Close()
	w[0].Listener(x, nil)
	w[0].WatchSlots(1, func() int { return 1 }, true)
	if !w[0].Held() {
		t.Fatal("every slot taken, worker 1 free: not held")
	}
	c, err := net.Dial("tcp", l.Addr().String()) // waits in the accept queue: nobody accepts
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); w[0].Held() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if w[0].Held() {
		t.Fatal("still held with a connection waiting and worker 1 accepting nothing")
	}
	w[0].SlotsChanged()
	if w[0].Held() {
		t.Fatal("held again before worker 1 accepted anything")
	}
	atomic.AddUint64(w[1].slot(1, wordAccepted), 1) // worker 1 accepts again
	w[0].SlotsChanged()
	if !w[0].Held() {
		t.Fatal("worker 1 accepts again: not held")
	}
}
