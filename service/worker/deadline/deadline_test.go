package deadline

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// tcpPair is a loopback TCP connection, both ends *net.TCPConn.
func tcpPair(t testing.TB) (dialed, accepted *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Accept()
	if err != nil {
		d.Close()
		t.Fatal(err)
	}
	return d.(*net.TCPConn), a.(*net.TCPConn)
}

// The conformance suite for net.Conn: reads and writes both ways, deadlines
// past, present, future and moving while reads and writes wait, closes
// under them, racing callers.
func TestConnConforms(t *testing.T) {
	nettest.TestConn(t, func() (net.Conn, net.Conn, func(), error) {
		d, a := tcpPair(t)
		c1, c2 := New(d), New(a)
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}

// A read after a deadline was cleared waits for good: the cleared deadline
// reaches the socket before the read, although no read ran under the one
// before it.
func TestClearedDeadlineNeverCutsAReadShort(t *testing.T) {
	d, a := tcpPair(t)
	c := New(a)
	defer c.Close()
	defer d.Close()
	if _, err := c.Write([]byte("x")); err != nil { // a call that hands the read side nothing
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	buf := make([]byte, 1)
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) { // now the socket has it
		t.Fatalf("read with nothing to read before the deadline: %v, want a timeout", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	_ = c.SetReadDeadline(time.Time{})
	go func() {
		time.Sleep(200 * time.Millisecond) // well past both deadlines and their margins
		_, _ = d.Write([]byte("y"))
	}()
	if n, err := c.Read(buf); err != nil || n != 1 || buf[0] != 'y' {
		t.Fatalf("read under no deadline: %d %q %v, want the byte written 200 ms later", n, buf[:n], err)
	}
}

// A deadline fires at or after the time set, never before.
func TestDeadlineNeverFiresEarly(t *testing.T) {
	d, a := tcpPair(t)
	c := New(a)
	defer c.Close()
	defer d.Close()
	buf := make([]byte, 1)
	for _, wait := range []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond} {
		at := time.Now().Add(wait)
		_ = c.SetReadDeadline(at)
		_ = c.SetReadDeadline(at) // set twice, as net/http may: the socket still gets it
		_, err := c.Read(buf)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read with nothing to read, deadline in %v: %v, want a timeout", wait, err)
		}
		if early := time.Until(at); early > 0 {
			t.Fatalf("deadline in %v fired %v early", wait, early)
		}
	}
}

// Once closed, setting a deadline fails as it does on the socket itself.
func TestDeadlineAfterCloseFails(t *testing.T) {
	d, a := tcpPair(t)
	defer d.Close()
	c := New(a)
	c.Close()
	if err := c.SetReadDeadline(time.Now().Add(time.Second)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("SetReadDeadline after Close: %v, want net.ErrClosed", err)
	}
	if err := c.SetDeadline(time.Time{}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("SetDeadline after Close: %v, want net.ErrClosed", err)
	}
}

// counting is a connection that counts the deadlines its socket gets.
type counting struct {
	*net.TCPConn
	reads, writes *atomic.Int64
}

func (c counting) SetReadDeadline(t time.Time) error {
	c.reads.Add(1)
	return c.TCPConn.SetReadDeadline(t)
}

func (c counting) SetWriteDeadline(t time.Time) error {
	c.writes.Add(1)
	return c.TCPConn.SetWriteDeadline(t)
}

// countingListener hands out counting connections, wrapped in Conn or not.
type countingListener struct {
	net.Listener
	wrap          bool
	reads, writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := counting{c.(*net.TCPConn), &l.reads, &l.writes}
	if l.wrap {
		return New(cc), nil
	}
	return cc, nil
}

// serveKeepAlive answers n requests on one connection from a server with
// every timeout the worker sets, and returns the deadlines its socket got.
func serveKeepAlive(t *testing.T, wrap bool, n int) (reads, writes int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: l, wrap: wrap}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "Hello World!\n")
		}),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute,
	}
	go func() { _ = srv.Serve(cl) }()
	defer srv.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := range n {
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "Hello") {
			t.Fatalf("response %d: %d %q", i, resp.StatusCode, body)
		}
	}
	return cl.reads.Load(), cl.writes.Load()
}

// Under net/http with the worker's four timeouts, keep-alive requests hand
// their socket half the read deadlines they set and almost none of the
// write deadlines.
func TestKeepAliveRequestsSpareTheSocket(t *testing.T) {
	const n = 200
	r0, w0 := serveKeepAlive(t, false, n)
	r1, w1 := serveKeepAlive(t, true, n)
	t.Logf("deadlines the socket got for %d requests: read %d, write %d unwrapped; read %d, write %d wrapped", n, r0, w0, r1, w1)
	// The last request's calls may still be on their way as they are counted.
	if r0 < 5*n-10 || w0 < 2*n-10 {
		t.Fatalf("unwrapped, the socket got %d read and %d write deadlines: net/http no longer sets what this test measures", r0, w0)
	}
	if r1 > r0*6/10 {
		t.Errorf("wrapped, the socket got %d read deadlines, unwrapped %d: want at most 60%%", r1, r0)
	}
	if w1 > n/10 {
		t.Errorf("wrapped, the socket got %d write deadlines for %d requests: want at most one in ten", w1, n)
	}
}
