// Package rawio reads and writes accepted TCP connections with raw system
// calls, so that a worker with one P keeps it through them.
//
// A goroutine that makes a system call through package syscall (net's reads
// and writes do) marks its P as "in a system call". Go's monitor thread
// (sysmon) takes the P away from a call that lasts over one of its ticks
// (20µs to 10ms) whenever no other P is idle, which with one P per process
// is always: it hands the P to another thread, and the calling thread parks
// when the call returns. On a machine with more busy threads than CPUs, the
// kernel often preempts a worker in the middle of a write to a loopback or
// LAN socket (the write itself wakes the receiver), so this happens several
// times per thousand requests, and each such take resets sysmon to its
// 20µs tick. A pool of 8 workers on 2 CPUs spent 29% of its CPU time in
// sysmon under keep-alive load (docs/benchmarks.md).
//
// A socket that net accepted is non-blocking (accept4 with SOCK_NONBLOCK),
// so a read or write on it never sleeps in the kernel: it returns data, or
// EAGAIN. Such a call does not need the runtime's bookkeeping, and
// syscall.RawSyscall skips it. The conn here makes the calls inside the
// descriptor's RawConn, so net's poller still waits for readiness (on
// EAGAIN), deadlines still apply, and the descriptor cannot be closed
// under the call. Everything else (deadlines, CloseWrite, ReadFrom's
// sendfile and splice, addresses) is net's own *net.TCPConn.
//
// Only a connection accepted while the process runs one P is wrapped: with
// more, an idle P spares the call from sysmon, and net's own calls served
// one process with two Ps 3% faster on `/` with keep-alive (the runtime's
// bookkeeping is cheaper than the RawConn's closure and lock).
package rawio

import (
	"io"
	"net"
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// Wrap returns l with every TCP connection it accepts while GOMAXPROCS is 1
// reading and writing raw. Other connections are returned as they are.
func Wrap(l net.Listener) net.Listener { return &listener{l} }

type listener struct{ net.Listener }

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	if tc, ok := c.(*net.TCPConn); ok && runtime.GOMAXPROCS(0) == 1 {
		if rc, err := tc.SyscallConn(); err == nil {
			return newConn(tc, rc), nil
		}
	}
	return c, nil
}

// Unwrap returns the wrapped listener (package exclusive finds its wait
// through it).
func (l *listener) Unwrap() net.Listener { return l.Listener }

// conn is a *net.TCPConn whose Read and Write make raw calls. Each direction
// keeps its call's arguments and results in the conn, with a func bound once,
// so that a call allocates nothing; the mutexes keep concurrent Reads (or
// Writes) apart, which net.Conn allows.
type conn struct {
	*net.TCPConn
	rc syscall.RawConn

	rmu    sync.Mutex
	rbuf   []byte
	rn     int
	rerrno syscall.Errno
	readFn func(uintptr) bool

	wmu     sync.Mutex
	wbuf    []byte
	wn      int
	werrno  syscall.Errno
	writeFn func(uintptr) bool
}

func newConn(tc *net.TCPConn, rc syscall.RawConn) *conn {
	c := &conn{TCPConn: tc, rc: rc}
	c.readFn, c.writeFn = c.read, c.write
	return c
}

// Read reads like net's: at least one byte, io.EOF at the end of the
// stream, a *net.OpError otherwise.
func (c *conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rbuf, c.rn, c.rerrno = b, 0, 0
	err := c.rc.Read(c.readFn)
	n, errno := c.rn, c.rerrno
	c.rbuf = nil
	switch {
	case err != nil: // closed, or the deadline passed while waiting
		return 0, err
	case errno != 0:
		return 0, c.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read is one attempt; false waits for the descriptor to be readable.
func (c *conn) read(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)))
		switch e {
		case 0:
			c.rn = int(r)
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.rerrno = e
			return true
		}
	}
}

// Write writes all of b, waiting for room as often as it takes, unless the
// connection fails or the write deadline passes (then n says how much went).
func (c *conn) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf, c.wn, c.werrno = b, 0, 0
	err := c.rc.Write(c.writeFn)
	n, errno := c.wn, c.werrno
	c.wbuf = nil
	if err == nil && errno != 0 {
		err = c.opError("write", errno)
	}
	return n, err
}

func (c *conn) write(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.wbuf[c.wn])), uintptr(len(c.wbuf)-c.wn))
		switch e {
		case 0:
			c.wn += int(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werrno = e
			return true
		}
	}
	return true
}

func (c *conn) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: errno}
}
