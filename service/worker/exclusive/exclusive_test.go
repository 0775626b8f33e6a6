package exclusive

import (
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// entryOf returns the poller's entry for l's descriptor, or ok false.
func entryOf(t *testing.T, l net.Listener) (data uint64, ev uint32, ok bool) {
	t.Helper()
	rc, err := l.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var findErr error
	if err := rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if findErr = unix.Fstat(int(fd), &st); findErr != nil {
			return
		}
		_, data, ev, findErr = find(int(fd), st.Ino)
	}); err != nil {
		t.Fatal(err)
	}
	if findErr == errNotFound {
		return 0, 0, false
	}
	if findErr != nil {
		t.Fatal(findErr)
	}
	return data, ev, true
}

// acceptOne dials l and waits for Accept, which was called first, so that
// it is parked in the poller when the connection comes: it returns only if
// the poller's entry reports the connection.
func acceptOne(t *testing.T, l net.Listener) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // let Accept park (if it has not, it finds the connection itself)
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("accept: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the connection was not reported to the parked Accept in 10s")
	}
}

func TestRegisterKeepsTheRuntimesDataAndAddsExclusive(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	data, ev, ok := entryOf(t, l)
	if !ok || ev&unix.EPOLLEXCLUSIVE != 0 {
		t.Fatalf("before: entry %v, events %#x", ok, ev)
	}
	x, err := Register(l)
	if err != nil {
		t.Fatal(err)
	}
	data2, ev2, ok := entryOf(t, l)
	if !ok || data2 != data || ev2&events != events {
		t.Fatalf("after: entry %v, data %#x (was %#x), events %#x, want %#x set", ok, data2, data, ev2, events)
	}
	for range 3 {
		acceptOne(t, x)
	}
}

func TestPauseTakesTheEntryOutAndResumePutsItBack(t *testing.T) {
	l, x := registered(t)
	if err := x.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := x.Pause(); err != nil { // twice is once
		t.Fatal(err)
	}
	if _, _, ok := entryOf(t, l); ok {
		t.Fatal("paused, the poller still holds the socket")
	}
	// A connection that comes while paused waits in the backlog.
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := x.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, ev, ok := entryOf(t, l); !ok || ev&unix.EPOLLEXCLUSIVE == 0 {
		t.Fatalf("resumed: entry %v, events %#x", ok, ev)
	}
	a, err := x.Accept()
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	acceptOne(t, x)
	// Accept resumes a paused wait itself: a parked Accept would otherwise
	// never be woken.
	if err := x.Pause(); err != nil {
		t.Fatal(err)
	}
	acceptOne(t, x)
}

// The runtime deletes the entry on Close, paused or not, and a listener
// that gets the same descriptor number is registered as usual.
func TestCloseLeavesNothingBehind(t *testing.T) {
	for _, paused := range []bool{false, true} {
		_, x := registered(t) // closed below; the cleanup's second Close does nothing
		if paused {
			if err := x.Pause(); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := x.Accept(); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("accept after close: %v", err)
		}
		if err := x.Resume(); paused && err == nil {
			t.Fatal("resume after close: no error")
		}
		l2, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		acceptOne(t, l2)
		l2.Close()
	}
}

type noConn struct{ net.Listener }

func TestRegisterNeedsADescriptor(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Register(noConn{l}); err == nil {
		t.Fatal("a listener without SyscallConn was registered")
	}
	if _, _, ok := entryOf(t, l); !ok {
		t.Fatal("a failed Register removed the runtime's entry")
	}
}

func TestParseEntry(t *testing.T) {
	for _, tc := range []struct {
		line string
		want fdinfoEntry
		err  bool
	}{
		{"tfd:        5 events: 8000201d data: 3fceba0147000002  pos:0 ino:a9958b sdev:9", fdinfoEntry{5, 0x8000201d, 0x3fceba0147000002, 0xa9958b}, false},
		{"tfd:        3 events: 90000019 data:                3  pos:0 ino:622878 sdev:9", fdinfoEntry{3, 0x90000019, 3, 0x622878}, false},
		{"pos:\t0", fdinfoEntry{tfd: -1}, false},
		{"", fdinfoEntry{tfd: -1}, false},
		{"tfd:        5 events: zz data: 1 pos:0 ino:1 sdev:9", fdinfoEntry{}, true},
		{"tfd:        5 events: 19 data: 1 pos:0 sdev:9", fdinfoEntry{}, true}, // no ino
	} {
		got, err := parseEntry(tc.line)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("parseEntry(%q) = %+v, %v; want %+v, error %v", tc.line, got, err, tc.want, tc.err)
		}
	}
}

// registered returns a loopback listener and its exclusive registration,
// closed when the test ends (if the test has not closed it).
func registered(t *testing.T) (net.Listener, *Listener) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x, err := Register(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return l, x
}

// Hold keeps the entry out whatever Pause and Resume do (and Accept's own
// Resume), and an Accept parked while held gets the connection that came
// meanwhile once Hold lets the entry back.
func TestHoldIsApartFromPause(t *testing.T) {
	l, x := registered(t)
	if err := Hold(wrapper{x}, true); err != nil { // found through a wrapper's Unwrap
		t.Fatal(err)
	}
	for _, step := range []func() error{x.Pause, x.Resume, x.Pause, x.Resume} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := entryOf(t, l); ok {
			t.Fatal("held, the poller holds the socket again after Pause or Resume")
		}
	}
	got := make(chan error, 1)
	go func() {
		c, err := x.Accept() // its Resume leaves the Hold
		if err == nil {
			c.Close()
		}
		got <- err
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, ok := entryOf(t, l); ok {
		t.Fatal("held, Accept put the entry back")
	}
	if err := x.Pause(); err != nil { // both reasons out: only Hold lets go
		t.Fatal(err)
	}
	if err := x.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := x.Hold(false); err != nil {
		t.Fatal(err)
	}
	if _, ev, ok := entryOf(t, l); !ok || ev&unix.EPOLLEXCLUSIVE == 0 {
		t.Fatalf("let back: entry %v, events %#x", ok, ev)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("accept: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Accept parked while held never got the connection that came meanwhile")
	}
}

type wrapper struct{ net.Listener }

func (w wrapper) Unwrap() net.Listener { return w.Listener }
