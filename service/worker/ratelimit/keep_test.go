package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

type opened struct {
	t   *Table
	err error
}

// scripted returns a channel of results and an Open that returns them in
// order.
func scripted() (chan opened, func() (*Table, error)) {
	results := make(chan opened, 8)
	return results, func() (*Table, error) { r := <-results; return r.t, r.err }
}

// While the shared table cannot be opened, the limiter limits on a table of
// its own (ModeLocal) and says so once; the failure is logged again only when
// it changes, never at every retry; once the table opens, the limiter moves
// to it and says so.
func TestKeeperFallsBackLocalThenShares(t *testing.T) {
	results, open := scripted()
	ticks := make(chan time.Time)
	log, hook := logtest.NewNullLogger()
	l := NewLimiter(nil, 1, 1, newClock().now)
	results <- opened{err: errors.New("open table directory: no such file or directory")}
	k := Keep(l, KeepOptions{Open: open, Slots: 64, Log: logrus.NewEntry(log)})
	if k.Mode() != ModeLocal || l.table.Load() == nil {
		t.Fatalf("mode %s, table %v: want a local table", k.Mode(), l.table.Load())
	}
	if d := l.Allow(addr("192.0.2.1")); !d.Allowed {
		t.Fatalf("the local fallback does not limit like a table: %+v", d)
	}
	k.after = func(time.Duration) <-chan time.Time { return ticks }
	done := make(chan struct{})
	go func() { defer close(done); k.Run(context.Background()) }()
	shared := NewLocal(64)
	for _, r := range []opened{
		{err: errors.New("open table directory: no such file or directory")},
		{err: errors.New("open table directory: no such file or directory")},
		{err: errors.New("create table: read-only file system")},
		{err: errors.New("create table: read-only file system")},
		{t: shared},
	} {
		results <- r
		ticks <- time.Time{}
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once the shared table opened")
	}
	if k.Mode() != ModeShared || l.table.Load() != shared {
		t.Fatalf("mode %s: want the limiter on the shared table", k.Mode())
	}
	var got []string
	for _, e := range hook.AllEntries() {
		got = append(got, e.Level.String()+": "+e.Message)
	}
	if len(got) != 3 || !strings.Contains(got[0], "warning: shared rate-limit table unavailable: this worker limits on a table of its own") ||
		!strings.Contains(got[1], "still unavailable") || !strings.Contains(got[2], "info: shared rate-limit table opened") {
		t.Fatalf("log:\n%s\nwant one warning, one for the changed failure, one when it opened", strings.Join(got, "\n"))
	}
}

// FallbackClosed: the rate-limited routes answer 503 with Retry-After and a
// body saying why; exempt routes (health, readiness, metrics) are served.
func TestKeeperClosedRefusesLimitedRoutes(t *testing.T) {
	results, open := scripted()
	log, hook := logtest.NewNullLogger()
	l := NewLimiter(nil, 1000, 100, newClock().now)
	results <- opened{err: errors.New("lock /run/clusterapp: table directory locked by another process for too long")}
	k := Keep(l, KeepOptions{Open: open, Fallback: ModeClosed, Log: logrus.NewEntry(log)})
	if k.Mode() != ModeClosed || hook.LastEntry() == nil || hook.LastEntry().Level != logrus.ErrorLevel {
		t.Fatalf("mode %s, log %v: want closed, said at error level", k.Mode(), hook.AllEntries())
	}
	m := &Guard{Limiter: l, Exempt: map[string]bool{"/healthz": true}}
	h := m.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/fib", nil))
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "5" || !strings.Contains(rec.Body.String(), "shared rate-limit table is unavailable") {
		t.Fatalf("a limited route while closed: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 {
		t.Fatalf("/healthz while closed: %d", rec.Code)
	}
	ticks := make(chan time.Time, 1)
	k.after = func(time.Duration) <-chan time.Time { return ticks }
	results <- opened{t: NewLocal(64)}
	ticks <- time.Time{}
	k.Run(context.Background())
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/fib", nil))
	if rec.Code != 200 {
		t.Fatalf("a limited route once the shared table opened: %d", rec.Code)
	}
}
