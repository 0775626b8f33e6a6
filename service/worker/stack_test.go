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
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/admission"
	"github.com/clusterapp/clusterapp/service/worker/metrics"
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

func TestReadyzFollowsReady(t *testing.T) {
	ready := false
	s, _ := newStack(t, func(o *StackOptions) { o.Ready = func() bool { return ready } })
	if rec := do(s, "GET", "/readyz"); rec.Code != 503 {
		t.Fatalf("/readyz while not ready = %d", rec.Code)
	}
	ready = true
	if rec := do(s, "GET", "/readyz"); rec.Code != 200 {
		t.Fatalf("/readyz while ready = %d", rec.Code)
	}
}

func TestBodyCap(t *testing.T) {
	s, _ := newStack(t, nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/echo", strings.NewReader(strings.Repeat("x", 2000))))
	if rec.Code != 413 || decode(t, rec)["max_bytes"] != 1024.0 {
		t.Fatalf("oversized body: %d %s", rec.Code, rec.Body)
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
