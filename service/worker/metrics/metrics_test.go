package metrics

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"golang.org/x/sys/unix"
)

var routes = []string{"/", "/fib", "unmatched"}

func newWorker(t *testing.T, dir, name string) (*Metrics, *test.Hook) {
	t.Helper()
	l, hook := test.NewNullLogger()
	m := New(Options{Worker: name, Version: "test", Routes: routes, Dir: dir, Desired: 2, Start: time.Now(), Log: logrus.NewEntry(l)})
	return m, hook
}

// serve sends n requests answered with code through route's instruments.
func serve(m *Metrics, route string, code, n int) {
	h := m.Instrument(route)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }))
	for range n {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func value(t *testing.T, m *Metrics, name, labels string) float64 {
	t.Helper()
	return sample(t, scrape(t, m), name, labels)
}

// sample is the sample name{labels} of a scrape; the test fails without it.
func sample(t *testing.T, scrape, name, labels string) float64 {
	t.Helper()
	v, ok := lookup(scrape, name, labels)
	if !ok {
		t.Fatalf("no %s{%s} in the scrape:\n%s", name, labels, scrape)
	}
	return v
}

// lookup finds the sample name{labels} (labels exactly as exposed, sorted;
// "" for none) in a scrape.
func lookup(scrape, name, labels string) (float64, bool) {
	series := name + " "
	if labels != "" {
		series = name + "{" + labels + "} "
	}
	for _, line := range strings.Split(scrape, "\n") {
		if rest, ok := strings.CutPrefix(line, series); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}

// Whichever worker answers, the scrape holds every live worker's series.
func TestOneScrapeShowsThePool(t *testing.T) {
	dir := t.TempDir()
	w1, _ := newWorker(t, dir, "1")
	w2, _ := newWorker(t, dir, "2")
	if !w1.Shared() || !w2.Shared() {
		t.Fatal("workers 1 and 2 do not share the table")
	}
	serve(w1, "/", 200, 3)
	serve(w2, "/", 200, 5)
	serve(w2, "/fib", 429, 1)
	for _, m := range []*Metrics{w1, w2} {
		if got := value(t, m, "clusterapp_http_requests_total", `code="200",route="/",worker="1"`); got != 3 {
			t.Errorf("worker 1's requests = %v, want 3", got)
		}
		if got := value(t, m, "clusterapp_http_requests_total", `code="200",route="/",worker="2"`); got != 5 {
			t.Errorf("worker 2's requests = %v, want 5", got)
		}
		if got := value(t, m, "clusterapp_http_requests_total", `code="429",route="/fib",worker="2"`); got != 1 {
			t.Errorf("worker 2's 429s = %v, want 1", got)
		}
		if got := value(t, m, "clusterapp_pool_workers", ""); got != 2 {
			t.Errorf("pool workers = %v, want 2", got)
		}
		if got := value(t, m, "clusterapp_http_request_duration_seconds_count", `route="/",worker="2"`); got != 5 {
			t.Errorf("worker 2's duration count = %v, want 5", got)
		}
	}
	if strings.Contains(scrape(t, w1), `instance=`) {
		t.Error("a series carries an instance label, which Prometheus renames exported_instance")
	}
}

// A restarted worker continues its counters; while it is gone, its series
// leave the scrape but its starts and exits, and the pool counts one
// worker fewer.
func TestRestartContinuesCounters(t *testing.T) {
	dir := t.TempDir()
	w1, _ := newWorker(t, dir, "1")
	w2, _ := newWorker(t, dir, "2")
	serve(w2, "/", 200, 4)
	if err := w2.Close(); err != nil { // the process is gone: the kernel drops its claim
		t.Fatal(err)
	}
	s := scrape(t, w1)
	for _, series := range []string{`clusterapp_http_requests_total{code="200",route="/",worker="2"}`, `clusterapp_worker_ready{worker="2"}`, `clusterapp_worker_start_time_seconds{worker="2"}`} {
		if strings.Contains(s, series) {
			t.Errorf("a stopped worker's %s is still scraped:\n%s", series, s)
		}
	}
	if got := value(t, w1, "clusterapp_worker_starts_total", `worker="2"`); got != 1 {
		t.Errorf("a stopped worker's starts = %v, want 1, still scraped", got)
	}
	if got := value(t, w1, "clusterapp_pool_workers", ""); got != 1 {
		t.Errorf("pool workers = %v, want 1", got)
	}
	w2, _ = newWorker(t, dir, "2")
	serve(w2, "/", 200, 1)
	if got := value(t, w1, "clusterapp_http_requests_total", `code="200",route="/",worker="2"`); got != 5 {
		t.Errorf("worker 2's requests after its restart = %v, want 5 (4 + 1: counters continue)", got)
	}
	if got := value(t, w1, "clusterapp_worker_starts_total", `worker="2"`); got != 2 {
		t.Errorf("worker 2's starts = %v, want 2", got)
	}
	if got := value(t, w1, "clusterapp_http_requests_in_flight", `worker="2"`); got != 0 {
		t.Errorf("in flight after a restart = %v, want 0 (gauges restart)", got)
	}
}

// Two processes claiming one worker's slot: the second counts alone, says
// so, and never writes into the first one's numbers.
func TestSlotHeldTwice(t *testing.T) {
	dir := t.TempDir()
	first, _ := newWorker(t, dir, "3")
	second, hook := newWorker(t, dir, "3")
	if !first.Shared() || second.Shared() {
		t.Fatalf("shared: first %v, second %v; want only the first", first.Shared(), second.Shared())
	}
	if e := hook.LastEntry(); e == nil || !strings.Contains(e.Message, "another process running as this worker") {
		t.Errorf("no warning naming the cause: %v", e)
	}
	serve(second, "/", 200, 2)
	if got := value(t, first, "clusterapp_http_requests_total", `code="200",route="/",worker="3"`); got != 0 {
		t.Errorf("the first process's count = %v, want 0: the second one counted into its slot", got)
	}
}

// Standalone (no runtime directory, not a worker number): the process
// counts alone under its own name.
// Each route's 200 series is there, at 0, before the first request: a
// series born mid-window with its count high loses that count to rate().
func TestSeriesStartAtZero(t *testing.T) {
	m, _ := newWorker(t, "", "1")
	for _, r := range routes {
		if got := value(t, m, "clusterapp_http_requests_total", `code="200",route="`+r+`",worker="1"`); got != 0 {
			t.Errorf("route %s: %v before any request, want 0", r, got)
		}
	}
}

func TestStandaloneCountsAlone(t *testing.T) {
	m, _ := newWorker(t, "", "pid-42")
	serve(m, "/", 200, 1)
	if got := value(t, m, "clusterapp_http_requests_total", `code="200",route="/",worker="pid-42"`); got != 1 {
		t.Errorf("requests = %v, want 1", got)
	}
}

// The exits systemd reports after the process ends are counted by result.
func TestRecordExit(t *testing.T) {
	dir := t.TempDir()
	if err := RecordExit(dir, routes, "1", "watchdog"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("before any worker built the table: %v, want fs.ErrNotExist (it builds none)", err)
	}
	w1, _ := newWorker(t, dir, "1")
	for _, r := range []string{"watchdog", "watchdog", "signal", "something-new"} {
		if err := RecordExit(dir, routes, "1", r); err != nil {
			t.Fatal(err)
		}
	}
	for result, want := range map[string]float64{"watchdog": 2, "signal": 1, "other": 1, "success": 0} {
		if got := value(t, w1, "clusterapp_worker_exits_total", `result="`+result+`",worker="1"`); got != want {
			t.Errorf("exits{result=%q} = %v, want %v", result, got, want)
		}
	}
	if err := RecordExit(dir, routes, "pid-3", "watchdog"); err == nil || !strings.Contains(err.Error(), "worker number") {
		t.Errorf("a worker name that is no number: %v", err)
	}
}

// A worker that never serves (it refuses its configuration, or its process
// never reaches the worker) claims no slot but counts its starts, and a
// configured worker that is down keeps its starts and exits in the scrape:
// the restarts alert sees a crash loop that never gets to serve. A slot
// beyond the configured workers (scaled down) is not scraped.
func TestStartsOfAWorkerThatNeverServes(t *testing.T) {
	dir := t.TempDir()
	if err := RecordStart(dir, routes, "2"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("before any worker built the table: %v, want fs.ErrNotExist (it builds none)", err)
	}
	w1, _ := newWorker(t, dir, "1") // Desired: 2
	for range 3 {
		if err := RecordStart(dir, routes, "2"); err != nil {
			t.Fatal(err)
		}
		if err := RecordExit(dir, routes, "2", "exit-code"); err != nil {
			t.Fatal(err)
		}
	}
	if err := RecordStart(dir, routes, "3"); err != nil {
		t.Fatal(err)
	}
	if got := value(t, w1, "clusterapp_worker_starts_total", `worker="2"`); got != 3 {
		t.Errorf("starts of worker 2, which never served = %v, want 3", got)
	}
	if got := value(t, w1, "clusterapp_worker_exits_total", `result="exit-code",worker="2"`); got != 3 {
		t.Errorf("exits of worker 2 = %v, want 3", got)
	}
	s := scrape(t, w1)
	if strings.Contains(s, `clusterapp_worker_ready{worker="2"}`) || strings.Contains(s, `worker="3"`) {
		t.Errorf("a down worker's gauges, or a worker beyond the 2 configured, are scraped:\n%s", s)
	}
	if got := value(t, w1, "clusterapp_pool_workers", ""); got != 1 {
		t.Errorf("pool workers = %v, want 1", got)
	}
	if err := RecordStart(dir, routes, "0"); err == nil || !strings.Contains(err.Error(), "worker number") {
		t.Errorf("worker 0: %v", err)
	}
}

// More distinct codes than a route has entries for land in code="other".
func TestCodesBeyondTheTableAreOther(t *testing.T) {
	m, _ := newWorker(t, "", "1")
	for c := range codeEntries + 2 {
		serve(m, "/", 200+c, 1)
	}
	if got := value(t, m, "clusterapp_http_requests_total", `code="other",route="/",worker="1"`); got != 2 {
		t.Errorf("other = %v, want 2", got)
	}
}

func TestUnknownRoutePanics(t *testing.T) {
	m, _ := newWorker(t, "", "1")
	defer func() {
		if recover() == nil {
			t.Error("Instrument accepted a route the table has no place for")
		}
	}()
	m.Instrument("/nope")(http.NotFoundHandler())
}

// The accept queue is read from the shared socket itself (TCP_INFO): its
// length and limit, and time seen full is counted once per period for the
// whole pool.
func TestListenQueue(t *testing.T) {
	ln := queuedListener(t, 1, 2)
	dir := t.TempDir()
	w1, _ := newWorker(t, dir, "1")
	w2, _ := newWorker(t, dir, "2")
	w1.WatchListeners([]net.Listener{ln})
	w2.WatchListeners([]net.Listener{ln})
	addr := `address="` + ln.Addr().String() + `"`
	if got := value(t, w1, "clusterapp_listen_queue_limit", addr); got != 1 {
		t.Errorf("limit = %v, want 1", got)
	}
	if got := value(t, w1, "clusterapp_listen_queue_length", addr); got < 1 {
		t.Errorf("length = %v, want at least 1", got)
	}
	w1.sampleQueues()
	w2.sampleQueues() // the same period: not counted twice
	if got := value(t, w2, "clusterapp_listen_queue_full_seconds_total", ""); got != queueEvery.Seconds() {
		t.Errorf("full seconds = %v, want one period, %v", got, queueEvery.Seconds())
	}
}

// A worker that stops passing its health probe (frozen, hung) cannot clear
// its own ready flag: the worker answering the scrape sees its heartbeat
// age and reports it stalled and not ready, and ready again once a probe
// passes.
func TestStalledWorkerIsNotReady(t *testing.T) {
	dir := t.TempDir()
	w1, _ := newWorker(t, dir, "1")
	w2, _ := newWorker(t, dir, "2")
	now := time.Hour
	clock := func() time.Duration { return now }
	w1.clock, w2.clock = clock, clock
	w1.SetReady(true)
	w2.SetReady(true)
	if _, ok := lookup(scrape(t, w1), "clusterapp_worker_stalled", `worker="2"`); ok {
		t.Error("a worker without a watchdog is judged")
	}
	w2.WatchProbes(3 * time.Second) // a probe every second: late after 1.5s
	w2.ProbePassed()
	now += 1400 * time.Millisecond
	if r, s := value(t, w1, "clusterapp_worker_ready", `worker="2"`), value(t, w1, "clusterapp_worker_stalled", `worker="2"`); r != 1 || s != 0 {
		t.Errorf("1.4s after a passing probe: ready %v, stalled %v", r, s)
	}
	now += 200 * time.Millisecond
	if r, s := value(t, w1, "clusterapp_worker_ready", `worker="2"`), value(t, w1, "clusterapp_worker_stalled", `worker="2"`); r != 0 || s != 1 {
		t.Errorf("1.6s after a passing probe: ready %v, stalled %v", r, s)
	}
	if age := value(t, w1, "clusterapp_worker_heartbeat_age_seconds", `worker="2"`); age != 1.6 {
		t.Errorf("heartbeat age %v, want 1.6", age)
	}
	for _, w := range w1.Workers() {
		if w.Number == 2 && (w.Ready || !w.Stalled) {
			t.Errorf("Workers(): %+v", w)
		}
	}
	w2.ProbePassed()
	if r, s := value(t, w1, "clusterapp_worker_ready", `worker="2"`), value(t, w1, "clusterapp_worker_stalled", `worker="2"`); r != 1 || s != 0 {
		t.Errorf("after a passing probe again: ready %v, stalled %v", r, s)
	}
}

// Names lists exactly the families a scrape holds, so the shipped rules and
// dashboard (packaging/examples_test.go) are checked against the real ones.
func TestNamesMatchTheScrape(t *testing.T) {
	m, _ := newWorker(t, t.TempDir(), "1")
	m.WatchBalanceGate(func() bool { return true })
	m.WatchRateLimitTable(func() string { return "shared" })
	m.WatchProbes(10 * time.Second)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	m.WatchListeners([]net.Listener{ln})
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
	}
	want := append([]string(nil), Names()...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("a scrape holds\n%v\nNames() says\n%v", got, want)
	}
}

// reporter is a writer that records its status, as the worker's server gives
// every handler.
type reporter struct {
	http.ResponseWriter
	status int
}

func (r *reporter) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }
func (r *reporter) Status() int          { return r.status }

// Given a writer that reports its status, Instrument counts by it and hands
// the handler that writer itself, not a wrapper of its own.
func TestInstrumentUsesTheWritersStatus(t *testing.T) {
	m, _ := newWorker(t, t.TempDir(), "1")
	var seen http.ResponseWriter
	h := m.Instrument("/fib")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = w
		w.WriteHeader(http.StatusTeapot)
	}))
	rw := &reporter{ResponseWriter: httptest.NewRecorder()}
	h.ServeHTTP(rw, httptest.NewRequest("GET", "/fib", nil))
	if seen != rw {
		t.Errorf("the handler got %T, want the reporting writer itself", seen)
	}
	if v := value(t, m, "clusterapp_http_requests_total", `code="418",route="/fib",worker="1"`); v != 1 {
		t.Errorf("code 418 counted %v times, want 1", v)
	}
}

// The desired size is read at the scrape when the worker can (the files
// now), and is the newest worker's reading otherwise.
func TestDesiredReadAtTheScrape(t *testing.T) {
	l, _ := test.NewNullLogger()
	size, known := 3, true
	m := New(Options{Worker: "1", Version: "test", Routes: routes, Dir: t.TempDir(), Desired: 4, Start: time.Now(), Log: logrus.NewEntry(l),
		DesiredNow: func() (int, bool) { return size, known }})
	if got := value(t, m, "clusterapp_pool_workers_desired", ""); got != 3 {
		t.Errorf("desired %v, want the size read now, 3", got)
	}
	size = 1 // clusterapp scale 1: no worker restarts
	if got := value(t, m, "clusterapp_pool_workers_desired", ""); got != 1 {
		t.Errorf("desired %v after the size changed, want 1", got)
	}
	known = false
	if got := value(t, m, "clusterapp_pool_workers_desired", ""); got != 4 {
		t.Errorf("desired %v when it cannot be read, want the start's 4", got)
	}
}

// Requests net/http ended itself (server.RejectObserver) have a counter of
// their own, since no route counted them.
func TestRejectedRequestsCounted(t *testing.T) {
	m, _ := newWorker(t, "", "1")
	if got := value(t, m, "clusterapp_http_requests_rejected_total", `worker="1"`); got != 0 {
		t.Fatalf("before any: %v", got)
	}
	m.RequestRejected()
	m.RequestRejected()
	if got := value(t, m, "clusterapp_http_requests_rejected_total", `worker="1"`); got != 2 {
		t.Fatalf("rejected = %v, want 2", got)
	}
}

// A handler that panics is counted as a 500, whatever it wrote before: net/http
// recovers the panic and closes the connection, so the client got no answer
// or a cut one. It was counted as the 200 the writer reports when nothing
// was written, a failure shown as a success.
func TestPanickingHandlerCountsAsServerError(t *testing.T) {
	m, _ := newWorker(t, "", "1")
	h := m.Instrument("/fib")(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("the panic reached the caller as %v, want boom: net/http must still see it", p)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fib", nil))
	}()
	if got := value(t, m, "clusterapp_http_requests_total", `code="200",route="/fib",worker="1"`); got != 0 {
		t.Errorf("200s: %v, want 0", got)
	}
	if got := value(t, m, "clusterapp_http_requests_total", `code="500",route="/fib",worker="1"`); got != 1 {
		t.Errorf("500s: %v, want 1", got)
	}
	if got := value(t, m, "clusterapp_http_requests_in_flight", `worker="1"`); got != 0 {
		t.Errorf("in flight after the panic: %v, want 0", got)
	}
}

// The writer the access log wraps a response in passes strings on without a
// copy and files on to the wrapped writer's ReadFrom (net/http's sendfile),
// recording the implicit 200 of each.
func TestStatusWriterWritesStringsAndFiles(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Body.Grow(1 << 20)
	w := &StatusWriter{ResponseWriter: rec}
	if n := testing.AllocsPerRun(100, func() { _, _ = io.WriteString(w, "Hello World!\n") }); n != 0 {
		t.Fatalf("io.WriteString through StatusWriter: %.1f allocations a call, want 0", n)
	}
	if w.Status() != http.StatusOK {
		t.Fatalf("status after strings: %d, want 200", w.Status())
	}
	var _ io.ReaderFrom = w // io.Copy finds it
	rf := &StatusWriter{ResponseWriter: readerFromRecorder{httptest.NewRecorder(), new(int)}}
	n, err := io.Copy(rf, struct{ io.Reader }{strings.NewReader("a file")}) // no WriteTo, as an *os.File in the end
	if n != 6 || err != nil || rf.Status() != http.StatusOK || *rf.ResponseWriter.(readerFromRecorder).calls != 1 {
		t.Fatalf("io.Copy: %d %v, status %d, wrapped ReadFrom called %d times; want 6 bytes through the wrapped writer's ReadFrom once, 200",
			n, err, rf.Status(), *rf.ResponseWriter.(readerFromRecorder).calls)
	}
}

// readerFromRecorder is a recorder with a ReadFrom, as net/http's writer has.
type readerFromRecorder struct {
	*httptest.ResponseRecorder
	calls *int
}

func (r readerFromRecorder) ReadFrom(src io.Reader) (int64, error) {
	*r.calls++
	return r.Body.ReadFrom(src)
}

// queuedListener listens on loopback with the given backlog and leaves n
// connections, never accepted, in its accept queue.
func queuedListener(t *testing.T, backlog, n int) net.Listener {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, backlog); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	for range n { // never accepted: they wait in the queue
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	return ln
}
