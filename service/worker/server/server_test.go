package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/probe"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

func newServer(t *testing.T, mod func(*Options), h http.Handler) (*Server, string) {
	t.Helper()
	l, _ := test.NewNullLogger()
	opts := Options{ReadHeaderTimeout: 5 * time.Second, ShutdownTimeout: 5 * time.Second, DrainIdleGrace: 200 * time.Millisecond, Log: logrus.NewEntry(l)}
	if mod != nil {
		mod(&opts)
	}
	if h == nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	}
	s := New(opts, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	s.Serve([]net.Listener{ln}, errc)
	s.SetReady()
	return s, ln.Addr().String()
}

// keepAliveLoad runs clients that each reuse one connection until stop is
// closed, then report how many requests succeeded and failed. A client whose
// connection was closed with Connection: close dials again, as wrk does; the
// dial fails once the listener is gone, which ends that client cleanly.
func keepAliveLoad(addr string, clients int, stop <-chan struct{}) (ok, failed *atomic.Int64, errs chan error, wait func()) {
	ok, failed = &atomic.Int64{}, &atomic.Int64{}
	errs = make(chan error, 100)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100000; i++ { // bounded
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					return // the listener is closed: the drain has begun
				}
				if !serveConn(conn, stop, ok, failed, errs) {
					return
				}
			}
		}()
	}
	return ok, failed, errs, wg.Wait
}

// serveConn sends requests on conn until the server closes it (true: dial
// again) or stop is closed (false).
func serveConn(conn net.Conn, stop <-chan struct{}, ok, failed *atomic.Int64, errs chan error) bool {
	defer conn.Close()
	br := bufio.NewReader(conn)
	for {
		select {
		case <-stop:
			return false
		default:
		}
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			failed.Add(1)
			errs <- err
			return false
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			failed.Add(1)
			select {
			case errs <- err:
			default:
			}
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ok.Add(1)
		if resp.Close {
			return true
		}
	}
}

func TestDrainLosesNoKeepAliveRequest(t *testing.T) {
	s, addr := newServer(t, nil, nil)
	stop := make(chan struct{})
	ok, failed, errs, wait := keepAliveLoad(addr, 16, stop)
	time.Sleep(200 * time.Millisecond)
	before := ok.Load()
	if err := s.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wait()
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed during the drain, first: %v", failed.Load(), <-errs)
	}
	if before == 0 || ok.Load() <= before {
		t.Fatalf("no load served around the drain: %d before, %d total", before, ok.Load())
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Fatal("the drained server still accepts connections")
	}
}

func TestDrainClosesIdleConnectionsAfterGrace(t *testing.T) {
	s, addr := newServer(t, func(o *Options) { o.DrainIdleGrace = 100 * time.Millisecond }, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.Close {
		t.Fatalf("first response: %v close=%v", err, resp.Close)
	}
	start := time.Now()
	if err := s.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	// the idle client was waited for the grace period, not the full timeout
	if d := time.Since(start); d >= 5*time.Second {
		t.Fatalf("drain took %v: the idle connection was not closed", d)
	}
	if s.Stats().Connections != 0 {
		t.Fatalf("%d connections left", s.Stats().Connections)
	}
}

func TestRequestDuringDrainGetsConnectionClose(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	s, addr := newServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		io.WriteString(w, "slow")
	}))
	conn, _ := net.Dial("tcp", addr)
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	drained := make(chan error)
	go func() { drained <- s.Drain(context.Background()) }()
	for !s.Stats().Draining {
		time.Sleep(time.Millisecond)
	}
	if s.Ready() {
		t.Fatal("Ready while draining")
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("in-flight request lost: %v", err)
	}
	if !resp.Close {
		t.Fatal("response during drain lacks Connection: close")
	}
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
}

func TestSecondSignalAbortsDrain(t *testing.T) {
	s, addr := newServer(t, func(o *Options) { o.DrainIdleGrace = time.Hour; o.ShutdownTimeout = time.Hour }, nil)
	conn, _ := net.Dial("tcp", addr) // an idle connection that would hold the drain for an hour
	defer conn.Close()
	for s.Stats().Connections == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Drain(ctx) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Drain = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return after cancellation")
	}
}

// Any jitter is safe: the largest int used to panic in rand.IntN (issue 11).
func TestRecycleJitterNeverPanics(t *testing.T) {
	for _, j := range []int{0, 1, math.MaxInt, -5} {
		s := New(Options{MaxRequests: 10, MaxRequestsJitter: j, ReadHeaderTimeout: time.Second, ShutdownTimeout: time.Second}, http.NotFoundHandler())
		if s.RecycleLimit() < 10 || (j <= 0 && s.RecycleLimit() != 10) {
			t.Errorf("jitter %d: recycle limit %d", j, s.RecycleLimit())
		}
	}
}

func TestRecycleAfterMaxRequests(t *testing.T) {
	s, addr := newServer(t, func(o *Options) { o.MaxRequests = 5; o.MaxRequestsJitter = 3 }, nil)
	if lim := s.RecycleLimit(); lim < 5 || lim > 8 {
		t.Fatalf("limit %d outside 5..8", lim)
	}
	client := &http.Client{}
	for i := uint64(1); i <= s.RecycleLimit(); i++ {
		select {
		case <-s.Recycle():
			t.Fatalf("recycled after %d requests, limit %d", i-1, s.RecycleLimit())
		default:
		}
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	select {
	case <-s.Recycle():
	case <-time.After(5 * time.Second):
		t.Fatal("not recycled after the limit")
	}
}

func TestProbeGoesThroughHandlerAndIsNotCounted(t *testing.T) {
	var seen atomic.Int32
	s, _ := newServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		if r.URL.Path != probe.Path {
			w.WriteHeader(404)
		}
	}))
	if err := s.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	if seen.Load() != 1 || s.Stats().Served != 0 {
		t.Fatalf("handler saw %d probes, served=%d", seen.Load(), s.Stats().Served)
	}
	s2, _ := newServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		io.WriteString(w, `{"error":"stuck: all 2 admission slots held"}`+"\n")
		io.WriteString(w, strings.Repeat("x", 4096)) // quoted up to a bound
	}))
	err := s2.Probe(context.Background())
	if err == nil || !strings.Contains(err.Error(), `answered 503: {"error":"stuck: all 2 admission slots held"}`) || len(err.Error()) > 1200 {
		t.Fatalf("probe of an unhealthy handler: %v", err)
	}
}

func TestSlowlorisDoesNotDelayOthers(t *testing.T) {
	_, addr := newServer(t, func(o *Options) { o.ReadHeaderTimeout = 300 * time.Millisecond }, nil)
	slow, _ := net.Dial("tcp", addr)
	defer slow.Close()
	io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n") // never finishes its headers
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// the slow client is cut off after the header timeout
	slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(slow); err != nil {
		t.Fatalf("slowloris connection not closed by the server: %v", err)
	}
}

// A client that stops reading a response is cut off once WriteTimeout has
// passed, even on a keep-alive connection that served requests before;
// others are served meanwhile.
func TestSlowReaderCutOffAfterWriteTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	big := strings.Repeat("x", 64<<20)
	_, addr := newServer(t, func(o *Options) { o.WriteTimeout = timeout }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			io.WriteString(w, big)
			return
		}
		io.WriteString(w, "ok")
	}))
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	br := bufio.NewReader(slow)
	for range 3 {
		io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	io.WriteString(slow, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n") // then reads nothing
	time.Sleep(timeout + 300*time.Millisecond)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("another client while one stalls: %v", err)
	}
	resp.Body.Close()
	slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, br)
	if err != nil {
		t.Fatalf("the stalled response was not ended by the server: %v", err)
	}
	if n >= int64(len(big)) {
		t.Fatalf("the stalled client got all %d bytes: WriteTimeout did not end the response", n)
	}
}

func TestHugeHeaderRejected(t *testing.T) {
	_, addr := newServer(t, func(o *Options) { o.MaxHeaderBytes = 8 << 10 }, nil)
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 1<<20))
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("1 MiB header: %d, want 431", resp.StatusCode)
		}
	}
	// either 431 or a reset while still sending: the next client is served
	resp, err = http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func TestKeepAliveRequestsBound(t *testing.T) {
	_, addr := newServer(t, func(o *Options) { o.KeepAliveRequests = 3 }, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for i := 1; i <= 3; i++ {
		io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.Close != (i == 3) {
			t.Fatalf("request %d: Connection: close = %v, want it on the 3rd only", i, resp.Close)
		}
	}
}

// A connection whose response Rebalance marks ends after it, with
// Connection: close, so its client reconnects; the others stay open.
func TestRebalanceEndsTheConnectionItMarks(t *testing.T) {
	var move atomic.Bool
	_, addr := newServer(t, func(o *Options) { o.Rebalance = move.Load }, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for i, m := range []bool{false, false, true} {
		move.Store(m)
		io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.Close != m {
			t.Fatalf("request %d: Connection: close = %v, want %v", i+1, resp.Close, m)
		}
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after a response marked to move the connection stayed open (read %v, %v)", n, err)
	}
}

type reuseLog struct {
	mu     sync.Mutex
	events []bool
	closed chan struct{}
}

func (r *reuseLog) ConnOpened() {}
func (r *reuseLog) ConnClosed() { r.closed <- struct{}{} }
func (r *reuseLog) ConnReused(reused bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, reused)
}

func (r *reuseLog) seen() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.events...)
}

// The balancer learns whether clients reuse connections: a connection's
// second request is reuse (said once, not per request), a connection closed
// after one request is not.
func TestReuseObserverSeesKeepAliveAndOneShotConnections(t *testing.T) {
	obs := &reuseLog{closed: make(chan struct{}, 4)}
	_, addr := newServer(t, func(o *Options) { o.ConnObservers = []ConnObserver{obs} }, nil)
	request := func(conn net.Conn, br *bufio.Reader) {
		t.Helper()
		io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	keep, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(keep)
	for range 3 {
		request(keep, br)
	}
	keep.Close()
	<-obs.closed
	if got := obs.seen(); len(got) != 1 || !got[0] {
		t.Fatalf("after 3 requests on one connection: events %v, want [true]", got)
	}
	once, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	request(once, bufio.NewReader(once))
	once.Close()
	<-obs.closed
	if got := obs.seen(); len(got) != 2 || got[1] {
		t.Fatalf("after a one-request connection: events %v, want [true false]", got)
	}
}

// A keep-alive connection open longer than KeepAliveTime ends at its next
// response, however few requests it carried.
func TestKeepAliveTimeBound(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	_, addr := newServer(t, func(o *Options) { o.KeepAliveTime = time.Minute; o.Now = clock }, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for i, advance := range []time.Duration{0, 59 * time.Second, time.Second} {
		mu.Lock()
		now = now.Add(advance)
		mu.Unlock()
		io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		if want := i == 2; resp.Close != want {
			t.Fatalf("request %d, connection open %v: Connection: close = %v, want %v", i+1, now.Sub(time.Unix(1000, 0)), resp.Close, want)
		}
	}
}

// Every handler sees a writer that reports the final status (the per-route
// metrics count by it without a writer of their own): 200 for a body with no
// header, the code written, never a 1xx sent before it.
func TestHandlerWriterReportsStatus(t *testing.T) {
	got := make(chan int, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sr, ok := w.(interface{ Status() int })
		if !ok {
			got <- -1
			return
		}
		switch r.URL.Path {
		case "/hints":
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusTeapot)
		case "/body":
			io.WriteString(w, "ok")
		case "/nothing":
		}
		got <- sr.Status()
	})
	_, addr := newServer(t, nil, h)
	for path, want := range map[string]int{"/hints": http.StatusTeapot, "/body": 200, "/nothing": 200} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if s := <-got; s != want || resp.StatusCode != want {
			t.Errorf("%s: the writer reports %d, the client got %d; want %d", path, s, resp.StatusCode, want)
		}
	}
}

// Each request knows its number on its connection: 1, 2, 3 on one
// keep-alive connection, 1 again on the next; 0 for a request that came on
// no connection (the server's handler called in process).
func TestRequestOnConnCountsEachConnectionsRequests(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strconv.FormatInt(RequestOnConn(w), 10))
	})
	s, addr := newServer(t, nil, h)
	for conn := 1; conn <= 2; conn++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		for want := 1; want <= 3; want++ {
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("connection %d, request %d: %v", conn, want, err)
			}
			b, _ := io.ReadAll(resp.Body)
			if string(b) != strconv.Itoa(want) {
				t.Fatalf("connection %d, request %d: the handler saw request %s", conn, want, b)
			}
		}
		c.Close()
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Body.String() != "0" {
		t.Fatalf("outside a connection: %q, want 0", rec.Body)
	}
}
