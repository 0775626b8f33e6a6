package admission

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type counts struct{ admitted, shed atomic.Int32 }

func (c *counts) Admitted(time.Duration) { c.admitted.Add(1) }
func (c *counts) Shed()                  { c.shed.Add(1) }

func TestShedsBeyondCapacity(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	c := &counts{}
	l := New(Options{MaxInFlight: 2, Wait: 0, RetryAfter: 2 * time.Second, Exempt: []string{"/healthz"}, Observer: c})
	h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			entered <- struct{}{}
			<-release
		}
	}))
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fib", nil)) })
	}
	<-entered
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/fib", nil))
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("third request: %d Retry-After=%q, want 503 and 2", rec.Code, rec.Header().Get("Retry-After"))
	}
	// health is never queued behind work
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 {
		t.Fatalf("/healthz at capacity: %d", rec.Code)
	}
	close(release)
	wg.Wait()
	if c.admitted.Load() != 2 || c.shed.Load() != 1 || l.InFlight() != 0 {
		t.Fatalf("admitted %d shed %d in flight %d", c.admitted.Load(), c.shed.Load(), l.InFlight())
	}
}

func TestWaitsForAFreeSlot(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	l := New(Options{MaxInFlight: 1, Wait: 10 * time.Second})
	h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("block") != "" {
			entered <- struct{}{}
			<-release
		}
	}))
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/?block=1", nil))
	<-entered
	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		done <- rec.Code
	}()
	close(release) // the slot frees up within the wait
	if code := <-done; code != 200 {
		t.Fatalf("waiting request got %d, want 200", code)
	}
}
