package admission

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
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
	// The first admission is signalled, with the time it was admitted; the
	// second finds that signal pending and adds none.
	select {
	case a := <-l.Started():
		if since := time.Since(a.At); since < 0 || since > time.Minute {
			t.Fatalf("Started carried %v, %v before now: not the time of the admission", a.At, since)
		}
		if now := processCPU(); now >= 0 && (a.CPU < 0 || a.CPU > now) {
			t.Fatalf("Started carried a CPU time of %v, the process's is %v now", a.CPU, now)
		}
	default:
		t.Fatal("Started not signalled when a request was admitted")
	}
	select {
	case <-l.Started():
		t.Fatal("Started signalled twice: the second admission should have found the first signal pending")
	default:
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/fib", nil))
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("third request: %d Retry-After=%q, want 503 and 2", rec.Code, rec.Header().Get("Retry-After"))
	}
	var body struct {
		Error      string `json:"error"`
		Status     int    `json:"status"`
		RetryAfter int    `json:"retry_after_seconds"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Status != 503 || body.RetryAfter != 2 ||
		!strings.Contains(body.Error, "all 2 admission slots (CLUSTERAPP_MAX_IN_FLIGHT)") || !strings.Contains(body.Error, "CLUSTERAPP_ADMISSION_WAIT=0") {
		t.Fatalf("third request's body %q (%v): want the slots, the wait and when to retry", rec.Body, err)
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

// A request whose goroutine became runnable while an admitted one computed
// on the same P, and which runs only once that one ends, arrived a whole
// computation ago. It meets the slot still taken, and with no wait allowed
// is turned away, as it would have been had it run during the computation,
// instead of inheriting the slot (and a latency of two computations). After
// a short request it is admitted as before. One P, so the queued request
// runs only when the holder gives the P up; the yield is a hint to Go's
// scheduler (which looks at its global queue first once in 61 rounds),
// hence a count over many trials. The kernel may also hold the thread
// between the two requests for longer than the age that counts as waiting
// (a loaded machine did, once in 50 trials after a short hold): a few such
// trials are allowed either way; a refused free slot, or an inherited one,
// shows in nearly every trial.
func TestQueuedRequestMeetsTheSlotTakenAfterALongHold(t *testing.T) {
	t.Cleanup(func(p int) func() { return func() { runtime.GOMAXPROCS(p) } }(runtime.GOMAXPROCS(1)))
	const trials = 50
	for _, hold := range []time.Duration{0, 2 * yieldAfter} {
		shed := 0
		for range trials {
			l := New(Options{MaxInFlight: 1})
			queued := httptest.NewRecorder()
			done := make(chan struct{})
			var h http.Handler
			h = l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/holder" {
					return
				}
				go func() { // arrives now; runnable, it waits for this P
					defer close(done)
					h.ServeHTTP(queued, httptest.NewRequest("GET", "/queued", nil))
				}()
				for start := mono(); mono()-start < hold; { // computes, keeping the P
				}
			}))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/holder", nil))
			<-done
			switch queued.Code {
			case http.StatusServiceUnavailable:
				shed++
			case http.StatusOK:
			default:
				t.Fatalf("queued request: %d, want 200 or 503", queued.Code)
			}
		}
		switch {
		case hold > 0 && shed < trials*4/5:
			t.Errorf("after a hold of %v, the request queued behind it was turned away in %d of %d trials; want nearly all: it inherited the slot", hold, shed, trials)
		case hold == 0 && shed > trials/10:
			t.Errorf("after a short hold, the request queued behind it was turned away in %d of %d trials; want nearly none: a free slot was refused", shed, trials)
		}
	}
}

// A client that leaves while waiting for a slot is not shed (no 503, no
// shed count): it is recorded as 499, and the slot stays free of it.
func TestClientLeavingWhileWaitingIsNotShed(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	c := &counts{}
	l := New(Options{MaxInFlight: 1, Wait: time.Hour, Observer: c})
	h := l.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	var wg sync.WaitGroup
	wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fib", nil)) })
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/fib", nil).WithContext(ctx))
		close(done)
	}()
	cancel()
	<-done
	close(release)
	wg.Wait()
	if rec.Code != StatusClientClosed || rec.Body.Len() != 0 {
		t.Errorf("a client gone while waiting: %d %q, want 499 and no body", rec.Code, rec.Body)
	}
	if c.shed.Load() != 0 || c.admitted.Load() != 1 || l.InFlight() != 0 {
		t.Errorf("shed %d admitted %d in flight %d, want 0, 1, 0", c.shed.Load(), c.admitted.Load(), l.InFlight())
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

type waits struct {
	mu   sync.Mutex
	seen []time.Duration
}

func (w *waits) Admitted(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, d)
}
func (w *waits) Shed() {}

// The wait the Observer is told is read on Options.Now: a clock that moves
// 7 s between its two readings reports 7 s, whatever the real wait was.
func TestWaitIsMeasuredOnTheInjectedClock(t *testing.T) {
	var reads atomic.Int64
	waiting := make(chan struct{})
	now := func() time.Time {
		n := reads.Add(1)
		if n == 1 {
			close(waiting) // only a request waiting for a slot reads the clock
		}
		return time.Unix(1000+7*(n-1), 0)
	}
	obs := &waits{}
	l := New(Options{MaxInFlight: 1, Wait: time.Minute, Observer: obs, Now: now})
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
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
	select {
	case <-waiting:
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("the request waiting for a slot never read Options.Now")
	}
	close(release)
	if code := <-done; code != 200 {
		t.Fatalf("waiting request got %d, want 200", code)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.seen) != 2 || obs.seen[0] != 0 || obs.seen[1] != 7*time.Second {
		t.Fatalf("waits reported %v, want [0s 7s]: the first admitted at once, the second timed on Options.Now", obs.seen)
	}
}

// While a Governor watches (WatchLong), a request that held its slot the
// watched hold or longer signals Long when it releases it; a shorter one
// does not, nor does any while nobody watches.
func TestLongHoldsSignalled(t *testing.T) {
	l := New(Options{MaxInFlight: 1})
	hold := time.Duration(0)
	h := l.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(hold) }))
	serve := func(d time.Duration) bool {
		hold = d
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fib", nil))
		select {
		case <-l.Long():
			return true
		default:
			return false
		}
	}
	if serve(20 * time.Millisecond) {
		t.Fatal("Long signalled while nobody watches")
	}
	l.WatchLong(10 * time.Millisecond)
	if serve(0) {
		t.Fatal("Long signalled for a request that held its slot for no time")
	}
	if !serve(20 * time.Millisecond) {
		t.Fatal("Long not signalled for a request that held its slot 20 ms, with 10 ms watched")
	}
	// Two long requests before anyone looks: one signal, and the second
	// request did not block on it.
	hold = 20 * time.Millisecond
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fib", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fib", nil))
	<-l.Long()
	select {
	case <-l.Long():
		t.Fatal("Long held two signals; one pending at most")
	default:
	}
	l.WatchLong(0)
	if serve(20 * time.Millisecond) {
		t.Fatal("Long signalled after WatchLong(0)")
	}
	if got := l.Slots(); got.InFlight != 0 || got.Released != 6 {
		t.Fatalf("slots after 6 requests: %+v, want none in flight and 6 released", got)
	}
}

// Stalled counts only while every slot stays taken with no request
// finishing: a free slot or a finished request starts it over, so a busy
// worker whose requests end never looks stalled, and one whose requests
// never end does, for as long as its looks have seen it so.
func TestStalled(t *testing.T) {
	lim := New(Options{MaxInFlight: 2})
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	hold := func() (release func()) {
		done, running := make(chan struct{}), make(chan struct{})
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			lim.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { close(running); <-done })).
				ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
		}()
		<-running
		return func() { close(done); <-finished }
	}
	check := func(s int, want time.Duration) {
		t.Helper()
		if got := lim.Stalled(at(s)); got != want {
			t.Fatalf("Stalled at %ds = %v, want %v", s, got, want)
		}
	}
	check(0, 0) // idle
	first := hold()
	check(1, 0) // one slot free
	second := hold()
	check(2, 0) // every slot taken: counting from here
	check(5, 3*time.Second)
	first() // a request finished...
	third := hold()
	check(6, 0) // ...so the slots are taken again, by a newer request
	check(9, 3*time.Second)
	third()
	check(10, 0) // a slot free
	fourth := hold()
	check(11, 0)
	check(40, 29*time.Second)
	second()
	fourth()
	check(41, 0)
}

// SlotsChanged is told after each slot taken and each freed, when InFlight
// already counts it; a request shed or exempt takes none and tells nothing.
func TestSlotsChangedFollowsEverySlot(t *testing.T) {
	var mu sync.Mutex
	var seen []int
	var l *Limiter
	l = New(Options{MaxInFlight: 2, Exempt: []string{"/healthz"}, SlotsChanged: func() {
		mu.Lock()
		seen = append(seen, l.InFlight())
		mu.Unlock()
	}})
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			entered <- struct{}{}
			<-release
		}
	}))
	var wg sync.WaitGroup
	wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fib", nil)) })
	<-entered
	wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fib", nil)) })
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/fib", nil)) // shed: no slot
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	release <- struct{}{}
	for deadline := time.Now().Add(10 * time.Second); count() < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // the first request frees its slot before the second does
	}
	release <- struct{}{}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if rec.Code != 503 || len(seen) != 4 || seen[0] != 1 || seen[1] != 2 || seen[2] != 1 || seen[3] != 0 {
		t.Fatalf("third request %d; slots in flight at each call %v, want 503 and [1 2 1 0]", rec.Code, seen)
	}
}
