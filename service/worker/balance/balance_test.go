package balance

import (
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
