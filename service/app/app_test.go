package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/app/workload"
	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker"
	"github.com/clusterapp/clusterapp/service/worker/cache"
	"github.com/clusterapp/clusterapp/service/worker/metrics"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// newStack is the seed service behind the worker's handler stack, as a
// client reaches it; mod adjusts the settings and tools.
func newStack(t testing.TB, mod func(*worker.Tools)) (http.Handler, *metrics.Metrics) {
	l, _ := test.NewNullLogger()
	log := logrus.NewEntry(l)
	m := metrics.New(metrics.Options{Worker: "7", Version: "test", Routes: worker.Labels(Routes), Start: time.Now(), Log: log})
	tools := worker.Tools{Name: "7", Config: config.Config{FibMaxN: 30}, Log: log}
	if mod != nil {
		mod(&tools)
	}
	return worker.NewStack(worker.StackOptions{
		Name: "7", Routes: Routes(tools), Metrics: m, Log: log, RequestTimeout: tools.Config.RequestTimeout,
	}), m
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
	h, _ := newStack(t, nil)
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
	} {
		rec := do(h, tc.method, tc.target)
		body := strings.TrimSpace(rec.Body.String())
		if tc.method == "HEAD" {
			body = "" // net/http drops a HEAD response's body; the recorder keeps it
		}
		if rec.Code != tc.status || body != strings.TrimSpace(tc.body) {
			t.Errorf("%s %s = %d %q, want %d %q", tc.method, tc.target, rec.Code, rec.Body, tc.status, tc.body)
		}
	}
	rec := do(h, "GET", "/slow")
	if got := decode(t, rec); rec.Code != 200 || got["count"] != float64(workload.SlowCount) || got["sum_of_squares"].(float64) <= 0 {
		t.Errorf("/slow = %d %v", rec.Code, got)
	}
	if rec := do(h, "DELETE", "/fib"); rec.Code != 405 {
		t.Errorf("DELETE /fib = %d, want 405", rec.Code)
	}
}

// The paths do not depend on the tools: they lay out the pool's metrics
// table, which `clusterapp exited` places from Routes(Tools{}).
func TestPathsDoNotDependOnTools(t *testing.T) {
	paths := func(rs []worker.Route) (p []string) {
		for _, r := range rs {
			p = append(p, r.Path)
		}
		return p
	}
	bare := strings.Join(paths(Routes(worker.Tools{})), " ")
	full := strings.Join(paths(Routes(worker.Tools{Cache: cache.New(10, 1<<20, nil), Config: config.Config{FibMaxN: 45}})), " ")
	if bare != full || bare != "/ /fib /slow" {
		t.Fatalf("paths %q with no tools, %q with tools; want \"/ /fib /slow\" both", bare, full)
	}
}

func TestFibDefaultsToForty(t *testing.T) {
	if testing.Short() {
		t.Skip("fib(40) costs a few hundred ms of CPU")
	}
	h, _ := newStack(t, func(o *worker.Tools) { o.Config.FibMaxN = 45 })
	rec := do(h, "GET", "/fib")
	if got := decode(t, rec); got["n"] != 40.0 || got["fib"] != 102334155.0 {
		t.Fatalf("/fib = %v", got)
	}
}

func TestFibBadN(t *testing.T) {
	h, _ := newStack(t, nil)
	for _, q := range []string{"n=-1", "n=31", "n=abc", "n=", "n=1.5", "n=99999999999999999999"} {
		rec := do(h, "GET", "/fib?"+q)
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
	h, _ := newStack(t, nil)
	for q, want := range map[string]string{
		"n=%zz":     "malformed query string",
		"n=5;x=1":   "malformed query string",
		"n=5&n=6":   "given 2 times",
		"n=5&n=5":   "given 2 times",
		"x=%&n=5":   "malformed query string",
		"n=5&x=%gg": "malformed query string",
	} {
		rec := do(h, "GET", "/fib?"+q)
		if rec.Code != 400 {
			t.Errorf("/fib?%s = %d, want 400", q, rec.Code)
			continue
		}
		if got := decode(t, rec); !strings.Contains(got["error"].(string), want) || got["parameter"] != "n" {
			t.Errorf("/fib?%s error body %v, want one containing %q", q, got, want)
		}
	}
	if rec := do(h, "GET", "/fib?n=5&other=1"); rec.Code != 200 {
		t.Errorf("/fib?n=5&other=1 = %d, want 200", rec.Code)
	}
}

func TestRequestTimeoutStopsFib(t *testing.T) {
	for name, c := range map[string]*cache.Cache{"plain": nil, "cache": cache.New(100, 1<<20, nil)} {
		t.Run(name, func(t *testing.T) {
			h, m := newStack(t, func(o *worker.Tools) {
				o.Config.FibMaxN = 60
				o.Config.RequestTimeout = 50 * time.Millisecond
				o.Cache = c
			})
			done := make(chan *httptest.ResponseRecorder)
			go func() { done <- do(h, "GET", "/fib?n=60") }() // years of CPU if not stopped
			select {
			case rec := <-done:
				if rec.Code != 503 || !strings.Contains(rec.Body.String(), "CLUSTERAPP_REQUEST_TIMEOUT=50ms") {
					t.Fatalf("timed-out fib: %d %s", rec.Code, rec.Body)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("fib(60) was not stopped by the request deadline")
			}
			scrape := do(m.Handler(), "GET", "/metrics").Body.String()
			if want := `clusterapp_http_requests_total{code="503",route="/fib",worker="7"} 1`; !strings.Contains(scrape, want) {
				t.Fatalf("no %q in\n%s", want, scrape)
			}
		})
	}
}

// A client that closes its connection (net/http cancels the request's
// context) is counted as 499, nginx's "client closed request", with and
// without the cache and the request deadline: it used to be answered and
// counted as the server's 503, blaming CLUSTERAPP_REQUEST_TIMEOUT.
func TestClientGoneIs499(t *testing.T) {
	for name, mod := range map[string]func(*worker.Tools){
		"plain":    nil,
		"deadline": func(o *worker.Tools) { o.Config.RequestTimeout = time.Minute },
		"cache":    func(o *worker.Tools) { o.Cache = cache.New(100, 1<<20, nil); o.Config.RequestTimeout = time.Minute },
	} {
		t.Run(name, func(t *testing.T) {
			h, m := newStack(t, mod)
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // the client has gone
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/fib?n=30", nil).WithContext(ctx))
			if rec.Code != 499 || rec.Body.Len() != 0 {
				t.Fatalf("/fib for a client gone = %d %q, want 499 with no body", rec.Code, rec.Body)
			}
			scrape := do(m.Handler(), "GET", "/metrics").Body.String()
			if want := `clusterapp_http_requests_total{code="499",route="/fib",worker="7"} 1`; !strings.Contains(scrape, want) {
				t.Fatalf("no %q in\n%s", want, scrape)
			}
			if strings.Contains(scrape, `code="503",route="/fib"`) {
				t.Fatalf("a client gone is counted as a 503:\n%s", scrape)
			}
		})
	}
}

func TestCachedFib(t *testing.T) {
	h, m := newStack(t, func(o *worker.Tools) { o.Cache = cache.New(100, 1<<20, nil); o.Config.CacheMaxAge = time.Minute })
	first := do(h, "GET", "/fib?n=20")
	second := do(h, "GET", "/fib?n=20")
	if first.Header().Get("X-Cache") != "MISS" || second.Header().Get("X-Cache") != "HIT" {
		t.Fatalf("X-Cache %q then %q", first.Header().Get("X-Cache"), second.Header().Get("X-Cache"))
	}
	if second.Body.String() != first.Body.String() || second.Header().Get("Cache-Control") != "public, max-age=60" {
		t.Fatalf("cached response %q %v", second.Body, second.Header())
	}
	scrape := do(m.Handler(), "GET", "/metrics").Body.String()
	if want := `clusterapp_http_requests_total{code="200",route="/fib",worker="7"} 2`; !strings.Contains(scrape, want) {
		t.Fatalf("cached responses are not counted as requests: no %q in\n%s", want, scrape)
	}
	// without the cache there is no Cache-Control: a front cache decides
	b, _ := newStack(t, nil)
	if rec := do(b, "GET", "/fib?n=20"); rec.Header().Get("Cache-Control") != "" || rec.Header().Get("X-Cache") != "" {
		t.Fatalf("uncached response has cache headers: %v", rec.Header())
	}
}

// A bad n is quoted back clipped to 256 bytes (worker.Clip): the query may
// be as long as the header limit, and the answer must not reflect it whole.
func TestFibBadNQuotedClipped(t *testing.T) {
	h, _ := newStack(t, nil)
	rec := do(h, "GET", "/fib?n="+strings.Repeat("x", 8000))
	msg, _ := decode(t, rec)["error"].(string)
	if rec.Code != 400 || !strings.HasSuffix(msg, `got "`+strings.Repeat("x", 256)+`…"`) {
		t.Fatalf("/fib?n=<8000 bytes> = %d, %d bytes of error %.400q, want the value quoted clipped to 256 bytes and …", rec.Code, len(msg), msg)
	}
}
