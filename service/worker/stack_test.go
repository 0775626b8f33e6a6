package worker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/admission"
	"github.com/clusterapp/clusterapp/service/worker/metrics"
	"github.com/clusterapp/clusterapp/service/worker/server"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// testRoutes is a service of two routes: /hello, and /echo which takes POST.
func testRoutes(Tools) []Route {
	return []Route{
		{Path: "/hello", Handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello\n")) }},
		{Path: "/echo", Methods: []string{http.MethodPost}, Handler: func(w http.ResponseWriter, r *http.Request) {
			b := make([]byte, 4096)
			n, _ := r.Body.Read(b)
			_, _ = w.Write(b[:n])
		}},
	}
}

func newStack(t testing.TB, mod func(*StackOptions)) (*Stack, *metrics.Metrics) {
	l, _ := test.NewNullLogger()
	m := metrics.New(metrics.Options{Worker: "7", Version: "test", Routes: Labels(testRoutes), Start: time.Now(), Log: logrus.NewEntry(l)})
	o := StackOptions{Name: "7", Routes: testRoutes(Tools{}), MaxBodyBytes: 1024, Metrics: m, Log: logrus.NewEntry(l), Crash: func() {}}
	if mod != nil {
		mod(&o)
	}
	return NewStack(o), m
}

func do(h http.Handler, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("body %q is not JSON: %v", rec.Body, err)
	}
	return v
}

func TestLabels(t *testing.T) {
	got := strings.Join(Labels(testRoutes), " ")
	if want := "/hello /echo /healthz /readyz /debug/crash /debug/hang /debug/leak unmatched"; got != want {
		t.Fatalf("Labels = %q, want %q", got, want)
	}
}

func TestWorkerRoutes(t *testing.T) {
	s, _ := newStack(t, nil)
	for _, tc := range []struct {
		method, target string
		status         int
		body           string
	}{
		{"GET", "/hello", 200, "hello"},
		{"HEAD", "/hello", 200, ""},
		{"GET", "/healthz", 200, `{"status":"ok","worker":"7"}`},
		{"GET", "/readyz", 200, `{"status":"ready","worker":"7"}`},
	} {
		rec := do(s, tc.method, tc.target)
		body := strings.TrimSpace(rec.Body.String())
		if tc.method == "HEAD" {
			body = "" // net/http drops a HEAD response's body; the recorder keeps it
		}
		if rec.Code != tc.status || body != tc.body {
			t.Errorf("%s %s = %d %q, want %d %q", tc.method, tc.target, rec.Code, rec.Body, tc.status, tc.body)
		}
		if rec.Header().Get("X-Worker") != "7" {
			t.Errorf("%s %s: X-Worker = %q", tc.method, tc.target, rec.Header().Get("X-Worker"))
		}
	}
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	s, m := newStack(t, nil)
	rec := do(s, "GET", "/nope")
	body := decode(t, rec)
	if rec.Code != 404 || body["error"] != "no route for /nope" || fmt.Sprint(body["routes"]) != "[/echo /healthz /hello /readyz]" {
		t.Fatalf("404: %d %s, want the error and the routes there are", rec.Code, rec.Body)
	}
	rec = do(s, "DELETE", "/hello")
	if rec.Code != 405 || rec.Header().Get("Allow") != "GET, HEAD" || decode(t, rec)["status"] != 405.0 {
		t.Fatalf("405: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if rec := do(s, "GET", "/echo"); rec.Code != 405 || rec.Header().Get("Allow") != "POST" {
		t.Fatalf("GET on a POST route: %d %v", rec.Code, rec.Header())
	}
	if n := requests(t, m, "unmatched", "404"); n != 1 {
		t.Fatalf("404 counted %v times", n)
	}
	if n := requests(t, m, "/hello", "405"); n != 1 {
		t.Fatalf("405 counted %v times", n)
	}
}

// "OPTIONS *" asks about the server: answered 200 with no body, as
// net/http would, but by the stack (X-Worker, counted); "GET *" is no route.
func TestOptionsAsterisk(t *testing.T) {
	s, m := newStack(t, nil)
	rec := do(s, "OPTIONS", "*")
	if rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != "0" || rec.Header().Get("X-Worker") != "7" {
		t.Fatalf("OPTIONS *: %d %v %q", rec.Code, rec.Header(), rec.Body)
	}
	if n := requests(t, m, "unmatched", "200"); n != 1 {
		t.Fatalf("OPTIONS * counted %v times", n)
	}
	if rec := do(s, "GET", "*"); rec.Code != 404 {
		t.Fatalf("GET *: %d", rec.Code)
	}
}

func TestDebugRoutesOffByDefault(t *testing.T) {
	s, _ := newStack(t, nil)
	for _, p := range []string{"/debug/crash", "/debug/hang", "/debug/leak?mb=1"} {
		if rec := do(s, "GET", p); rec.Code != 404 {
			t.Errorf("%s = %d without CLUSTERAPP_DEBUG_ENDPOINTS, want 404", p, rec.Code)
		}
	}
}

func TestLeak(t *testing.T) {
	s, _ := newStack(t, func(o *StackOptions) { o.DebugEndpoints = true })
	do(s, "GET", "/debug/leak?mb=2")
	rec := do(s, "GET", "/debug/leak?mb=3")
	if got := decode(t, rec); got["retained_mib"] != 5.0 {
		t.Fatalf("leak: %v", got)
	}
	if rec := do(s, "GET", "/debug/leak?mb=0"); rec.Code != 400 {
		t.Fatalf("mb=0 = %d", rec.Code)
	}
}

func TestHangBlocksEveryLaterRequest(t *testing.T) {
	s, _ := newStack(t, func(o *StackOptions) { o.DebugEndpoints = true })
	go do(s, "GET", "/debug/hang")
	deadline := time.Now().Add(5 * time.Second)
	for s.state.TryRLock() { // wait until the hang holds the lock
		s.state.RUnlock()
		if time.Now().After(deadline) {
			t.Fatal("hang never took the lock")
		}
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() { do(s, "GET", "/healthz"); close(done) }()
	select {
	case <-done:
		t.Fatal("/healthz answered while the worker is wedged")
	case <-time.After(100 * time.Millisecond):
	}
}

func TestCrashCallsCrash(t *testing.T) {
	crashed := false
	s, _ := newStack(t, func(o *StackOptions) { o.DebugEndpoints = true; o.Crash = func() { crashed = true } })
	do(s, "POST", "/debug/crash")
	if !crashed {
		t.Fatal("Crash not called")
	}
}

// /readyz's 503 is the suite's error body and says why: which state (for a
// load balancer's program) and a sentence (for the operator reading it).
func TestReadyzSaysWhyNotReady(t *testing.T) {
	state, why := "starting", "not yet probed"
	s, _ := newStack(t, func(o *StackOptions) { o.NotReady = func() (string, string) { return state, why } })
	for _, tc := range []struct{ state, why string }{{"starting", "not yet probed"}, {"draining", "shutting down (signal terminated)"}} {
		state, why = tc.state, tc.why
		rec := do(s, "GET", "/readyz")
		body := decode(t, rec)
		if rec.Code != 503 || body["status"] != 503.0 || body["state"] != tc.state || body["error"] != tc.state+": "+tc.why || body["worker"] != "7" {
			t.Errorf("/readyz while %s = %d %s, want 503 with the state and why", tc.state, rec.Code, rec.Body)
		}
	}
	state, why = "", ""
	if rec := do(s, "GET", "/readyz"); rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"status":"ready","worker":"7"}` {
		t.Fatalf("/readyz while ready = %d %s", rec.Code, rec.Body)
	}
}

func TestBodyCap(t *testing.T) {
	s, _ := newStack(t, nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/echo", strings.NewReader(strings.Repeat("x", 2000))))
	if rec.Code != 413 || decode(t, rec)["max_bytes"] != 1024.0 {
		t.Fatalf("oversized body: %d %s", rec.Code, rec.Body)
	}
	// The message says what was wrong and what is accepted, as every
	// other refusal does ("request body too large" said neither).
	if msg, want := decode(t, rec)["error"], "request body of 2000 bytes is over the limit of 1024 bytes (CLUSTERAPP_MAX_BODY_BYTES)"; msg != want {
		t.Fatalf("oversized body: error %q, want %q", msg, want)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/echo", strings.NewReader("small")))
	if rec.Code != 200 || rec.Body.String() != "small" {
		t.Fatalf("body under the cap: %d %q", rec.Code, rec.Body)
	}
}

// A 413 is counted in the route's metrics (and unmatched paths' under
// their label), as every other answer is.
func TestBodyCapIsCounted(t *testing.T) {
	s, m := newStack(t, nil)
	for _, target := range []string{"/echo", "/echo", "/nowhere"} {
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", target, strings.NewReader(strings.Repeat("x", 2000))))
	}
	if got := requests(t, m, "/echo", "413"); got != 2 {
		t.Errorf("/echo 413s counted: %v, want 2", got)
	}
	if got := requests(t, m, unmatched, "413"); got != 1 {
		t.Errorf("unmatched 413s counted: %v, want 1", got)
	}
}

// A client that sends "Expect: 100-continue" waits for the server before
// sending its body. A route that never reads the body must still answer
// at once (net/http then closes the connection), and one that reads it
// must ask for it; neither may wait for the body that is held back.
// Through a real server with no read timeout: a wait here is forever.
func TestExpectContinueIsAnswered(t *testing.T) {
	s, _ := newStack(t, nil)
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, tc := range []struct{ request, want string }{
		{"GET /hello HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", "HTTP/1.1 200 OK"},
		{"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", "HTTP/1.1 100 Continue"},
	} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a hang fails the test instead of blocking it
		if _, err := io.WriteString(c, tc.request); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		_ = c.Close()
		if strings.TrimSpace(line) != tc.want {
			t.Errorf("%q: first line %q (%v), want %q", strings.SplitN(tc.request, "\r\n", 2)[0], line, err, tc.want)
		}
	}
}

// A computing route runs under the request deadline; the others do not.
func TestComputingRoutesGetTheDeadline(t *testing.T) {
	var computing, fast bool
	routes := []Route{
		{Path: "/compute", Computes: true, Handler: func(_ http.ResponseWriter, r *http.Request) { _, computing = r.Context().Deadline() }},
		{Path: "/fast", Handler: func(_ http.ResponseWriter, r *http.Request) { _, fast = r.Context().Deadline() }},
	}
	l, _ := test.NewNullLogger()
	m := metrics.New(metrics.Options{Worker: "7", Routes: Labels(func(Tools) []Route { return routes }), Start: time.Now(), Log: logrus.NewEntry(l)})
	s := NewStack(StackOptions{Name: "7", Routes: routes, Metrics: m, Log: logrus.NewEntry(l), RequestTimeout: time.Minute})
	do(s, "GET", "/compute")
	do(s, "GET", "/fast")
	if !computing || fast {
		t.Fatalf("deadline on the computing route %v, on the fast one %v; want true, false", computing, fast)
	}
}

// Requests are counted under their route; the numbers are served by the
// metrics listener's handler, never by the service's routes.
func TestMetricsExposeRequests(t *testing.T) {
	s, m := newStack(t, nil)
	do(s, "GET", "/hello")
	do(s, "GET", "/no/such/route")
	if rec := do(s, "GET", "/metrics"); rec.Code != http.StatusNotFound {
		t.Errorf("/metrics on the service's routes = %d, want 404", rec.Code)
	}
	body := do(m.Handler(), "GET", "/metrics").Body.String()
	for _, want := range []string{
		`clusterapp_http_requests_total{code="200",route="/hello",worker="7"} 1`,
		`clusterapp_http_requests_total{code="404",route="unmatched",worker="7"} 2`,
		`clusterapp_http_request_duration_seconds_count{route="/hello",worker="7"} 1`,
		`clusterapp_http_requests_in_flight{worker="7"} 0`,
		`clusterapp_worker_starts_total{worker="7"} 1`,
		"clusterapp_worker_start_time_seconds",
		"clusterapp_build_info{goversion=",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}

func TestAccessLog(t *testing.T) {
	l, hook := test.NewNullLogger()
	s, _ := newStack(t, func(o *StackOptions) { o.AccessLog = true; o.Log = logrus.NewEntry(l) })
	do(s, "GET", "/hello")
	e := hook.LastEntry()
	if e == nil || e.Message != "request" || e.Data["path"] != "/hello" || e.Data["status"] != 200 {
		t.Fatalf("access log entry %v", e)
	}
}

func TestAdmissionExemptsHealth(t *testing.T) {
	lim := admission.New(admission.Options{MaxInFlight: 1, Exempt: Unprotected})
	s, _ := newStack(t, func(o *StackOptions) { o.Admission = lim })
	// occupy the only slot through the same limiter
	release := make(chan struct{})
	defer close(release)
	go lim.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
	deadline := time.Now().Add(10 * time.Second)
	for lim.InFlight() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if rec := do(s, "GET", "/hello"); rec.Code != 503 || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("/hello at capacity: %d %v", rec.Code, rec.Header())
	}
	for _, p := range Unprotected {
		if rec := do(s, "GET", p); rec.Code != 200 {
			t.Fatalf("%s at capacity: %d", p, rec.Code)
		}
	}
}

// requests returns clusterapp_http_requests_total{route,code}.
func requests(t *testing.T, m *metrics.Metrics, route, code string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "clusterapp_http_requests_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range mt.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["route"] == route && labels["code"] == code {
				return mt.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A request that never returns (/debug/hang?slot=1, a handler deadlocked on
// its own) keeps its admission slot while the stack still answers: with the
// only slot held, /healthz passes as long as a request may still be running
// (StuckAfter), so a worker that is only busy is not killed, and fails after
// it, so the watchdog stops pinging a worker that answers every client 503.
func TestHealthFailsOnceEverySlotIsStuck(t *testing.T) {
	lim := admission.New(admission.Options{MaxInFlight: 1, Exempt: Unprotected})
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s, _ := newStack(t, func(o *StackOptions) {
		o.Admission, o.DebugEndpoints, o.StuckAfter, o.Now = lim, true, time.Minute, clock
	})
	go do(s, "GET", "/debug/hang?slot=1")
	deadline := time.Now().Add(10 * time.Second)
	for lim.InFlight() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if rec := do(s, "GET", "/hello"); rec.Code != 503 {
		t.Fatalf("/hello with the only slot held: %d", rec.Code)
	}
	for _, step := range []time.Duration{0, 30 * time.Second, 30 * time.Second} {
		advance(step)
		if rec := do(s, "GET", "/healthz"); rec.Code != 200 {
			t.Fatalf("/healthz with the slot held for up to StuckAfter: %d %s", rec.Code, rec.Body)
		}
	}
	advance(time.Second)
	rec := do(s, "GET", "/healthz")
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "all 1 admission slots") || !strings.Contains(rec.Body.String(), "CLUSTERAPP_WRITE_TIMEOUT") {
		t.Fatalf("/healthz with the only slot held past StuckAfter: %d %s", rec.Code, rec.Body)
	}
	// The stack itself is not wedged: the server's in-process probe says why it fails.
	if rec := do(s, "GET", "/readyz"); rec.Code != 200 {
		t.Fatalf("/readyz: %d", rec.Code)
	}
}

// A worker whose only slot is taken by one long request after another is
// busy, not stuck: each request that finishes starts the count over.
func TestHealthPassesWhileRequestsFinish(t *testing.T) {
	lim := admission.New(admission.Options{MaxInFlight: 1, Exempt: Unprotected})
	now := time.Unix(1000, 0)
	s, _ := newStack(t, func(o *StackOptions) {
		o.Admission, o.StuckAfter, o.Now = lim, time.Minute, func() time.Time { return now }
	})
	for range 5 {
		release, finished := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(finished)
			lim.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release })).
				ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
		}()
		for lim.InFlight() == 0 {
			time.Sleep(time.Millisecond)
		}
		for range 2 {
			if rec := do(s, "GET", "/healthz"); rec.Code != 200 {
				t.Fatalf("/healthz while busy: %d %s", rec.Code, rec.Body)
			}
			now = now.Add(50 * time.Second) // each request holds its slot 100 s in all, longer than StuckAfter
		}
		close(release)
		<-finished
	}
}

// Without a bound on requests (StuckAfter 0: CLUSTERAPP_WRITE_TIMEOUT=0),
// a held slot never fails liveness.
func TestStuckAfter(t *testing.T) {
	for _, tc := range []struct {
		write, request, want time.Duration
	}{
		{time.Minute, 30 * time.Second, time.Minute + stuckGrace},
		{10 * time.Second, 30 * time.Second, 30*time.Second + stuckGrace},
		{0, 30 * time.Second, 0},
	} {
		cfg := config.Config{WriteTimeout: tc.write, RequestTimeout: tc.request}
		if got := stuckAfter(cfg); got != tc.want {
			t.Errorf("WRITE_TIMEOUT %v, REQUEST_TIMEOUT %v: stuckAfter %v, want %v", tc.write, tc.request, got, tc.want)
		}
	}
}

// CLUSTERAPP_WORKER_HEADER through a real server: "connection" names the
// worker on the first response of each connection only (what the bench's
// load generator counts by), "every" on each, "off" on none; a stack with no
// server behind it (a recorder) cannot count, so it names the worker unless
// off.
func TestWorkerHeaderModes(t *testing.T) {
	l, _ := test.NewNullLogger()
	for _, tc := range []struct {
		mode     config.WorkerHeader
		want     string // per response: two connections of three requests
		recorder string
	}{
		{config.WorkerHeaderConnection, "7-- 7--", "7"},
		{config.WorkerHeaderEvery, "777 777", "7"},
		{"", "777 777", "7"},
		{config.WorkerHeaderOff, "--- ---", ""},
	} {
		s, _ := newStack(t, func(o *StackOptions) { o.Header = tc.mode })
		if got := do(s, "GET", "/hello").Header().Get("X-Worker"); got != tc.recorder {
			t.Errorf("%q, in process: X-Worker %q, want %q", tc.mode, got, tc.recorder)
		}
		srv := server.New(server.Options{ReadHeaderTimeout: 5 * time.Second, ShutdownTimeout: time.Second, Log: logrus.NewEntry(l)}, s)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv.Serve([]net.Listener{ln}, make(chan error, 1))
		var got []string
		for range 2 {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			br, seen := bufio.NewReader(c), ""
			for range 3 {
				fmt.Fprint(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				if resp.StatusCode != 200 {
					t.Fatalf("%q: status %d", tc.mode, resp.StatusCode)
				}
				if w := resp.Header.Get("X-Worker"); w != "" {
					seen += w
				} else {
					seen += "-"
				}
			}
			c.Close()
			got = append(got, seen)
		}
		ln.Close()
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%q: X-Worker per response %q, want %q", tc.mode, g, tc.want)
		}
	}
}
