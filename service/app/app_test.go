package app

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/metrics"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

func newApp(t testing.TB, mod func(*Options)) (*App, *metrics.Metrics) {
	l, _ := test.NewNullLogger()
	m := metrics.New(metrics.Options{Worker: "7", Version: "test", Routes: Routes, Start: time.Now(), Log: logrus.NewEntry(l)})
	opts := Options{Instance: "7", FibMaxN: 30, MaxBodyBytes: 1024, Metrics: m, Log: logrus.NewEntry(l), Crash: func() {}}
	if mod != nil {
		mod(&opts)
	}
	return New(opts), m
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

func TestRoutes(t *testing.T) {
	a, _ := newApp(t, nil)
	h := a.Handler()
	for _, tc := range []struct {
		method, target string
		status         int
		body           string
	}{
		{"GET", "/", 200, "Hello World!\n"},
		{"HEAD", "/", 200, ""},
		{"GET", "/fib?n=0", 200, `{"fib":0,"n":0}`},
		{"GET", "/fib?n=1", 200, `{"fib":1,"n":1}`},
		{"GET", "/fib?n=25", 200, `{"fib":75025,"n":25}`},
		{"GET", "/fib?n=30", 200, `{"fib":832040,"n":30}`},
		{"GET", "/healthz", 200, `{"status":"ok","worker":"7"}`},
		{"GET", "/readyz", 200, `{"status":"ready","worker":"7"}`},
	} {
		rec := do(h, tc.method, tc.target)
		body := strings.TrimSpace(rec.Body.String())
		if tc.method == "HEAD" {
			body = "" // net/http drops a HEAD response's body; the recorder keeps it
		}
		if rec.Code != tc.status || body != strings.TrimSpace(tc.body) {
			t.Errorf("%s %s = %d %q, want %d %q", tc.method, tc.target, rec.Code, rec.Body, tc.status, tc.body)
		}
		if rec.Header().Get("X-Worker") != "7" {
			t.Errorf("%s %s: X-Worker = %q", tc.method, tc.target, rec.Header().Get("X-Worker"))
		}
	}
}

func TestFibDefaultsToForty(t *testing.T) {
	if testing.Short() {
		t.Skip("fib(40) costs a few hundred ms of CPU")
	}
	a, _ := newApp(t, func(o *Options) { o.FibMaxN = 45 })
	rec := do(a.Handler(), "GET", "/fib")
	if got := decode(t, rec); got["n"] != 40.0 || got["fib"] != 102334155.0 {
		t.Fatalf("/fib = %v", got)
	}
}

func TestFibBadN(t *testing.T) {
	a, _ := newApp(t, nil)
	for _, q := range []string{"n=-1", "n=31", "n=abc", "n=", "n=1.5", "n=99999999999999999999"} {
		rec := do(a.Handler(), "GET", "/fib?"+q)
		if rec.Code != 400 {
			t.Errorf("/fib?%s = %d, want 400", q, rec.Code)
			continue
		}
		got := decode(t, rec)
		if got["parameter"] != "n" || got["min"] != 0.0 || got["max"] != 30.0 || !strings.Contains(got["error"].(string), "from 0 to 30") {
			t.Errorf("/fib?%s error body %v", q, got)
		}
	}
}

// A query that does not parse, or an ambiguous n, is a 400 that says so:
// it used to run fib(40) and answer 200 (issue 11).
func TestFibMalformedQuery(t *testing.T) {
	a, _ := newApp(t, nil)
	for q, want := range map[string]string{
		"n=%zz":     "malformed query string",
		"n=5;x=1":   "malformed query string",
		"n=5&n=6":   "given 2 times",
		"n=5&n=5":   "given 2 times",
		"x=%&n=5":   "malformed query string",
		"n=5&x=%gg": "malformed query string",
	} {
		rec := do(a.Handler(), "GET", "/fib?"+q)
		if rec.Code != 400 {
			t.Errorf("/fib?%s = %d, want 400", q, rec.Code)
			continue
		}
		if got := decode(t, rec); !strings.Contains(got["error"].(string), want) || got["parameter"] != "n" {
			t.Errorf("/fib?%s error body %v, want one containing %q", q, got, want)
		}
	}
	if rec := do(a.Handler(), "GET", "/fib?n=5&other=1"); rec.Code != 200 {
		t.Errorf("/fib?n=5&other=1 = %d, want 200", rec.Code)
	}
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	a, m := newApp(t, nil)
	rec := do(a.Handler(), "GET", "/nope")
	if rec.Code != 404 || decode(t, rec)["error"] != "no route for /nope" {
		t.Fatalf("404: %d %s", rec.Code, rec.Body)
	}
	rec = do(a.Handler(), "DELETE", "/fib")
	if rec.Code != 405 || rec.Header().Get("Allow") != "GET, HEAD" || decode(t, rec)["status"] != 405.0 {
		t.Fatalf("405: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if n := requests(t, m, "unmatched", "404"); n != 1 {
		t.Fatalf("404 counted %v times", n)
	}
	if n := requests(t, m, "/fib", "405"); n != 1 {
		t.Fatalf("405 counted %v times", n)
	}
}

func TestDebugRoutesOffByDefault(t *testing.T) {
	a, _ := newApp(t, nil)
	for _, p := range []string{"/debug/crash", "/debug/hang", "/debug/leak?mb=1"} {
		if rec := do(a.Handler(), "GET", p); rec.Code != 404 {
			t.Errorf("%s = %d without CLUSTERAPP_DEBUG_ENDPOINTS, want 404", p, rec.Code)
		}
	}
}

func TestLeak(t *testing.T) {
	a, _ := newApp(t, func(o *Options) { o.DebugEndpoints = true })
	do(a.Handler(), "GET", "/debug/leak?mb=2")
	rec := do(a.Handler(), "GET", "/debug/leak?mb=3")
	if got := decode(t, rec); got["retained_mib"] != 5.0 {
		t.Fatalf("leak: %v", got)
	}
	if rec := do(a.Handler(), "GET", "/debug/leak?mb=0"); rec.Code != 400 {
		t.Fatalf("mb=0 = %d", rec.Code)
	}
}

func TestHangBlocksEveryLaterRequest(t *testing.T) {
	a, _ := newApp(t, func(o *Options) { o.DebugEndpoints = true })
	h := a.Handler()
	go do(h, "GET", "/debug/hang")
	deadline := time.Now().Add(5 * time.Second)
	for a.state.TryRLock() { // wait until the hang holds the lock
		a.state.RUnlock()
		if time.Now().After(deadline) {
			t.Fatal("hang never took the lock")
		}
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() { do(h, "GET", "/healthz"); close(done) }()
	select {
	case <-done:
		t.Fatal("/healthz answered while the worker is wedged")
	case <-time.After(100 * time.Millisecond):
	}
}

func TestCrashCallsCrash(t *testing.T) {
	crashed := false
	a, _ := newApp(t, func(o *Options) { o.DebugEndpoints = true; o.Crash = func() { crashed = true } })
	do(a.Handler(), "POST", "/debug/crash")
	if !crashed {
		t.Fatal("Crash not called")
	}
}

func TestReadyzFollowsReady(t *testing.T) {
	ready := false
	a, _ := newApp(t, func(o *Options) { o.Ready = func() bool { return ready } })
	if rec := do(a.Handler(), "GET", "/readyz"); rec.Code != 503 {
		t.Fatalf("/readyz while not ready = %d", rec.Code)
	}
	ready = true
	if rec := do(a.Handler(), "GET", "/readyz"); rec.Code != 200 {
		t.Fatalf("/readyz while ready = %d", rec.Code)
	}
}

func TestBodyCap(t *testing.T) {
	a, _ := newApp(t, nil)
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", strings.NewReader(strings.Repeat("x", 2000))))
	if rec.Code != 413 || decode(t, rec)["max_bytes"] != 1024.0 {
		t.Fatalf("oversized body: %d %s", rec.Code, rec.Body)
	}
}

// Requests are counted under their route; the numbers are served by the
// metrics listener's handler, never by the service's routes.
func TestMetricsExposeRequests(t *testing.T) {
	a, m := newApp(t, nil)
	do(a.Handler(), "GET", "/")
	do(a.Handler(), "GET", "/no/such/route")
	if rec := do(a.Handler(), "GET", "/metrics"); rec.Code != http.StatusNotFound {
		t.Errorf("/metrics on the service's routes = %d, want 404", rec.Code)
	}
	body := do(m.Handler(), "GET", "/metrics").Body.String()
	for _, want := range []string{
		`clusterapp_http_requests_total{code="200",route="/",worker="7"} 1`,
		`clusterapp_http_requests_total{code="404",route="unmatched",worker="7"} 2`,
		`clusterapp_http_request_duration_seconds_count{route="/",worker="7"} 1`,
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
	a, _ := newApp(t, func(o *Options) { o.AccessLog = true; o.Log = logrus.NewEntry(l) })
	do(a.Handler(), "GET", "/fib?n=3")
	e := hook.LastEntry()
	if e == nil || e.Message != "request" || e.Data["path"] != "/fib" || e.Data["status"] != 200 {
		t.Fatalf("access log entry %v", e)
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
