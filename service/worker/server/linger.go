package server

import (
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/deadline"
)

// lingerDelay bounds how long a connection the worker ends itself keeps
// reading after its last response: net/http's own wait in the same case
// (rstAvoidanceDelay), about a round trip around the planet.
const lingerDelay = 500 * time.Millisecond

// lingerMaxBytes bounds what is read and thrown away meanwhile, as
// net/http bounds the body it discards after a handler (256 KiB).
const lingerMaxBytes = 256 << 10

// lingerListener hands out connections that can end gracefully (lingerConn),
// their deadlines handed to the socket only when I/O runs under them
// (package deadline).
type lingerListener struct{ net.Listener }

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	// A TCP connection has what lingerConn needs: a half-close, and the
	// ReadFrom net/http uses to send a file with sendfile.
	if tc, ok := c.(deadline.TCP); ok && err == nil {
		return &lingerConn{Conn: deadline.New(tc)}, nil
	}
	return c, err
}

// Unwrap returns the wrapped listener (package exclusive finds its wait
// through it).
func (l lingerListener) Unwrap() net.Listener { return l.Listener }

// lingerConn is a connection the worker may end on its own, after a response
// carrying Connection: close (a keep-alive bound, a drain). net/http closes
// such a connection at once, with whatever the client pipelined behind that
// request still unread; the kernel then answers with a reset, and the
// client's kernel throws away the responses it had received but not yet
// read: a client pipelining past CLUSTERAPP_KEEPALIVE_REQUESTS lost up to
// a third of the 1000 answers it was owed. RFC 9112, section 9.6, says how
// to end it instead: close the writing side (the client reads every answer,
// then end of stream) and read on until the client closes, or for a short
// while.
type lingerConn struct {
	// The connection, by pointer rather than as an interface: every read,
	// write and deadline of every request goes through it.
	*deadline.Conn
	linger atomic.Bool // set by lingerOnClose, taken by the first Close
	// stats are the connection's numbers, set before net/http reports its
	// first state: its ConnState hook reads them (Server.rejected).
	stats *connStats
	// info is the connection's entry in the server's table, set by its
	// ConnState hook when the connection opens, before it is served.
	info *connInfo
}

// lingerOnClose makes the next Close graceful. Server.track calls it once
// the handler of a response carrying Connection: close has returned.
func (c *lingerConn) lingerOnClose() { c.linger.Store(true) }

// Close closes the connection; after lingerOnClose, first its writing side,
// then the rest once the client has closed too, or after lingerDelay.
// net/http calls it from the connection's own goroutine, as it does its own
// wait in the same case, so no other connection waits.
func (c *lingerConn) Close() error {
	if c.linger.Swap(false) {
		// Errors leave nothing to do: the connection is being closed.
		_ = c.CloseWrite()
		_ = c.SetReadDeadline(time.Now().Add(lingerDelay))
		_, _ = io.CopyN(io.Discard, c.Conn, lingerMaxBytes)
	}
	return c.Conn.Close()
}
