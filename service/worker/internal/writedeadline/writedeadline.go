// Package writedeadline keeps net/http's per-request write deadline from
// reaching the runtime's timers on every request.
//
// With Server.WriteTimeout set, net/http calls SetWriteDeadline(now +
// WriteTimeout) after reading each request and SetWriteDeadline(zero) after
// writing its response. On a *net.TCPConn each call takes the descriptor's
// poller lock and adds, moves or deletes its write timer: two timer
// operations per request on a keep-alive connection, about 0.25 µs in a
// tight loop on the 2-CPU test machine and 0.4 µs inside a worker under
// load, where nearly every response is written long before its deadline.
//
// The conns here make the socket's deadline coarse instead, the way a
// kernel timer wheel trades precision for cost:
//   - A deadline that moves later is armed Slack past the time asked, and a
//     later request's deadline that still falls at or before the armed one
//     (and within Slack of it) leaves the socket alone. Under load, one
//     timer operation per Slack per connection replaces two per request.
//   - A deadline that moves earlier than the armed one by more than Slack is
//     armed exactly (a handler shortening its own deadline through
//     http.ResponseController).
//   - Clearing the deadline is remembered, not done: the armed deadline
//     stays on the socket until the next Write or ReadFrom, which clears it
//     first. net/http writes nothing between a response and the next
//     request's read, which sets a deadline again, so on the keep-alive path
//     the clear costs nothing; a handler that clears its deadline to stream
//     longer than WriteTimeout still gets no deadline on its writes.
//   - SetDeadline (both directions; net/http's Hijack clears with it) is
//     exact, as are the read deadlines.
//
// So a write times out no earlier than asked and at most Slack later. The
// cost is one atomic load per Write, and one uncontended lock per
// SetWriteDeadline.
package writedeadline

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Slack is the lateness allowed for a write timeout of d: an eighth of d,
// and at most a second.
func Slack(d time.Duration) time.Duration { return min(d/8, time.Second) }

// Wrap returns l with every connection it accepts wrapped by Conn; slack 0
// or less returns l as it is.
func Wrap(l net.Listener, slack time.Duration) net.Listener {
	if slack <= 0 {
		return l
	}
	return &listener{Listener: l, slack: slack}
}

type listener struct {
	net.Listener
	slack time.Duration
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	return Conn(c, l.slack), nil
}

// Unwrap returns the wrapped listener (package exclusive finds its wait
// through it).
func (l *listener) Unwrap() net.Listener { return l.Listener }

// Conn returns c with a coarse write deadline: a write times out no earlier
// than the deadline set and at most slack after it.
func Conn(c net.Conn, slack time.Duration) net.Conn {
	return &conn{Conn: c, slack: slack}
}

// conn is a net.Conn whose SetWriteDeadline is coarse (package comment). It
// forwards CloseWrite and ReadFrom, which net/http looks for on a
// connection (a half-close before closing; sendfile and splice).
type conn struct {
	net.Conn
	slack time.Duration

	mu    sync.Mutex
	armed time.Time // the write deadline on the socket; zero: none
	// clear: a caller cleared the write deadline while one is armed; the
	// next Write or ReadFrom clears the socket's first.
	clear atomic.Bool
}

// SetWriteDeadline sets the deadline for writes, coarsely (package comment).
func (c *conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.IsZero() {
		c.clear.Store(!c.armed.IsZero())
		return nil
	}
	c.clear.Store(false)
	if !c.armed.IsZero() && !c.armed.Before(t) && !c.armed.After(t.Add(c.slack)) {
		return nil // the armed deadline is no earlier than t and at most slack later
	}
	at := t
	if c.armed.IsZero() || c.armed.Before(t) {
		at = t.Add(c.slack) // later: leave room for the next requests'
	}
	return c.arm(at)
}

// SetDeadline sets both deadlines exactly.
func (c *conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clear.Store(false)
	err := c.Conn.SetDeadline(t)
	if err == nil {
		c.armed = t
	}
	return err
}

// arm puts t on the socket; c.mu is held.
func (c *conn) arm(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	c.armed = t
	return nil
}

// cleared applies a clear the writes have not seen yet.
func (c *conn) cleared() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.clear.Load() {
		return nil
	}
	c.clear.Store(false)
	return c.arm(time.Time{})
}

func (c *conn) Write(b []byte) (int, error) {
	if c.clear.Load() {
		if err := c.cleared(); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(b)
}

// ReadFrom is the inner connection's (sendfile, splice), after a pending
// clear.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if c.clear.Load() {
		if err := c.cleared(); err != nil {
			return 0, err
		}
	}
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{c}, r)
}

// writerOnly hides conn's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }

// CloseWrite half-closes the inner connection when it can.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return &net.OpError{Op: "close", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: errNoHalfClose}
}

var errNoHalfClose = errors.New("the connection cannot half-close")

// Unwrap returns the inner connection.
func (c *conn) Unwrap() net.Conn { return c.Conn }
