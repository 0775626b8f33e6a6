package listen

// Accepting from a shared socket without a thundering herd.
//
// Every worker serves on a copy of the same listening socket. Go's poller
// registers a listener with plain edge-triggered epoll, so each new
// connection wakes a thread in every worker that is waiting for one; all but
// one find nothing to accept and go back to sleep. On 2 CPUs with a new
// connection per request, 8 workers served 0.43x of one process and 16 of
// them 0.37x, even with one P each (docs/benchmarks.md).
//
// An Exclusive listener waits in an epoll set of its own, where the socket
// is registered with EPOLLEXCLUSIVE (Linux 4.5): the kernel then wakes one
// waiting worker per connection, not all of them (nginx does the same for
// its worker processes). The thread blocked in epoll_wait is one per
// listener; Go hands its P to other goroutines while it waits. Accepted
// connections become ordinary *net.TCPConn (net.FileConn), served and
// polled by Go as usual.
//
// The kernel wakes the waiters in the order they registered, not by how
// busy they are: a worker whose every admission slot computes would take
// connections while another sits idle (/fib?n=30 with a new connection per
// request fell to 0.6x at 2 workers). So with a Gate, a worker that is full
// holds back from epoll_wait until a slot frees, and the kernel wakes one
// that is waiting; a connection nobody took within HoldBackCheck (every
// worker full) is accepted anyway, so admission control can queue or turn
// it away with a 503 rather than leave it in the kernel's queue.
//
// Close wakes a blocked Accept through an eventfd in the same set, so a
// draining worker stops accepting at once while the socket itself, held by
// systemd and the other workers, keeps queueing connections for them.

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Exclusive is a net.Listener on a shared listening socket that is woken
// alone for a new connection (EPOLLEXCLUSIVE). It implements syscall.Conn
// (Control only) for socket options such as TCP_INFO.
type Exclusive struct {
	gate           atomic.Pointer[Gate]
	fd, epfd, evfd int
	addr           net.Addr
	// mu is held for reading while a descriptor is in use and for writing
	// while Close releases them, so no call ever uses a closed (and maybe
	// reused) descriptor number.
	mu     sync.RWMutex
	closed atomic.Bool
}

// Gate says when a worker cannot start another request
// (admission.Limiter implements it).
type Gate interface {
	// Full says every slot is taken.
	Full() bool
	// Freed returns a channel that receives after a slot is released
	// (possibly early), until Unwatch.
	Freed() <-chan struct{}
	Unwatch()
}

// HoldBackCheck is how often a full worker holding back looks at the
// socket's accept queue for a connection no other worker took.
const HoldBackCheck = time.Millisecond

// SetGate makes Accept hold back while g is Full (see the package comment
// of this file). Call it before serving; a pool of one has nobody to hold
// back for and should not.
func (l *Exclusive) SetGate(g Gate) { l.gate.Store(&g) }

// NewExclusive returns an Exclusive listener on a duplicate of the listening
// socket behind rc (rc's own descriptor is left to its owner). The socket
// must be in non-blocking mode: a blocking accept4 could not be woken by
// Close.
func NewExclusive(rc syscall.RawConn) (*Exclusive, error) {
	l := &Exclusive{fd: -1, epfd: -1, evfd: -1}
	var err error
	if cerr := rc.Control(func(fd uintptr) { l.fd, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil || err != nil {
		return nil, fmt.Errorf("exclusive accept: duplicate the socket: %w", firstErr(cerr, err))
	}
	if err := l.setUp(); err != nil {
		l.release()
		return nil, fmt.Errorf("exclusive accept: %w", err)
	}
	return l, nil
}

func (l *Exclusive) setUp() error {
	flags, err := unix.FcntlInt(uintptr(l.fd), unix.F_GETFL, 0)
	if err != nil {
		return fmt.Errorf("read the socket's flags: %w", err)
	}
	if flags&unix.O_NONBLOCK == 0 {
		return fmt.Errorf("the socket is in blocking mode (NonBlocking=no): accept4 would block past Close")
	}
	sa, err := unix.Getsockname(l.fd)
	if err != nil {
		return fmt.Errorf("getsockname: %w", err)
	}
	if l.addr = sockaddrToAddr(sa); l.addr == nil {
		return fmt.Errorf("unsupported address family %T", sa)
	}
	if l.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	if l.evfd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, l.fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLEXCLUSIVE, Fd: int32(l.fd)}); err != nil {
		return fmt.Errorf("epoll_ctl EPOLLEXCLUSIVE (Linux 4.5 or later): %w", err)
	}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, l.evfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(l.evfd)}); err != nil {
		return fmt.Errorf("epoll_ctl eventfd: %w", err)
	}
	return nil
}

// Accept waits for and returns the next connection. After Close it returns
// an error wrapping net.ErrClosed.
func (l *Exclusive) Accept() (net.Conn, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var events [2]unix.EpollEvent
	yielded := false
	for {
		if l.closed.Load() {
			return nil, l.opError(net.ErrClosed)
		}
		if g := l.gate.Load(); g != nil && (*g).Full() {
			if l.holdBack(*g); l.closed.Load() {
				continue
			}
		}
		// Without SOCK_NONBLOCK: os.NewFile would register a non-blocking
		// descriptor with Go's poller only for net.FileConn to duplicate it;
		// FileConn sets the (shared) description non-blocking itself.
		nfd, _, err := unix.Accept4(l.fd, unix.SOCK_CLOEXEC)
		switch err {
		case nil:
			f := os.NewFile(uintptr(nfd), "")
			c, err := net.FileConn(f)
			_ = f.Close() // c holds its own duplicate
			if err != nil {
				return nil, l.opError(err)
			}
			return c, nil
		case unix.EAGAIN:
			// Let the goroutines of the connections just accepted run on
			// this thread first: blocking now would leave them to another
			// thread, woken for them.
			if !yielded {
				yielded = true
				runtime.Gosched()
				continue
			}
			yielded = false
			if _, err := unix.EpollWait(l.epfd, events[:], -1); err != nil && err != unix.EINTR {
				return nil, l.opError(os.NewSyscallError("epoll_wait", err))
			}
		case unix.EINTR, unix.ECONNABORTED:
			// A signal, or a connection reset while in the queue: next.
		default:
			return nil, l.opError(os.NewSyscallError("accept4", err))
		}
	}
}

// holdBack waits, outside epoll_wait, while g is full; it returns when a
// slot frees, when the listener closes, or when the accept queue has held
// connections at two checks in a row, HoldBackCheck apart (no other worker
// is taking them; one seen once may be on its way to a worker just woken).
func (l *Exclusive) holdBack(g Gate) {
	freed := g.Freed()
	defer g.Unwatch()
	t := time.NewTimer(HoldBackCheck)
	defer t.Stop()
	waiting := false
	for g.Full() && !l.closed.Load() {
		select {
		case <-freed:
		case <-t.C:
			queued := l.queued() > 0
			if queued && waiting {
				return
			}
			waiting = queued
			t.Reset(HoldBackCheck)
		}
	}
}

// queued is the length of the socket's accept queue (TCP_INFO's unacked
// for a listening socket); 0 when it cannot be read.
func (l *Exclusive) queued() uint32 {
	info, err := unix.GetsockoptTCPInfo(l.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0
	}
	return info.Unacked
}

// Close stops Accept (a blocked one returns at once) and closes the
// listener's descriptors; the shared socket stays open for its other holders.
func (l *Exclusive) Close() error {
	if l.closed.Swap(true) {
		return l.opError(net.ErrClosed)
	}
	one := [8]byte{1}
	_, _ = unix.Write(l.evfd, one[:]) // never fails with a counter this low; readable for good
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.release()
}

func (l *Exclusive) release() error {
	var first error
	for _, fd := range []*int{&l.fd, &l.epfd, &l.evfd} {
		if *fd >= 0 {
			if err := unix.Close(*fd); err != nil && first == nil {
				first = os.NewSyscallError("close", err)
			}
			*fd = -1
		}
	}
	return first
}

// Addr is the socket's local address.
func (l *Exclusive) Addr() net.Addr { return l.addr }

// SyscallConn gives Control access to the socket (for getsockopt);
// Read and Write are not supported.
func (l *Exclusive) SyscallConn() (syscall.RawConn, error) { return rawConn{l}, nil }

type rawConn struct{ l *Exclusive }

func (c rawConn) Control(f func(fd uintptr)) error {
	c.l.mu.RLock()
	defer c.l.mu.RUnlock()
	if c.l.closed.Load() {
		return net.ErrClosed
	}
	f(uintptr(c.l.fd))
	return nil
}

func (rawConn) Read(func(uintptr) bool) error  { return syscall.EOPNOTSUPP }
func (rawConn) Write(func(uintptr) bool) error { return syscall.EOPNOTSUPP }

func (l *Exclusive) opError(err error) error {
	return &net.OpError{Op: "accept", Net: l.addr.Network(), Addr: l.addr, Err: err}
}

func sockaddrToAddr(sa unix.Sockaddr) net.Addr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IPv4(a.Addr[0], a.Addr[1], a.Addr[2], a.Addr[3]), Port: a.Port}
	case *unix.SockaddrInet6:
		addr := &net.TCPAddr{IP: append(net.IP(nil), a.Addr[:]...), Port: a.Port}
		if a.ZoneId != 0 {
			if ifi, err := net.InterfaceByIndex(int(a.ZoneId)); err == nil {
				addr.Zone = ifi.Name
			}
		}
		return addr
	case *unix.SockaddrUnix:
		return &net.UnixAddr{Name: a.Name, Net: "unix"}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
