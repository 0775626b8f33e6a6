package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Netns is a box's network namespace, held open so the calling process itself
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

// HostPID returns the host PID of the box's systemd, as `scripts/sandbox
// list` reports it (that check includes the process start time).
func (d *Driver) HostPID(ctx context.Context) (int, error) {
	out, err := d.run(ctx, CommandTimeout, "list")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == d.Name {
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				return 0, fmt.Errorf("sandbox list: bad PID in %q", line)
			}
			return pid, nil
		}
	}
	return 0, fmt.Errorf("box %s is not up:\n%s", d.Name, out)
}

// OpenNetns opens the network namespace of the box's systemd. Close it
// when done.
func (d *Driver) OpenNetns(ctx context.Context) (*Netns, error) {
	pid, err := d.HostPID(ctx)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("open the box's network namespace: %w", err)
	}
	// The PID was the box's when listed; checking again after the open
	// proves the namespace held is the box's, not a recycled PID's.
	again, err := d.HostPID(ctx)
	if err == nil && again != pid {
		err = fmt.Errorf("box %s changed PID while its namespace was opened (%d, then %d)", d.Name, pid, again)
	}
	if err != nil {
		_ = f.Close() // read-only; the PID check's error is the one to report
		return nil, err
	}
	return &Netns{f: f}, nil
}

// Close releases the namespace; sockets made in it stay usable.
func (n *Netns) Close() error { return n.f.Close() }

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
