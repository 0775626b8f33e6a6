package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/admission"
	"github.com/clusterapp/clusterapp/service/cache"
)

func TestRequestTimeoutStopsFib(t *testing.T) {
	a, _ := newApp(t, func(o *Options) { o.FibMaxN = 60; o.RequestTimeout = 50 * time.Millisecond })
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- do(a.Handler(), "GET", "/fib?n=60") }() // years of CPU if not stopped
	select {
	case rec := <-done:
		if rec.Code != 503 || !strings.Contains(rec.Body.String(), "CLUSTERAPP_REQUEST_TIMEOUT=50ms") {
			t.Fatalf("timed-out fib: %d %s", rec.Code, rec.Body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("fib(60) was not stopped by the request deadline")
	}
}

func TestCachedFib(t *testing.T) {
	a, m := newApp(t, func(o *Options) { o.Cache = cache.New(100, 1<<20, nil); o.CacheMaxAge = time.Minute })
	first := do(a.Handler(), "GET", "/fib?n=20")
	second := do(a.Handler(), "GET", "/fib?n=20")
	if first.Header().Get("X-Cache") != "MISS" || second.Header().Get("X-Cache") != "HIT" {
		t.Fatalf("X-Cache %q then %q", first.Header().Get("X-Cache"), second.Header().Get("X-Cache"))
	}
	if second.Body.String() != first.Body.String() || second.Header().Get("Cache-Control") != "public, max-age=60" {
		t.Fatalf("cached response %q %v", second.Body, second.Header())
	}
	if requests(t, m, "/fib", "200") != 2 {
		t.Fatal("cached responses are not counted as requests")
	}
	// without the cache there is no Cache-Control: a front cache decides
	b, _ := newApp(t, nil)
	if rec := do(b.Handler(), "GET", "/fib?n=20"); rec.Header().Get("Cache-Control") != "" || rec.Header().Get("X-Cache") != "" {
		t.Fatalf("uncached response has cache headers: %v", rec.Header())
	}
}

func TestAdmissionExemptsHealth(t *testing.T) {
	lim := admission.New(admission.Options{MaxInFlight: 1, Exempt: Unprotected})
	a, _ := newApp(t, func(o *Options) { o.Admission = lim })
	// occupy the only slot through the same limiter
	release := make(chan struct{})
	defer close(release)
	go lim.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
	deadline := time.Now().Add(10 * time.Second)
	for lim.InFlight() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	h := a.Handler()
	if rec := do(h, "GET", "/"); rec.Code != 503 || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("/ at capacity: %d %v", rec.Code, rec.Header())
	}
	for _, p := range Unprotected {
		if rec := do(h, "GET", p); rec.Code != 200 {
			t.Fatalf("%s at capacity: %d", p, rec.Code)
		}
	}
}
