// Package deadline hands a connection's deadlines to its socket only when
// I/O runs under them.
//
// net/http moves a connection's deadlines many times per request. With the
// worker's four timeouts set (CLUSTERAPP_READ_HEADER_TIMEOUT,
// CLUSTERAPP_READ_TIMEOUT, CLUSTERAPP_WRITE_TIMEOUT, CLUSTERAPP_IDLE_TIMEOUT)
// a keep-alive request makes eight calls: the read deadline goes to idle,
// to the headers' bound, to the whole request's, to none for the
// background read that watches for the client going away, to a past one
// that stops that read, and to none again; the write deadline is set before
// the handler and cleared after it. Each call takes the descriptor's lock,
// reads the clock twice when it sets a time (time.Until, then the
// runtime's nanotime) and moves or stops a runtime timer: the eight took
// 680 ns in a tight loop on the 2-CPU KVM guest of docs/benchmarks.md,
// against 320 ns for the seven of bare net/http, which sets one timeout,
// and clock reads (about 23 ns each there) were the largest single part of
// the handler stack's gap to bare net/http (issue 12). Handed on as below,
// a keep-alive request cost about 5% less CPU (docs/benchmarks.md, notes,
// "The handler stack made cheaper, and measured at once").
//
// Most of those deadlines bound nothing: a request that arrives in one
// segment is read whole by the wait for its first bytes, so the headers'
// and the whole request's deadlines are replaced before any read runs
// under them; no write runs between the response and the next request, so
// clearing the write deadline is replaced by the next request's before it
// matters. Conn records each deadline and hands it to the socket when a
// Read, Write or ReadFrom is about to run, and at once when one is running
// (a deadline applies to pending I/O too: net/http stops its background
// read with a past deadline while the read waits).
//
// A deadline later than the socket's goes to the socket a little later
// still, by a sixteenth of how far away it is (at most a second): the write
// deadline of a keep-alive connection, moved later by every request, then
// reaches the socket about once a second instead of once a request. A
// deadline so fires up to that margin late and never early; no deadline
// ("none", the zero time) is always handed on before I/O runs under it, so
// a read that must wait for good is never cut short by an older deadline.
package deadline

import (
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// maxMargin bounds how late a deadline may fire: a second on the worker's
// timeouts of 5 s to minutes.
const maxMargin = time.Second

// loaded is when the package was loaded: a deadline before it has passed.
var loaded = time.Now()

// marginShare is the margin as a share of the time left to a deadline: a
// deadline 160 ms away fires up to 10 ms late.
const marginShare = 16

// TCP is what Conn wraps: a stream connection with the half-close and the
// ReadFrom (sendfile, splice) of a *net.TCPConn.
type TCP interface {
	net.Conn
	io.ReaderFrom
	CloseWrite() error
}

// Conn is a TCP connection whose deadlines reach its socket only when I/O
// needs them. Everything but the deadlines, Read, Write, ReadFrom and Close
// is the wrapped connection's own.
type Conn struct {
	TCP
	read, write side
	closed      atomic.Bool
}

// New wraps c. Its socket must have no deadline yet (a connection just
// accepted).
func New(c TCP) *Conn { return &Conn{TCP: c} }

// Read reads under the read deadline last set.
func (c *Conn) Read(b []byte) (int, error) {
	c.read.enter(c.TCP.SetReadDeadline)
	n, err := c.TCP.Read(b)
	c.read.leave()
	return n, err
}

// Write writes under the write deadline last set.
func (c *Conn) Write(b []byte) (int, error) {
	c.write.enter(c.TCP.SetWriteDeadline)
	n, err := c.TCP.Write(b)
	c.write.leave()
	return n, err
}

// ReadFrom writes what r holds under the write deadline last set, with the
// wrapped connection's sendfile or splice where it has one.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	c.write.enter(c.TCP.SetWriteDeadline)
	n, err := c.TCP.ReadFrom(r)
	c.write.leave()
	return n, err
}

// SetReadDeadline sets the deadline of reads to come and of a read in
// progress. The socket gets it when a read runs (at once if one is
// running). Once the connection is closed, the error is the socket's.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.TCP.SetReadDeadline(t)
	}
	return c.read.set(t, c.TCP.SetReadDeadline)
}

// SetWriteDeadline is SetReadDeadline for writes.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.TCP.SetWriteDeadline(t)
	}
	return c.write.set(t, c.TCP.SetWriteDeadline)
}

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// Close closes the connection; deadlines set after it report the socket's
// error, as they would unwrapped.
func (c *Conn) Close() error {
	c.closed.Store(true)
	return c.TCP.Close()
}

// side is one direction's deadline: the one last set (want) and the one the
// socket has (has, up to margin later than a want it still serves; unknown
// after a failed hand-over), both as instants (see instant).
//
// Setting a deadline takes no lock: net/http sets eight a request, and a
// lock each cost more than the rest of the set. It stores want, then looks
// at busy; a call stores busy, then loads want, under the lock. The atomics
// are sequentially consistent, so of a set and a call that race, the call
// sees the new want or the set sees the call (and hands want on itself).
type side struct {
	want atomic.Int64
	// busy counts calls in progress in this direction: a deadline set
	// meanwhile must reach the socket at once to bound them.
	busy atomic.Int32

	mu      sync.Mutex // guards the rest, and hands deadlines on one at a time
	has     int64
	margin  int64
	unknown bool
}

// enter readies the socket for a call in this direction.
func (s *side) enter(apply func(time.Time) error) {
	s.mu.Lock()
	s.busy.Add(1)
	if want := s.want.Load(); !s.serves(want) {
		// A failure is a closed connection: the call reports it.
		_ = s.forward(want, apply)
	}
	s.mu.Unlock()
}

func (s *side) leave() { s.busy.Add(-1) }

// set records t, and hands it on at once when a call is in progress.
func (s *side) set(t time.Time, apply func(time.Time) error) error {
	s.want.Store(instant(t))
	if s.busy.Load() == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if want := s.want.Load(); !s.serves(want) {
		return s.forward(want, apply)
	}
	return nil
}

// serves reports whether the socket's deadline stands for want: both none,
// or the socket's no earlier and at most the margin later.
func (s *side) serves(want int64) bool {
	if s.unknown {
		return false
	}
	if want == none || s.has == none {
		return want == s.has
	}
	late := s.has - want
	return late >= 0 && late <= s.margin
}

// forward hands want to the socket, plus a margin when it moves the
// socket's deadline later: a deadline brought nearer, or set where the
// socket has none or a past one, leaves no older one to outlast, and
// handing it on exact spares a clock read (net/http's past deadline that
// stops its background read, and the idle deadline after it, a request).
// After a failure (the connection closed meanwhile) the socket's deadline
// is unknown, so the next call tries again; the I/O itself then reports
// the closed connection.
func (s *side) forward(want int64, apply func(time.Time) error) error {
	at, margin := want, int64(0)
	if want != none && s.has != none && s.has > 0 && !s.unknown && want > s.has {
		if left := time.Until(timeOf(want)); left > 0 {
			margin = int64(min(left/marginShare, maxMargin))
			at += margin
		}
	}
	if err := apply(timeOf(at)); err != nil {
		s.unknown = true
		return err
	}
	s.has, s.margin, s.unknown = at, margin, false
	return nil
}

// none is the instant of the zero time: no deadline.
const none = math.MinInt64

// instant is t as nanoseconds since the package was loaded, read on the
// monotonic clock when t has a reading of it (every deadline net/http
// sets): one word, stored and compared atomically. A negative instant has
// passed (net/http's "a long time ago" among them) without a look at the
// clock. The zero time is none; instants beyond ±292 years stop there.
func instant(t time.Time) int64 {
	if t.IsZero() {
		return none
	}
	return max(int64(t.Sub(loaded)), none+1)
}

// timeOf is the time of an instant, with a monotonic reading.
func timeOf(i int64) time.Time {
	if i == none {
		return time.Time{}
	}
	return loaded.Add(time.Duration(i))
}
