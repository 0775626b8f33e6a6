package metrics

import (
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

func newExporter(t *testing.T, dir string) (*Exporter, *test.Hook) {
	t.Helper()
	l, hook := test.NewNullLogger()
	e := NewExporter(ExporterOptions{Dir: dir, Routes: routes, Version: "exp", Log: logrus.NewEntry(l),
		DesiredNow: func() (int, bool) { return 3, true }})
	t.Cleanup(func() { _ = e.Close() })
	return e, hook
}

func scrapeExporter(t *testing.T, e *Exporter) string {
	t.Helper()
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func exported(t *testing.T, e *Exporter, name, labels string) float64 {
	t.Helper()
	return sample(t, scrapeExporter(t, e), name, labels)
}

// The exporter, a process of its own, shows what a worker's scrape shows:
// every live worker's series, the pool's size, its own version; before any
// worker built the table, an empty pool.
func TestExporterShowsThePool(t *testing.T) {
	dir := t.TempDir()
	e, _ := newExporter(t, dir)
	before := scrapeExporter(t, e)
	if v, ok := lookup(before, "clusterapp_pool_workers", ""); !ok || v != 0 {
		t.Errorf("before any worker: pool workers %v (found %v), want 0", v, ok)
	}
	if v, ok := lookup(before, "clusterapp_pool_workers_desired", ""); !ok || v != 3 {
		t.Errorf("before any worker: desired %v (found %v), want 3 (DesiredNow)", v, ok)
	}
	if strings.Contains(before, "worker=") {
		t.Errorf("before any worker, a worker's series:\n%s", before)
	}

	w1, _ := newWorker(t, dir, "1")
	w2, _ := newWorker(t, dir, "2")
	serve(w1, "/", 200, 3)
	serve(w2, "/fib", 429, 2)
	if got := exported(t, e, "clusterapp_http_requests_total", `code="200",route="/",worker="1"`); got != 3 {
		t.Errorf("worker 1's requests = %v, want 3", got)
	}
	if got := exported(t, e, "clusterapp_http_requests_total", `code="429",route="/fib",worker="2"`); got != 2 {
		t.Errorf("worker 2's 429s = %v, want 2", got)
	}
	if got := exported(t, e, "clusterapp_pool_workers", ""); got != 2 {
		t.Errorf("pool workers = %v, want 2", got)
	}
	if got := exported(t, e, "clusterapp_build_info", `goversion="`+runtime.Version()+`",version="exp"`); got != 1 {
		t.Errorf("build info = %v, want 1", got)
	}
	// A worker that exits leaves the scrape (its claim goes with it).
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := exported(t, e, "clusterapp_pool_workers", ""); got != 1 {
		t.Errorf("after worker 2 left: pool workers = %v, want 1", got)
	}
}

// A table removed under the exporter (an operator's rm; the workers then
// restart into a new file) is followed at the next scrape.
func TestExporterFollowsAReplacedTable(t *testing.T) {
	dir := t.TempDir()
	e, hook := newExporter(t, dir)
	old, _ := newWorker(t, dir, "1")
	serve(old, "/", 200, 7)
	if got := exported(t, e, "clusterapp_http_requests_total", `code="200",route="/",worker="1"`); got != 7 {
		t.Fatalf("requests = %v, want 7", got)
	}
	if err := os.Remove(filepath.Join(dir, old.lay.table.FileName())); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil { // the worker restarts to rejoin
		t.Fatal(err)
	}
	fresh, _ := newWorker(t, dir, "1")
	serve(fresh, "/", 200, 2)
	if got := exported(t, e, "clusterapp_http_requests_total", `code="200",route="/",worker="1"`); got != 2 {
		t.Errorf("after the table was replaced: requests = %v, want the new table's 2", got)
	}
	found := false
	for _, en := range hook.AllEntries() {
		found = found || strings.Contains(en.Message, "now names another file: mapping the one the workers use now")
	}
	if !found {
		t.Error("the exporter did not log that it followed a new table")
	}
}

// The exporter holds no service socket: it reports the accept queues the
// workers last sampled, each with its address, and none once no worker has
// sampled them for queueStale (the pool down or stalled).
func TestExporterReportsThePublishedListenQueues(t *testing.T) {
	short := queuedListener(t, 1, 2)
	long := queuedListener(t, 8, 1)
	dir := t.TempDir()
	e, _ := newExporter(t, dir)
	w1, _ := newWorker(t, dir, "1")
	w1.WatchListeners([]net.Listener{short, long})
	if s := scrapeExporter(t, e); strings.Contains(s, "clusterapp_listen_queue_length") {
		t.Errorf("queues reported before any worker sampled them:\n%s", s)
	}
	w1.sampleQueues()
	for _, c := range []struct {
		ln            net.Listener
		length, limit float64
	}{{short, 1, 1}, {long, 1, 8}} {
		addr := `address="` + c.ln.Addr().String() + `"`
		if got := exported(t, e, "clusterapp_listen_queue_limit", addr); got != c.limit {
			t.Errorf("%s: limit = %v, want %v", addr, got, c.limit)
		}
		if got := exported(t, e, "clusterapp_listen_queue_length", addr); got < c.length {
			t.Errorf("%s: length = %v, want at least %v", addr, got, c.length)
		}
	}
	if got := exported(t, e, "clusterapp_listen_queue_full_seconds_total", ""); got != queueEvery.Seconds() {
		t.Errorf("full seconds = %v, want one period", got)
	}
	// The last sample goes stale: no worker samples any more.
	atomic.StoreUint64(w1.pool(pSampledAt), uint64(w1.clock()-queueStale-time.Second))
	if s := scrapeExporter(t, e); strings.Contains(s, "clusterapp_listen_queue_length") {
		t.Errorf("stale queues reported:\n%s", s)
	}
}

// An address longer than the table keeps is cut, never spilled into the
// next socket's words.
func TestPublishedQueueAddressIsCut(t *testing.T) {
	w, _ := newWorker(t, t.TempDir(), "1")
	long := strings.Repeat("/run/x", 20)
	w.publishQueues([]queue{{addr: long, length: 3, limit: 9}, {addr: "127.0.0.1:8080", length: 1, limit: 2}})
	atomic.StoreUint64(w.pool(pSampledAt), uint64(w.clock()))
	got := w.publishedQueues()
	want := []queue{{addr: long[:8*addrWords], length: 3, limit: 9}, {addr: "127.0.0.1:8080", length: 1, limit: 2}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("published %+v, want %+v", got, want)
	}
}
