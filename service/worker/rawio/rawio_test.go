package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// pipe is a loopback TCP connection with both ends raw.
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
	wrap := func(c net.Conn) *conn {
		tc := c.(*net.TCPConn)
		rc, err := tc.SyscallConn()
		if err != nil {
			panic(err)
		}
		return newConn(tc, rc)
	}
	c1, c2 = wrap(d), wrap(a)
	return c1, c2, func() { c1.Close(); c2.Close() }, nil
}

// The conformance suite for net.Conn implementations: reads and writes in
// both directions, deadlines (past, future, moving, concurrent), closes
// during reads and writes, and racing callers.
func TestConnConforms(t *testing.T) {
	nettest.TestConn(t, pipe)
}

func TestReadsEOFAndWritesPastTheSocketBuffer(t *testing.T) {
	c1, c2, stop, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// 8 MiB is far more than the socket buffers hold: Write waits for room
	// (EAGAIN, then the poller) as often as it takes.
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<19)
	var wn int
	var werr error
	var wg sync.WaitGroup
	wg.Go(func() {
		wn, werr = c1.Write(want)
		c1.(*conn).CloseWrite()
	})
	got, err := io.ReadAll(c2)
	wg.Wait()
	if werr != nil || wn != len(want) {
		t.Fatalf("write: %d of %d, %v", wn, len(want), werr)
	}
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (want %d), equal %v, err %v", len(got), len(want), bytes.Equal(got, want), err)
	}
	if n, err := c2.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read after the end: %d, %v; want 0, io.EOF", n, err)
	}
}

func TestDeadlineIsATimeout(t *testing.T) {
	_, c2, stop, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c2.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err = c2.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v; want a timeout", err)
	}
}

func TestReadOfAResetConnectionSaysSo(t *testing.T) {
	c1, c2, stop, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c1.(*conn).SetLinger(0) // close sends RST
	c1.Close()
	_, err = c2.Read(make([]byte, 1))
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" || oe.Source == nil || oe.Addr == nil {
		t.Fatalf("read of a reset connection: %#v; want a *net.OpError naming the addresses", err)
	}
}

// Wrap makes accepted connections raw only while the process runs one P,
// and net/http serves through them.
func TestWrapServesHTTPAtOneP(t *testing.T) {
	for _, procs := range []int{1, 2} {
		prev := runtime.GOMAXPROCS(procs)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		raw := make(chan bool, 1)
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "hello")
			}),
			ConnState: func(c net.Conn, s http.ConnState) {
				if s == http.StateNew {
					_, ok := c.(*conn)
					raw <- ok
				}
			},
		}
		go srv.Serve(Wrap(l))
		resp, err := http.Get("http://" + l.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "hello" {
			t.Fatalf("GOMAXPROCS=%d: body %q, %v", procs, body, err)
		}
		if got := <-raw; got != (procs == 1) {
			t.Errorf("GOMAXPROCS=%d: raw connection %v, want %v", procs, got, procs == 1)
		}
		srv.Close()
		runtime.GOMAXPROCS(prev)
	}
}
