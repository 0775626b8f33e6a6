package sandbox

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Netns is a box's network namespace, held open so the test process itself
// can open sockets in it: the box's 127.0.0.1 is not the host's, and a
// client run inside the box (curl, clusterapp-load) cannot hold a thousand
// idle connections or time one request precisely.
//
// A socket belongs to the namespace of the thread that created it and stays
// there; once made it is used from any goroutine like any other. Do creates
// them on a goroutine locked to an OS thread that has joined the namespace
// with setns(2). That goroutine ends still locked, so the Go runtime
// discards the thread and no other goroutine ever runs in the box's
// namespace by accident.
type Netns struct {
	f *os.File
}

var (
	netnsMu sync.Mutex
	netnsOf = map[string]*Netns{} // by box name; closed at the test's cleanup
)

// Netns returns the network namespace of the box's systemd, opened once per
// box and closed when the test ends.
func (b *Box) Netns() *Netns {
	b.t.Helper()
	netnsMu.Lock()
	defer netnsMu.Unlock()
	if n, ok := netnsOf[b.Name]; ok {
		return n
	}
	pid := b.hostPID()
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		b.t.Fatalf("open the box's network namespace: %v", err)
	}
	// The PID was the box's when listed; checking again after the open
	// proves the namespace held is the box's, not a recycled PID's.
	if again := b.hostPID(); again != pid {
		f.Close()
		b.t.Fatalf("box %s changed PID while its namespace was opened (%d, then %d)", b.Name, pid, again)
	}
	n := &Netns{f: f}
	netnsOf[b.Name] = n
	b.t.Cleanup(func() {
		netnsMu.Lock()
		delete(netnsOf, b.Name)
		netnsMu.Unlock()
		f.Close()
	})
	return n
}

// hostPID is the host PID of the box's systemd, as `scripts/sandbox list`
// reports it (that check includes the process start time).
func (b *Box) hostPID() int {
	b.t.Helper()
	out, err := sandbox("list")
	if err != nil {
		b.t.Fatalf("sandbox list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == b.Name {
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				b.t.Fatalf("sandbox list: bad PID in %q", line)
			}
			return pid
		}
	}
	b.t.Fatalf("box %s is not up:\n%s", b.Name, out)
	return 0
}

// Do runs fn on an OS thread inside the namespace and returns its error.
// Sockets fn creates belong to the box's network. fn must create them
// itself, not in goroutines it starts (those run on other threads, in the
// host's namespace).
func (n *Netns) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: see the type's comment.
		if err := unix.Setns(int(n.f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns into the box's network namespace: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Dial connects to addr (host:port as the box sees it, e.g.
// "127.0.0.1:8080") over TCP from inside the box's network, within timeout.
func (n *Netns) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	return c, err
}

// Dial connects to addr over TCP from inside the box's network (see Netns).
func (b *Box) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	b.t.Helper()
	return b.Netns().Dial(addr, timeout)
}
