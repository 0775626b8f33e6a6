package ratelimit

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestBurstThenRate(t *testing.T) {
	c := &clock{time.Unix(1000, 0)}
	l := NewLimiter(NewLocal(1024), 10, 5, c.now) // 10/s, burst 5
	for i := range 5 {
		d := l.Allow("a")
		if !d.Allowed || d.Remaining != 4-i {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	d := l.Allow("a")
	if d.Allowed || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("6th request: %+v, want refused with retry after 100ms", d)
	}
	if !l.Allow("b").Allowed {
		t.Fatal("another client is limited by a's budget")
	}
	c.t = c.t.Add(100 * time.Millisecond)
	if !l.Allow("a").Allowed || l.Allow("a").Allowed {
		t.Fatal("after 100ms exactly one more request is allowed")
	}
	c.t = c.t.Add(time.Second)
	if d := l.Allow("a"); !d.Allowed || d.Remaining != 4 {
		t.Fatalf("after a full refill: %+v", d)
	}
}

// Two mappings of one file behave as one limiter: this is what keeps N
// workers from multiplying the budget by N.
func TestSharedTableIsOneBudget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl")
	t1, err := OpenShared(path, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	t2, err := OpenShared(path, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Close()
	c := &clock{time.Unix(1000, 0)}
	workers := []*Limiter{NewLimiter(t1, 1, 20, c.now), NewLimiter(t2, 1, 20, c.now)}
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				if workers[i%2].Allow("10.0.0.1").Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 20 {
		t.Fatalf("%d requests allowed across two workers, want exactly the burst, 20", allowed.Load())
	}
	if _, err := OpenShared(path, 8192); err == nil || !strings.Contains(err.Error(), "CLUSTERAPP_RATE_LIMIT_SLOTS") {
		t.Fatalf("a table of another size: %v", err)
	}
}

func TestClientKey(t *testing.T) {
	m := &Middleware{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}}
	for _, tc := range []struct{ remote, xff, want string }{
		{"192.0.2.1:5000", "", "192.0.2.1"},
		{"192.0.2.1:5000", "203.0.113.9", "192.0.2.1"},                           // untrusted peer: header ignored
		{"127.0.0.1:5000", "203.0.113.9", "203.0.113.9"},                         // nginx in front
		{"127.0.0.1:5000", "198.51.100.7, 203.0.113.9, 10.1.2.3", "203.0.113.9"}, // rightmost untrusted hop
		{"127.0.0.1:5000", "", "127.0.0.1"},
		{"127.0.0.1:5000", "garbage", "127.0.0.1"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := m.ClientKey(r); got != tc.want {
			t.Errorf("remote %s XFF %q: key %q, want %q", tc.remote, tc.xff, got, tc.want)
		}
	}
}

func TestMiddlewareHeaders(t *testing.T) {
	c := &clock{time.Unix(1000, 0)}
	m := &Middleware{Limiter: NewLimiter(NewLocal(64), 2, 2, c.now), Exempt: map[string]bool{"/healthz": true}}
	h := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var last *httptest.ResponseRecorder
	for range 3 {
		last = httptest.NewRecorder()
		h.ServeHTTP(last, httptest.NewRequest("GET", "/fib", nil))
	}
	if last.Code != 429 || last.Header().Get("Retry-After") != "1" || last.Header().Get("RateLimit-Limit") != "2" || last.Header().Get("RateLimit-Remaining") != "0" {
		t.Fatalf("third request: %d %v", last.Code, last.Header())
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 {
		t.Fatalf("/healthz limited: %d", rec.Code)
	}
}
