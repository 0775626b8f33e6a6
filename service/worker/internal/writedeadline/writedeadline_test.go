package writedeadline

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// pipe is a loopback TCP connection with both ends coarse (50 ms of slack).
func pipe() (c1, c2 net.Conn, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, err
	}
	defer l.Close()
	d, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return nil, nil, nil, err
	}
	a, err := l.Accept()
	if err != nil {
		d.Close()
		return nil, nil, nil, err
	}
	c1, c2 = Conn(d, 50*time.Millisecond), Conn(a, 50*time.Millisecond)
	return c1, c2, func() { c1.Close(); c2.Close() }, nil
}

// The conformance suite for net.Conn implementations: reads and writes in
// both directions, deadlines (past, future, moving, concurrent), closes
// during reads and writes, and racing callers.
func TestConnConforms(t *testing.T) {
	nettest.TestConn(t, pipe)
}

// counting is a net.Conn that records the write deadlines put on it.
type counting struct {
	net.Conn
	mu     sync.Mutex
	sets   []time.Time
	writes int
}

func (c *counting) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sets = append(c.sets, t)
	return nil
}

func (c *counting) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	return len(b), nil
}

func (c *counting) calls() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.sets...)
}

// net/http's pattern on a keep-alive connection: a deadline after each
// request is read, the response, a clear. Within the slack the socket's
// deadline is set once; past it, once more.
func TestRequestsWithinTheSlackArmOnce(t *testing.T) {
	inner := &counting{}
	c := Conn(inner, time.Second)
	t0 := time.Unix(1_000_000, 0)
	const timeout = time.Minute
	for i := range 1000 { // 1000 requests within 0.9 s
		now := t0.Add(time.Duration(i) * 900 * time.Microsecond)
		if err := c.SetWriteDeadline(now.Add(timeout)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		if err := c.SetWriteDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	sets := inner.calls()
	if len(sets) != 1 || !sets[0].Equal(t0.Add(timeout+time.Second)) {
		t.Fatalf("the socket's write deadline was set %d times (%v), want once, to the first request's deadline plus the slack", len(sets), sets)
	}
	// A request 1.5 s later: its deadline is past the armed one.
	later := t0.Add(1500 * time.Millisecond).Add(timeout)
	if err := c.SetWriteDeadline(later); err != nil {
		t.Fatal(err)
	}
	if sets := inner.calls(); len(sets) != 2 || !sets[1].Equal(later.Add(time.Second)) {
		t.Fatalf("after the slack: sets %v, want a second one at %v", sets, later.Add(time.Second))
	}
}

// A deadline moved earlier than the armed one by more than the slack is
// armed exactly; a clear reaches the socket before the next write.
func TestEarlierDeadlinesAreExactAndClearsPrecedeWrites(t *testing.T) {
	inner := &counting{}
	c := Conn(inner, time.Second)
	t0 := time.Unix(1_000_000, 0)
	_ = c.SetWriteDeadline(t0.Add(time.Minute))
	short := t0.Add(100 * time.Millisecond)
	_ = c.SetWriteDeadline(short)
	if sets := inner.calls(); len(sets) != 2 || !sets[1].Equal(short) {
		t.Fatalf("sets %v: want the earlier deadline armed exactly (%v)", sets, short)
	}
	_ = c.SetWriteDeadline(time.Time{})
	if n := len(inner.calls()); n != 2 {
		t.Fatalf("a clear reached the socket before any write (%d sets)", n)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	sets := inner.calls()
	if len(sets) != 3 || !sets[2].IsZero() {
		t.Fatalf("sets %v: want the clear applied before the write", sets)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if n := len(inner.calls()); n != 3 {
		t.Fatalf("a second write cleared again (%d sets)", n)
	}
}

// A write that cannot complete (the peer reads nothing) fails with
// os.ErrDeadlineExceeded no earlier than the deadline and, with room for a
// busy machine, not long after deadline plus slack.
func TestAStuckWriteTimesOutWithinTheSlack(t *testing.T) {
	c1, c2, stop, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_ = c2 // never read
	start := time.Now()
	deadline := start.Add(200 * time.Millisecond)
	if err := c1.SetWriteDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for {
		_, err = c1.Write(buf)
		if err != nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("writes to a peer that reads nothing never failed")
		}
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the stuck write failed with %v, want os.ErrDeadlineExceeded", err)
	}
	if at := time.Now(); at.Before(deadline) {
		t.Fatalf("the write timed out %v before its deadline", deadline.Sub(at))
	}
}

// Under net/http: WriteTimeout still ends a response the client does not
// read, and a handler that clears its deadline through
// http.ResponseController streams past WriteTimeout.
func TestUnderNetHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 300 * time.Millisecond
	big := strings.Repeat("x", 64<<20)
	srv := &http.Server{
		WriteTimeout: timeout,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/big":
				_, _ = io.WriteString(w, big)
			case "/stream":
				if err := http.NewResponseController(w).SetWriteDeadline(time.Time{}); err != nil {
					t.Errorf("clearing the deadline: %v", err)
				}
				for range 3 {
					time.Sleep(timeout / 2)
					_, _ = io.WriteString(w, "tick\n")
					_ = http.NewResponseController(w).Flush()
				}
			default:
				_, _ = io.WriteString(w, "ok")
			}
		}),
	}
	go func() { _ = srv.Serve(Wrap(ln, Slack(timeout))) }()
	defer srv.Close()
	addr := ln.Addr().String()

	// Keep-alive requests, then the stream on the same connection: the
	// clear after each response must not leave a deadline on the stream.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for range 3 {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if _, err := io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || strings.Count(string(body), "tick") != 3 {
		t.Fatalf("a stream with its deadline cleared, lasting %v against a WriteTimeout of %v: got %q, %v", 3*timeout/2, timeout, body, err)
	}

	// A client that reads nothing of 64 MiB: the server gives up.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := io.WriteString(c2, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(timeout + Slack(timeout) + 200*time.Millisecond)
	// The server has closed the connection: reading drains what the
	// socket buffers held, then ends.
	_ = c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, c2)
	if err != nil {
		t.Fatalf("reading the abandoned response: %v (after %d bytes), want the server to have closed it", err, n)
	}
	if n >= int64(len(big)) {
		t.Fatalf("the client got all %d bytes: WriteTimeout did not end the response", n)
	}
}
