// Package exclusive makes a worker's wait for new connections on the shared
// listening socket an exclusive one, so that one connection wakes one worker.
//
// Every worker of the pool holds the same listening socket, and Go's network
// poller registers it in the worker's epoll set like any other descriptor:
// EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET. The kernel then runs every worker's
// epoll callback for each new connection and wakes every worker whose poller
// thread is asleep in epoll_wait; all of them call accept4 and all but one
// get EAGAIN. With a new connection per request that herd grows with the
// pool: about 1.7 thread wake-ups per worker per connection (docs/benchmarks.md).
//
// EPOLLEXCLUSIVE (Linux 4.5) is the kernel's answer, and what nginx uses:
// the socket's wake-up walks the exclusive entries in order and stops at the
// first epoll set that has a thread waiting in it. A worker that is busy
// (no thread asleep in its poller) is passed over, though the socket is
// still put on its ready list, so the next idle worker is woken: busy
// workers do not take connections from idle ones. A thread that is stopped
// (SIGSTOP, the cgroup freezer) leaves the epoll wait queue to take the
// signal, so a frozen worker is passed over too.
//
// Go offers no way to ask for it, so Register changes the poller's own
// registration: it finds the runtime's epoll set and the entry for the
// listener's descriptor in /proc/self/fdinfo (which shows each entry's
// events and data, the runtime's pointer to its poll descriptor), deletes
// the entry and adds it again with the same data and EPOLLIN|EPOLLET|
// EPOLLEXCLUSIVE. The runtime reads only the data and EPOLLIN back, so its
// poller works as before, and it deletes the entry itself when the listener
// is closed. When anything is not as expected (no fdinfo, no single epoll
// set holding the descriptor, a kernel without EPOLLEXCLUSIVE) the
// registration is left, or put back, as Go made it: the herd costs CPU time,
// never a connection.
//
// An exclusive waiter that does not accept would swallow the wake-up meant
// for a worker that would: a worker that holds back its accepts (the
// balance gate and its step back, the open-file limit) calls Pause first, which removes the
// entry, and Resume when it accepts again, which adds it back (and the
// kernel reports a connection that came in between at once).
//
// A worker is passed over only while no thread of it waits in its poller,
// and a worker with a P more than its admission slots (the spare P that
// keeps /healthz and rejections on time while every slot computes) always
// has one: it would take connections only to queue them behind its busy
// slots while another worker idles. Hold takes the entry out for that
// reason, independently of Pause: the listener is in the wait while
// neither holds it out, and Accept's own Resume leaves a Hold alone.
package exclusive

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/clusterapp/clusterapp/service/worker/internal/acceptq"
	"golang.org/x/sys/unix"
)

// events is the exclusive registration: readable, edge-triggered, as Go's
// own but without EPOLLOUT and EPOLLRDHUP, which a listening socket never
// reports and EPOLLEXCLUSIVE does not allow with EPOLLRDHUP.
const events = unix.EPOLLIN | unix.EPOLLET | unix.EPOLLEXCLUSIVE

// Listener is a listener whose poller entry is exclusive.
type Listener struct {
	net.Listener
	rc   syscall.RawConn
	epfd int
	data uint64

	mu     sync.Mutex
	paused bool // Pause: a wrapper holds back its accepts
	held   bool // Hold: every admission slot of the worker is taken
}

// Register makes l's poller entry exclusive and returns l wrapped so that
// Pause and Resume can take it out of the wait and put it back. l must be a
// listener created by package net (a *net.TCPListener or *net.UnixListener)
// that nothing has accepted on yet.
func Register(l net.Listener) (*Listener, error) {
	sc, ok := l.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("exclusive: %T has no descriptor", l)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("exclusive: %w", err)
	}
	x := &Listener{Listener: l, rc: rc}
	var regErr error
	err = rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if regErr = unix.Fstat(int(fd), &st); regErr != nil {
			return
		}
		var orig uint32 // Go's events, put back if the exclusive add fails
		x.epfd, x.data, orig, regErr = find(int(fd), st.Ino)
		if regErr != nil {
			return
		}
		if regErr = ctl(x.epfd, unix.EPOLL_CTL_DEL, int(fd), 0, 0); regErr != nil {
			regErr = fmt.Errorf("exclusive: remove the poller's entry: %w", regErr)
			return
		}
		if regErr = ctl(x.epfd, unix.EPOLL_CTL_ADD, int(fd), events, x.data); regErr != nil {
			if err := ctl(x.epfd, unix.EPOLL_CTL_ADD, int(fd), orig, x.data); err != nil {
				// Cannot happen short of a kernel out of memory: the
				// entry was there a moment ago. Accepts would hang.
				panic(fmt.Sprintf("exclusive: put back the poller's entry for fd %d: %v", fd, err))
			}
			regErr = fmt.Errorf("exclusive: the kernel refused EPOLLEXCLUSIVE (Linux 4.5 or later): %w", regErr)
		}
	})
	if err == nil {
		err = regErr
	}
	if err != nil {
		return nil, err
	}
	return x, nil
}

// Accept resumes the wait if it was paused, then accepts. A resume that
// fails is returned as Accept's error rather than leaving Accept parked
// with nothing to wake it: net/http's Serve then returns it, and the
// worker exits for systemd to restart it.
func (x *Listener) Accept() (net.Conn, error) {
	if err := x.Resume(); err != nil {
		return nil, err
	}
	return x.Listener.Accept()
}

// Pauser is a listener that can leave the socket's wait while nothing
// accepts on it (a *Listener, or a test's stand-in).
type Pauser interface {
	Pause() error
	Resume() error
}

// Pause pauses the first Pauser found in l or under it (through the
// wrappers' Unwrap() net.Listener); a listener without one has nothing to
// pause. Wrappers that hold accepts back call it before they wait.
func Pause(l net.Listener) error {
	if p := under(l); p != nil {
		return p.Pause()
	}
	return nil
}

// Resume resumes what Pause paused.
func Resume(l net.Listener) error {
	if p := under(l); p != nil {
		return p.Resume()
	}
	return nil
}

func under(l net.Listener) Pauser {
	p, _ := wrapped[Pauser](l)
	return p
}

// wrapped returns the first T found in l or under it, through the wrappers'
// Unwrap() net.Listener.
func wrapped[T any](l net.Listener) (T, bool) {
	for l != nil {
		if t, ok := l.(T); ok {
			return t, true
		}
		u, ok := l.(interface{ Unwrap() net.Listener })
		if !ok {
			break
		}
		l = u.Unwrap()
	}
	var zero T
	return zero, false
}

// Holder is a listener that can leave the socket's wait while its worker's
// admission slots are all taken (a *Listener, or a test's stand-in).
type Holder interface {
	Hold(out bool) error
}

// Hold holds the first Holder found in l or under it out of the socket's
// wait (out) or lets it back; a listener without one has nothing to hold.
func Hold(l net.Listener, out bool) error {
	if h, ok := wrapped[Holder](l); ok {
		return h.Hold(out)
	}
	return nil
}

// Queued reports how many connections wait in the accept queue of the
// socket under l (the first *Listener found through the wrappers' Unwrap),
// shared by every worker of the pool: for a listening socket, TCP_INFO's
// tcpi_unacked is the accept queue's length (what `ss -lnt` shows as
// Recv-Q; package acceptq). ok is false when there is no *Listener under l or the socket is
// not TCP: a caller that would pause must not, since nothing could tell it
// that connections wait.
func Queued(l net.Listener) (n int, ok bool) {
	x, _ := under(l).(*Listener)
	if x == nil {
		return 0, false
	}
	n32, _, err := acceptq.Read(x.rc)
	if err != nil {
		return 0, false
	}
	return int(n32), true
}

// Pause takes the listener out of the socket's wait: new connections wake
// the other workers. Accept must not be waiting meanwhile.
func (x *Listener) Pause() error { return x.set(&x.paused, true) }

// Resume puts the listener back into the wait, unless Hold keeps it out; a
// connection that is already waiting in the backlog is reported to this
// worker's poller at once.
func (x *Listener) Resume() error { return x.set(&x.paused, false) }

// Hold takes the listener out of the socket's wait while the worker's
// admission slots are all taken (out), or lets it back unless Pause keeps
// it out. Unlike Pause it may come while Accept waits: Accept stays parked,
// and the connections that come meanwhile wake the other workers, until
// Hold(false) adds the entry back and the kernel reports them here too.
func (x *Listener) Hold(out bool) error { return x.set(&x.held, out) }

// set sets one of the reasons (x.paused or x.held) to v, and the poller's
// entry to match: out of the wait while either holds.
func (x *Listener) set(reason *bool, v bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if *reason == v {
		return nil
	}
	was := x.paused || x.held
	old := *reason
	*reason = v
	if out := x.paused || x.held; out != was {
		var opErr error
		// Control holds the descriptor open: a Close cannot free the number
		// (and the runtime reuse it) between the check and the epoll_ctl.
		err := x.rc.Control(func(fd uintptr) {
			if out {
				opErr = ctl(x.epfd, unix.EPOLL_CTL_DEL, int(fd), 0, 0)
			} else {
				opErr = ctl(x.epfd, unix.EPOLL_CTL_ADD, int(fd), events, x.data)
			}
		})
		if err == nil {
			err = opErr
		}
		if err != nil {
			*reason = old
			return fmt.Errorf("exclusive: %s: %w", map[bool]string{true: "leave the wait", false: "rejoin the wait"}[out], err)
		}
	}
	return nil
}

func ctl(epfd, op, fd int, ev uint32, data uint64) error {
	e := unix.EpollEvent{Events: ev, Fd: int32(uint32(data)), Pad: int32(uint32(data >> 32))}
	return unix.EpollCtl(epfd, op, fd, &e)
}

// errNotFound: no epoll set of this process holds the descriptor.
var errNotFound = errors.New("exclusive: no epoll set of this process holds the listener")

// find returns the epoll set holding fd (the socket with inode ino) and the
// entry's data and events, from /proc/self/fdinfo.
func find(fd int, ino uint64) (epfd int, data uint64, ev uint32, err error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, 0, 0, fmt.Errorf("exclusive: %w", err)
	}
	found := 0
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || target != "anon_inode:[eventpoll]" {
			continue
		}
		d, v, ok, err := entry(n, fd, ino)
		if err != nil {
			return 0, 0, 0, err
		}
		if ok {
			epfd, data, ev = n, d, v
			found++
		}
	}
	switch found {
	case 0:
		return 0, 0, 0, errNotFound
	case 1:
		return epfd, data, ev, nil
	default:
		return 0, 0, 0, fmt.Errorf("exclusive: %d epoll sets hold the listener, expected the runtime's alone", found)
	}
}

// entry reads one epoll set's fdinfo, whose entries are lines like
// "tfd:        5 events: 8000201d data: 3fceba0147000002  pos:0 ino:a9958b sdev:9"
// (fs/eventpoll.c, ep_show_fdinfo; the numbers but tfd in hexadecimal), and
// returns the data and events of the entry for fd, the socket with inode ino.
func entry(epfd, fd int, ino uint64) (data uint64, ev uint32, ok bool, err error) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(epfd))
	if err != nil {
		return 0, 0, false, fmt.Errorf("exclusive: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f, err := parseEntry(line)
		if err != nil {
			return 0, 0, false, fmt.Errorf("exclusive: fdinfo of epoll set %d: %w", epfd, err)
		}
		if f.tfd == fd && f.ino == ino {
			return f.data, f.events, true, nil
		}
	}
	return 0, 0, false, nil
}

// fdinfoEntry is one "tfd:" line; tfd is -1 for any other line.
type fdinfoEntry struct {
	tfd       int
	events    uint32
	data, ino uint64
}

func parseEntry(line string) (fdinfoEntry, error) {
	fields := strings.Fields(line)
	if len(fields) == 0 || fields[0] != "tfd:" {
		return fdinfoEntry{tfd: -1}, nil
	}
	// Pairs "key: value" and "key:value", in any order.
	kv := map[string]string{}
	for i := 0; i < len(fields); i++ {
		k, v, _ := strings.Cut(fields[i], ":")
		if v == "" && i+1 < len(fields) {
			i++
			v = fields[i]
		}
		kv[k] = v
	}
	tfd, err1 := strconv.Atoi(kv["tfd"])
	ev, err2 := strconv.ParseUint(kv["events"], 16, 32)
	data, err3 := strconv.ParseUint(kv["data"], 16, 64)
	ino, err4 := strconv.ParseUint(kv["ino"], 16, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fdinfoEntry{}, fmt.Errorf("unexpected entry %q: %w", line, err)
	}
	return fdinfoEntry{tfd: tfd, events: uint32(ev), data: data, ino: ino}, nil
}
