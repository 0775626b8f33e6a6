package fdlimit

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/exclusive"
	"github.com/clusterapp/clusterapp/service/worker/internal/clocktest"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// fakeListener hands out the results the test queues, one per Accept, and
// tells the test about every attempt.
type fakeListener struct {
	results  chan result
	attempts chan struct{}
	closed   chan struct{}
	once     sync.Once

	// Pause and Resume (package exclusive) are counted; an Accept while
	// paused is a defect.
	paused, acceptedPaused atomic.Bool
	pauses, resumes        atomic.Int32
}

func (f *fakeListener) Pause() error  { f.pauses.Add(1); f.paused.Store(true); return nil }
func (f *fakeListener) Resume() error { f.resumes.Add(1); f.paused.Store(false); return nil }

type result struct {
	conn net.Conn
	err  error
}

func newFakeListener() *fakeListener {
	return &fakeListener{results: make(chan result, 100), attempts: make(chan struct{}, 100), closed: make(chan struct{})}
}

func (f *fakeListener) Accept() (net.Conn, error) {
	if f.paused.Load() {
		f.acceptedPaused.Store(true)
	}
	f.attempts <- struct{}{}
	select {
	case r := <-f.results:
		return r.conn, r.err
	case <-f.closed:
		return nil, net.ErrClosed
	}
}

func (f *fakeListener) Close() error   { f.once.Do(func() { close(f.closed) }); return nil }
func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

// emfile is what accept(2) at the open-file limit looks like through package net.
var emfile = &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}

// fakeClock fires the retry timer only when the test says so, and tells
// the test when an Accept starts waiting (its failed attempt is counted by
// then). Its Now counts the reads it should never get: the wall clock is
// Options.Now.
type fakeClock struct {
	timer   chan time.Time
	waiting chan struct{}
}

func (c *fakeClock) After(time.Duration) <-chan time.Time {
	c.waiting <- struct{}{}
	return c.timer
}

type fixture struct {
	inner *fakeListener
	l     net.Listener
	g     *Guard
	clock *fakeClock
	wall  *clocktest.Manual
	hook  *test.Hook
}

func newFixture() *fixture {
	log, hook := test.NewNullLogger()
	clock := &fakeClock{timer: make(chan time.Time), waiting: make(chan struct{}, 100)}
	wall := clocktest.At(time.Unix(1000, 0))
	g := New(Options{Clock: clock, Now: wall.Now, Log: logrus.NewEntry(log), Connections: func() int { return 7 }})
	inner := newFakeListener()
	return &fixture{inner: inner, l: g.Wrap(inner), g: g, clock: clock, wall: wall, hook: hook}
}

// accept runs Accept in the background.
func (f *fixture) accept() <-chan result {
	done := make(chan result, 1)
	go func() {
		c, err := f.l.Accept()
		done <- result{c, err}
	}()
	return done
}

// attempts waits for n accept attempts on the inner listener.
func (f *fixture) attempts(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-f.inner.attempts:
		case <-time.After(5 * time.Second):
			t.Fatal("no accept attempt")
		}
	}
}

// waits waits until Accept waits at the limit, n times in all.
func (f *fixture) waits(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-f.clock.waiting:
		case <-time.After(5 * time.Second):
			t.Fatal("Accept is not waiting")
		}
	}
}

// retry fires the retry timer and waits until Accept waits again.
func (f *fixture) retry(t *testing.T) {
	t.Helper()
	f.clock.timer <- time.Now()
	f.waits(t, 1)
}

func wait(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not return")
		return result{}
	}
}

func TestReleasedWakesAnAcceptAtTheLimit(t *testing.T) {
	f := newFixture()
	f.inner.results <- result{err: emfile}
	f.inner.results <- result{err: emfile}
	done := f.accept()
	f.attempts(t, 2) // the failure, and the retry after arming
	// The retry timer never fires here: only Released can wake the wait.
	f.g.Released()
	f.attempts(t, 1)
	server, client := net.Pipe()
	defer client.Close()
	f.inner.results <- result{conn: server}
	r := wait(t, done)
	if r.err != nil || r.conn != server {
		t.Fatalf("Accept = %v, %v; want the connection once a descriptor is free", r.conn, r.err)
	}
}

// While it waits at the limit, the worker leaves the socket's exclusive wait
// (package exclusive), so new connections wake a worker that can take them.
func TestWaitAtTheLimitLeavesTheSocketsWait(t *testing.T) {
	f := newFixture()
	f.inner.results <- result{err: emfile}
	f.inner.results <- result{err: emfile}
	done := f.accept()
	f.waits(t, 1)
	if p, r := f.inner.pauses.Load(), f.inner.resumes.Load(); p != 1 || r != 0 || !f.inner.paused.Load() {
		t.Fatalf("waiting at the limit: %d pauses, %d resumes; want 1, 0", p, r)
	}
	f.g.Released()
	server, client := net.Pipe()
	defer client.Close()
	f.inner.results <- result{conn: server}
	if r := wait(t, done); r.err != nil {
		t.Fatal(r.err)
	}
	if p, r := f.inner.pauses.Load(), f.inner.resumes.Load(); p != 1 || r != 1 || f.inner.acceptedPaused.Load() {
		t.Fatalf("after the wait: %d pauses, %d resumes, accepted while paused %v; want 1, 1, false", p, r, f.inner.acceptedPaused.Load())
	}
	// The wrapper unwraps, for the balancer around it.
	exclusive.Pause(f.l)
	exclusive.Resume(f.l)
	if p, r := f.inner.pauses.Load(), f.inner.resumes.Load(); p != 2 || r != 2 {
		t.Fatalf("through the wrapper: %d pauses, %d resumes; want 2, 2", p, r)
	}
}

func TestRetryTimerWakesAnAcceptAtTheLimit(t *testing.T) {
	f := newFixture()
	for range 5 {
		f.inner.results <- result{err: emfile}
	}
	done := f.accept()
	f.waits(t, 1) // after the failure and the retry after arming
	for range 3 {
		f.retry(t)
	}
	f.inner.results <- result{err: errors.New("other")}
	f.clock.timer <- time.Now()
	if r := wait(t, done); r.err == nil || IsLimit(r.err) {
		t.Fatalf("Accept = %v, want the other error", r.err)
	}
	f.attempts(t, 6)
}

func TestWarnsOncePerInterval(t *testing.T) {
	f := newFixture()
	for range 6 {
		f.inner.results <- result{err: emfile}
	}
	done := f.accept()
	f.waits(t, 1) // two failed attempts: the first warning
	for range 3 { // three more within the interval: no new warning
		f.retry(t)
	}
	f.wall.Advance(10 * time.Second) // on Options.Now: the interval is read there
	f.retry(t)                       // the sixth failure, after the interval: the second warning
	f.inner.Close()
	f.clock.timer <- time.Now()
	wait(t, done)

	var warnings []*logrus.Entry
	for _, e := range f.hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warnings = append(warnings, e)
		}
	}
	if len(warnings) != 2 {
		t.Fatalf("%d warnings for 6 failed accepts over one interval, want 2", len(warnings))
	}
	if got := warnings[0].Data["accepts_put_off"]; got != 1 {
		t.Fatalf("first warning: accepts_put_off = %v, want 1", got)
	}
	if got := warnings[1].Data["accepts_put_off"]; got != 5 {
		t.Fatalf("second warning: accepts_put_off = %v, want 5 (every attempt since the first warning)", got)
	}
	if got := warnings[0].Data["connections"]; got != 7 {
		t.Fatalf("connections = %v, want 7", got)
	}
	if _, ok := warnings[0].Data["open_files_limit"]; !ok {
		t.Fatal("the warning does not name the limit")
	}
}

func TestCloseEndsAnAcceptAtTheLimit(t *testing.T) {
	f := newFixture()
	f.inner.results <- result{err: emfile}
	f.inner.results <- result{err: emfile}
	done := f.accept()
	f.attempts(t, 2)
	if err := f.l.Close(); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); !errors.Is(r.err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v, want net.ErrClosed", r.err)
	}
}

func TestOtherErrorsPassThrough(t *testing.T) {
	f := newFixture()
	aborted := &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}
	f.inner.results <- result{err: aborted}
	if r := wait(t, f.accept()); !errors.Is(r.err, syscall.ECONNABORTED) {
		t.Fatalf("Accept = %v, want ECONNABORTED as it is", r.err)
	}
	if n := len(f.hook.AllEntries()); n != 0 {
		t.Fatalf("logged %d lines for an error that is not the limit", n)
	}
}

func TestIsLimit(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{emfile, true},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ENFILE)}, true},
		{syscall.EMFILE, true},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}, false},
		{net.ErrClosed, false},
		{nil, false},
	} {
		if got := IsLimit(c.err); got != c.want {
			t.Errorf("IsLimit(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
