package admission

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// policyOf reads the scheduling policy of thread tid of this process.
func policyOf(t *testing.T, tid int) uint32 {
	t.Helper()
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		t.Fatalf("sched_getattr(%d): %v", tid, err)
	}
	return a.Policy
}

// serveOnItsOwn serves one request on a goroutine of its own (the way
// net/http runs each connection) and returns the response's status.
func serveOnItsOwn(h http.Handler, path string) int {
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	}()
	<-done
	return rec.Code
}

// While the spare P runs, an admitted request computes on a SCHED_BATCH
// thread, and the thread is back to SCHED_OTHER once the request is done;
// without the spare P, and for exempt paths, nothing changes.
func TestAdmittedRequestsComputeOnBatchThreadsWhileSpare(t *testing.T) {
	threads, err := ProbeBatch()
	if err != nil {
		t.Fatalf("this process may not set SCHED_BATCH (Go tests need no privilege for it): %v", err)
	}
	type seen struct {
		policy uint32
		nice   int32
		tid    int
	}
	var mu sync.Mutex
	var got []seen
	failed := make(chan error, 1)
	l := New(Options{MaxInFlight: 1, Exempt: []string{"/healthz"}, Batch: &threads, BatchFailed: func(err error) { failed <- err }})
	h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tid := unix.Gettid()
		a, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		mu.Lock()
		got = append(got, seen{a.Policy, a.Nice, tid})
		mu.Unlock()
	}))
	serve := func(path string) seen {
		t.Helper()
		if code := serveOnItsOwn(h, path); code != 200 {
			t.Fatalf("%s: status %d", path, code)
		}
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1]
	}

	if s := serve("/fib"); s.policy != unix.SCHED_NORMAL {
		t.Fatalf("without the spare P a request ran with policy %d, want SCHED_OTHER (0)", s.policy)
	}
	l.SetSpare(true)
	s := serve("/fib")
	if s.policy != unix.SCHED_BATCH || s.nice != threads.Nice {
		t.Fatalf("with the spare P an admitted request ran with policy %d at nice %d, want SCHED_BATCH (%d) at the threads' nice %d",
			s.policy, s.nice, unix.SCHED_BATCH, threads.Nice)
	}
	if p := policyOf(t, s.tid); p != unix.SCHED_NORMAL {
		t.Fatalf("thread %d kept policy %d after its request; want SCHED_OTHER (0) before it serves anything else", s.tid, p)
	}
	if s := serve("/healthz"); s.policy != unix.SCHED_NORMAL {
		t.Fatalf("exempt /healthz ran with policy %d, want SCHED_OTHER: it is the serving path", s.policy)
	}
	l.SetSpare(false)
	if s := serve("/fib"); s.policy != unix.SCHED_NORMAL {
		t.Fatalf("after the spare P went a request ran with policy %d, want SCHED_OTHER", s.policy)
	}
	select {
	case err := <-failed:
		t.Fatalf("BatchFailed: %v", err)
	default:
	}
}

// A thread whose policy cannot be switched turns the switch off for good,
// once, with the reason; the requests are served all the same.
func TestBatchRefusedTurnsItselfOff(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		failOn     uint32
	}{
		{"refused at SCHED_BATCH", "sched_setattr(SCHED_BATCH)", unix.SCHED_BATCH},
		{"refused on the way back", "sched_setattr(SCHED_OTHER) after SCHED_BATCH", unix.SCHED_NORMAL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []uint32
			var reports []error
			l := New(Options{MaxInFlight: 1, Batch: &Threads{}, BatchFailed: func(err error) { mu.Lock(); reports = append(reports, err); mu.Unlock() }})
			l.batch.set = func(p uint32) error {
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, p)
				if p == tc.failOn {
					return syscall.EPERM
				}
				return nil
			}
			l.SetSpare(true)
			h := l.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			for i := range 3 {
				if code := serveOnItsOwn(h, "/fib"); code != 200 {
					t.Fatalf("request %d: status %d, want 200: a refused switch must not refuse the request", i, code)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reports) != 1 || !errors.Is(reports[0], syscall.EPERM) || !strings.Contains(reports[0].Error(), tc.want) {
				t.Fatalf("BatchFailed got %v, want one error naming %q and EPERM", reports, tc.want)
			}
			wantCalls := 1
			if tc.failOn == unix.SCHED_NORMAL {
				wantCalls = 2 // SCHED_BATCH, then the refused way back
			}
			if len(calls) != wantCalls {
				t.Fatalf("%d switches over 3 requests (%v), want %d: after a refusal it must stop trying", len(calls), calls, wantCalls)
			}
		})
	}
}

// ProbeBatch keeps the threads' nice value, leaves a policy the operator
// chose alone, and names the step the kernel refused.
func TestProbeBatch(t *testing.T) {
	get := func(policy uint32, nice int32) func() (*unix.SchedAttr, error) {
		return func() (*unix.SchedAttr, error) { return &unix.SchedAttr{Policy: policy, Nice: nice}, nil }
	}
	var nices []int32
	allow := func(nice int32) func(uint32) error {
		return func(uint32) error { nices = append(nices, nice); return nil }
	}
	th, err := probeBatch(get(unix.SCHED_NORMAL, 5), allow)
	if err != nil || th.Nice != 5 || len(nices) != 2 || nices[0] != 5 || nices[1] != 5 {
		t.Fatalf("threads at nice 5: got %+v, %v, switches at nice %v; want Nice 5 and both switches at 5 (the unit's Nice= stays)", th, err, nices)
	}
	nices = nil
	_, err = probeBatch(get(unix.SCHED_BATCH, 0), allow)
	if !errors.Is(err, ErrOwnPolicy) || !strings.Contains(err.Error(), "SCHED_BATCH") || len(nices) != 0 {
		t.Fatalf("threads already SCHED_BATCH (CPUSchedulingPolicy=batch): got %v after %d switches, want ErrOwnPolicy naming SCHED_BATCH and none", err, len(nices))
	}
	for _, tc := range []struct {
		failOn uint32
		want   string
	}{
		{unix.SCHED_BATCH, "sched_setattr(SCHED_BATCH)"},
		{unix.SCHED_NORMAL, "sched_setattr(SCHED_OTHER) after SCHED_BATCH"},
	} {
		_, err := probeBatch(get(unix.SCHED_NORMAL, 0), func(int32) func(uint32) error {
			return func(p uint32) error {
				if p == tc.failOn {
					return syscall.EPERM
				}
				return nil
			}
		})
		if err == nil || !errors.Is(err, syscall.EPERM) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("probe refused at policy %d: got %v, want an error naming %q", tc.failOn, err, tc.want)
		}
	}
	if _, err := probeBatch(func() (*unix.SchedAttr, error) { return nil, syscall.EPERM }, allow); err == nil || !strings.Contains(err.Error(), "sched_getattr") {
		t.Fatalf("sched_getattr refused: got %v, want an error naming it", err)
	}
}

// The switch costs two system calls per admitted request, only while the
// spare P runs.
func BenchmarkAdmitWithBatch(b *testing.B) {
	for _, spare := range []bool{false, true} {
		name := "spare=off"
		if spare {
			name = "spare=on"
		}
		b.Run(name, func(b *testing.B) {
			l := New(Options{MaxInFlight: 1, Batch: &Threads{}, Now: time.Now})
			l.SetSpare(spare)
			h := l.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			req := httptest.NewRequest("GET", "/", nil)
			rec := httptest.NewRecorder()
			for b.Loop() {
				h.ServeHTTP(rec, req)
			}
		})
	}
}
