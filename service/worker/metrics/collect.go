package metrics

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/watchdog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry returns a registry that reads the pool's numbers at each Gather.
func (m *Metrics) Registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(poolCollector{m: m})
	return reg
}

// Handler serves the pool's metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	reg := m.Registry()
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, ErrorLog: errorLog{m}})
}

type errorLog struct{ m *Metrics }

func (e errorLog) Println(v ...any) { e.m.opts.Log.Warn(v...) }

// Worker is one live worker's numbers, read from the table.
type Worker struct {
	Number  int
	PID     int
	StartNs int64
	Starts  uint64
	Ready   bool // false while Stalled too
	// Stalled: no health probe passed for watchdog.LateAfter (frozen or
	// hung), judged at the reading (WatchProbes).
	Stalled   bool
	Requests  uint64 // every route and code
	InFlight  uint64
	ConnsOpen uint64
	RSS       uint64
	CPUNs     uint64
	// Latency counts requests by duration bucket (DurationBounds, then
	// +Inf), every route together, not cumulative.
	Latency []uint64
}

// DurationBounds are the upper bounds, in seconds, of Worker.Latency's
// buckets but the last (+Inf).
func DurationBounds() []float64 { return append([]float64(nil), durationBuckets...) }

// Workers returns the live workers' numbers, by worker number (this worker
// included; only this one when it counts alone).
func (m *Metrics) Workers() []Worker {
	var out []Worker
	now := m.clock()
	m.eachLive(func(slot int) {
		v := func(w int) uint64 { return atomic.LoadUint64(&m.words[slot*m.lay.perSlot+w]) }
		h := heartbeatOf(v, now)
		wk := Worker{
			Number: slot + 1, PID: int(v(wPID)), StartNs: int64(v(wStartNs)), Starts: v(wStarts),
			Ready: v(wReady) == 1 && !h.stalled, Stalled: h.stalled,
			InFlight: v(wInFlight), ConnsOpen: v(wConnsOpen), RSS: v(wRSS), CPUNs: v(wCPUNs),
		}
		wk.Latency = make([]uint64, len(durationBuckets)+1)
		for _, b := range m.lay.route {
			for i := range wk.Latency {
				wk.Latency[i] += v(b.duration.off + i)
			}
			for e := range codeEntries {
				wk.Requests += v(b.codes + 2*e + 1)
			}
			wk.Requests += v(b.codes + 2*codeEntries)
		}
		out = append(out, wk)
	})
	return out
}

// heartbeat is a slot's last passing health probe, seen at a scrape.
type heartbeat struct {
	known   bool          // the worker runs its probe under a watchdog
	age     time.Duration // since the probe last passed
	stalled bool          // age is past watchdog.LateAfter
}

// heartbeatOf reads a slot's heartbeat at now (shm.Clock). The age is
// measured on the reader's clock: the stalled worker's own cannot move.
func heartbeatOf(v func(int) uint64, now time.Duration) heartbeat {
	timeout := time.Duration(v(wWatchdogNs))
	if timeout <= 0 {
		return heartbeat{}
	}
	age := max(now-time.Duration(v(wProbedNs)), 0)
	return heartbeat{known: true, age: age, stalled: age > watchdog.LateAfter(timeout)}
}

// eachLive calls f for every live slot in order: this worker's own, and in
// the pool's table every slot another process claims.
func (m *Metrics) eachLive(f func(slot int)) {
	if !m.shared {
		f(m.self)
		return
	}
	for s := range Slots {
		if s == m.self {
			f(s)
			continue
		}
		if live, err := m.region.Claimed(s*m.lay.perSlot, m.lay.perSlot); err == nil && live {
			f(s)
		}
	}
}

// poolCollector turns the table into metrics at each scrape. It describes
// nothing up front (an "unchecked" collector): its series depend on which
// workers are live.
type poolCollector struct{ m *Metrics }

func (poolCollector) Describe(chan<- *prometheus.Desc) {}

var (
	dRequests    = desc("clusterapp_http_requests_total", "HTTP requests answered, by worker, route and status code.", "route", "code")
	dDuration    = desc("clusterapp_http_request_duration_seconds", "Time from the end of the request headers to the end of the handler, by worker and route.", "route")
	dInFlight    = desc("clusterapp_http_requests_in_flight", "Requests inside a route's handler now (admitted, not queued).")
	dConnsOpen   = desc("clusterapp_http_connections_open", "Client connections open on the worker.")
	dAccepted    = desc("clusterapp_http_connections_accepted_total", "Client connections the worker accepted.")
	dRejected    = desc("clusterapp_http_requests_rejected_total", "Requests net/http ended before a route saw them, so in no other count: malformed (400), headers over CLUSTERAPP_MAX_HEADER_BYTES (431), an unsupported version or transfer encoding (501, 505), headers not complete within CLUSTERAPP_READ_HEADER_TIMEOUT (slowloris), the client leaving mid-headers, or a connection sending nothing within that timeout.")
	dAdmitted    = desc("clusterapp_admission_admitted_total", "Requests admitted by admission control.")
	dShed        = desc("clusterapp_admission_shed_total", "Requests answered 503 because the worker was at capacity.")
	dWait        = desc("clusterapp_admission_wait_seconds", "Time admitted requests waited for a free slot.")
	dLimited     = desc("clusterapp_ratelimit_limited_total", "Requests answered 429 by the per-client rate limit.")
	dUnavailable = desc("clusterapp_ratelimit_unavailable_total", "Requests answered 503 because the shared rate-limit table could not be opened and CLUSTERAPP_RATE_LIMIT_FALLBACK=closed.")
	dRateTable   = desc("clusterapp_ratelimit_table", "1 for the table the rate limit is on: shared (every worker's), local (this worker's own while the shared one cannot be opened) or closed (none: limited routes answer 503).", "mode")
	dHits        = desc("clusterapp_cache_hits_total", "Result cache hits.")
	dMisses      = desc("clusterapp_cache_misses_total", "Result cache misses (computations, shared by concurrent identical requests).")
	dDeferred    = desc("clusterapp_balance_accept_deferred_seconds", "Accepts the worker put off so a less-loaded worker could take the connection, by how long.")
	dMoved       = desc("clusterapp_balance_connections_moved_total", "Keep-alive connections the worker ended after a response (Connection: close) because its requests were turned away or waited half the admission wait for a slot while another worker held at least two connections fewer: the client reconnects and the accept gate hands the connection to the less-loaded worker.")
	dGate        = desc("clusterapp_balance_gate_open", "1 while the accept gate balances connections (clients reuse them), 0 while it stays out of the way.")
	dReady       = desc("clusterapp_worker_ready", "1 while the worker serves, 0 while it starts, drains or is stalled (clusterapp_worker_stalled).")
	dStalled     = desc("clusterapp_worker_stalled", "1 while no health probe of the worker has passed for 1.5 probe intervals (a third of WatchdogSec= each): frozen (SIGSTOP) or hung; systemd's watchdog kills it at WatchdogSec=.")
	dProbeAge    = desc("clusterapp_worker_heartbeat_age_seconds", "Seconds since the worker's health probe last passed (each pass is followed by its watchdog ping), at the scrape; it grows while the worker is frozen or hung.")
	dStartTime   = desc("clusterapp_worker_start_time_seconds", "When the worker's process started, in seconds since the Unix epoch.")
	dStarts      = desc("clusterapp_worker_starts_total", "Processes started as this worker (1 + restarts) since the runtime directory was created.")
	dExits       = desc("clusterapp_worker_exits_total", "Worker processes that ended, by systemd's $SERVICE_RESULT (watchdog: killed by the watchdog).", "result")
	dRecycles    = desc("clusterapp_worker_recycles_total", "Worker processes that drained and exited to be replaced by a fresh one, by reason: requests (CLUSTERAPP_MAX_REQUESTS), memory (CLUSTERAPP_MAX_RSS, or a live heap over the Go heap limit: a leak, if it repeats), tables (a shared table lost its file name).", "reason")
	dRSS         = desc("process_resident_memory_bytes", "Resident memory of the worker's process.")
	dCPU         = desc("process_cpu_seconds_total", "User and system CPU time of the worker's process.")
	dFDs         = desc("process_open_fds", "Open file descriptors of the worker's process.")
	dGoroutines  = desc("go_goroutines", "Goroutines in the worker's process.")
	dGOMAXPROCS  = desc("go_sched_gomaxprocs_threads", "The worker's GOMAXPROCS: how many threads run Go code at once.")

	dPoolWorkers = prometheus.NewDesc("clusterapp_pool_workers", "Worker processes running now (live slots in the metrics table).", nil, nil)
	dDesired     = prometheus.NewDesc("clusterapp_pool_workers_desired", "Workers the pool is configured to run (CLUSTERAPP_WORKERS in the environment and scale files at the scrape; as the newest worker read it when they cannot be read).", nil, nil)
	dBuild       = prometheus.NewDesc("clusterapp_build_info", "Always 1; labels name the version of the program that answered the scrape (the metrics exporter, under systemd: the workers' program).", []string{"version", "goversion"}, nil)
	dQueueLen    = prometheus.NewDesc("clusterapp_listen_queue_length", "Connections waiting in the service socket's accept queue now.", []string{"address"}, nil)
	dQueueLimit  = prometheus.NewDesc("clusterapp_listen_queue_limit", "The service socket's accept queue limit (Backlog=, capped by net.core.somaxconn).", []string{"address"}, nil)
	dQueueFull   = prometheus.NewDesc("clusterapp_listen_queue_full_seconds_total", "Time the service socket's accept queue was seen at its limit (sampled every 100ms): the kernel drops new connections then.", nil, nil)
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append([]string{"worker"}, labels...), nil)
}

// Names lists every metric name a scrape can return, for the shipped alert
// rules and dashboard to be checked against.
func Names() []string {
	return []string{
		"clusterapp_http_requests_total", "clusterapp_http_request_duration_seconds", "clusterapp_http_requests_in_flight",
		"clusterapp_http_connections_open", "clusterapp_http_connections_accepted_total", "clusterapp_http_requests_rejected_total",
		"clusterapp_admission_admitted_total",
		"clusterapp_admission_shed_total", "clusterapp_admission_wait_seconds", "clusterapp_ratelimit_limited_total",
		"clusterapp_ratelimit_unavailable_total", "clusterapp_ratelimit_table", "clusterapp_cache_hits_total",
		"clusterapp_cache_misses_total", "clusterapp_balance_accept_deferred_seconds", "clusterapp_balance_gate_open",
		"clusterapp_balance_connections_moved_total",
		"clusterapp_worker_ready", "clusterapp_worker_stalled", "clusterapp_worker_heartbeat_age_seconds",
		"clusterapp_worker_start_time_seconds", "clusterapp_worker_starts_total",
		"clusterapp_worker_exits_total", "clusterapp_worker_recycles_total", "process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds",
		"go_goroutines", "go_sched_gomaxprocs_threads", "clusterapp_pool_workers", "clusterapp_pool_workers_desired",
		"clusterapp_build_info", "clusterapp_listen_queue_length", "clusterapp_listen_queue_limit",
		"clusterapp_listen_queue_full_seconds_total",
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	if m.self >= 0 {
		m.sampleWatched() // this worker's own gauges, fresh
	}
	live, desired, newest := 0, uint64(0), int64(0)
	now := m.clock()
	var isLive [Slots]bool
	m.eachLive(func(slot int) {
		live++
		isLive[slot] = true
		v := func(w int) uint64 { return atomic.LoadUint64(&m.words[slot*m.lay.perSlot+w]) }
		if start := int64(v(wStartNs)); start >= newest {
			newest, desired = start, v(wDesired)
		}
		c.collectSlot(ch, slot, v, heartbeatOf(v, now))
	})
	if now := m.opts.DesiredNow; now != nil {
		if n, ok := now(); ok {
			desired = uint64(n)
		}
	}
	c.collectDown(ch, &isLive, desired)
	ch <- prometheus.MustNewConstMetric(dPoolWorkers, prometheus.GaugeValue, float64(live))
	ch <- prometheus.MustNewConstMetric(dDesired, prometheus.GaugeValue, float64(desired))
	ch <- prometheus.MustNewConstMetric(dBuild, prometheus.GaugeValue, 1, m.opts.Version, runtime.Version())
	for _, q := range m.scrapeQueues() {
		ch <- prometheus.MustNewConstMetric(dQueueLen, prometheus.GaugeValue, float64(q.length), q.addr)
		ch <- prometheus.MustNewConstMetric(dQueueLimit, prometheus.GaugeValue, float64(q.limit), q.addr)
	}
	ch <- prometheus.MustNewConstMetric(dQueueFull, prometheus.CounterValue, float64(atomic.LoadUint64(m.pool(pFullNs)))/1e9)
}

// collectDown exports the starts and exits of each configured worker that
// is down but has started before (a slot up to desired that no process
// holds, with starts counted): a worker failing in a loop before it serves
// (a setting it refuses, a process that never reaches the worker) claims
// no slot, and without these series the restarts alert could not see it.
// Its other series (ready, in flight, ...) are a live process's, and are
// absent; clusterapp_pool_workers below desired says it is down.
func (c poolCollector) collectDown(ch chan<- prometheus.Metric, isLive *[Slots]bool, desired uint64) {
	m := c.m
	if !m.shared {
		return
	}
	for slot := 0; slot < min(int(desired), Slots); slot++ {
		v := func(w int) uint64 { return atomic.LoadUint64(&m.words[slot*m.lay.perSlot+w]) }
		if isLive[slot] || v(wStarts) == 0 {
			continue
		}
		name := strconv.Itoa(slot + 1)
		ch <- prometheus.MustNewConstMetric(dStarts, prometheus.CounterValue, float64(v(wStarts)), name)
		for i, r := range ExitResults {
			ch <- prometheus.MustNewConstMetric(dExits, prometheus.CounterValue, float64(v(wExits+i)), name, r)
		}
		for i, r := range RecycleReasons {
			ch <- prometheus.MustNewConstMetric(dRecycles, prometheus.CounterValue, float64(v(recyclesOff+i)), name, r)
		}
	}
}

func (c poolCollector) collectSlot(ch chan<- prometheus.Metric, slot int, v func(int) uint64, h heartbeat) {
	m := c.m
	name := m.opts.Worker
	if slot != m.self || m.number != 0 {
		name = strconv.Itoa(slot + 1)
	}
	counter := func(d *prometheus.Desc, w int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v(w)), name)
	}
	gauge := func(d *prometheus.Desc, x float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, x, append([]string{name}, labels...)...)
	}
	hist := func(d *prometheus.Desc, h histogram, labels ...string) {
		buckets := make(map[float64]uint64, len(h.bounds))
		var count uint64
		for i, b := range h.bounds {
			count += v(h.off + i)
			buckets[b] = count
		}
		count += v(h.off + len(h.bounds))
		ch <- prometheus.MustNewConstHistogram(d, count, float64(v(h.off+len(h.bounds)+1))/1e9, buckets, append([]string{name}, labels...)...)
	}
	for _, w := range []struct {
		d *prometheus.Desc
		w int
	}{{dAccepted, wAccepted}, {dRejected, wRejected}, {dAdmitted, wAdmitted}, {dShed, wShed}, {dLimited, wLimited}, {dUnavailable, wUnavailable}, {dHits, wHits}, {dMisses, wMisses}, {dStarts, wStarts}, {dMoved, wMoved}} {
		counter(w.d, w.w)
	}
	ch <- prometheus.MustNewConstMetric(dCPU, prometheus.CounterValue, float64(v(wCPUNs))/1e9, name)
	for i, r := range ExitResults {
		ch <- prometheus.MustNewConstMetric(dExits, prometheus.CounterValue, float64(v(wExits+i)), name, r)
	}
	for i, r := range RecycleReasons {
		ch <- prometheus.MustNewConstMetric(dRecycles, prometheus.CounterValue, float64(v(recyclesOff+i)), name, r)
	}
	gauge(dInFlight, float64(v(wInFlight)))
	gauge(dConnsOpen, float64(v(wConnsOpen)))
	ready, stalled := float64(v(wReady)), 0.0
	if h.stalled {
		ready, stalled = 0, 1 // its own flag says 1: it cannot clear it
	}
	gauge(dReady, ready)
	if h.known {
		gauge(dStalled, stalled)
		gauge(dProbeAge, h.age.Seconds())
	}
	gauge(dStartTime, float64(v(wStartNs))/1e9)
	gauge(dRSS, float64(v(wRSS)))
	gauge(dFDs, float64(v(wFDs)))
	gauge(dGoroutines, float64(v(wGoroutines)))
	gauge(dGOMAXPROCS, float64(v(wGOMAXPROCS)))
	if g := v(wGate); g != 0 {
		gauge(dGate, float64(g-1))
	}
	if t := v(wRateTable); t != 0 {
		for i, mode := range rateTables {
			x := 0.0
			if uint64(i+1) == t {
				x = 1
			}
			gauge(dRateTable, x, mode)
		}
	}
	hist(dWait, m.lay.wait)
	hist(dDeferred, m.lay.deferred)
	for i, b := range m.lay.route {
		route := m.lay.routes[i]
		hist(dDuration, b.duration, route)
		for e := range codeEntries {
			code := v(b.codes + 2*e)
			if code == 0 {
				break
			}
			ch <- prometheus.MustNewConstMetric(dRequests, prometheus.CounterValue, float64(v(b.codes+2*e+1)), name, route, strconv.FormatUint(code, 10))
		}
		if other := v(b.codes + 2*codeEntries); other > 0 {
			ch <- prometheus.MustNewConstMetric(dRequests, prometheus.CounterValue, float64(other), name, route, "other")
		}
	}
}

// StatusWriter records the status code written through it.
type StatusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records code and passes it on.
func (w *StatusWriter) WriteHeader(code int) {
	if w.status == 0 && (code < 100 || code >= 200) { // 1xx (103 Early Hints) come before the status
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200 and passes b on.
func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// WriteString records an implicit 200 and passes s on without the copy
// io.WriteString makes for a writer that lacks it.
func (w *StatusWriter) WriteString(s string) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return io.WriteString(w.ResponseWriter, s)
}

// ReadFrom records an implicit 200 and sends what r holds through the
// wrapped writer's ReadFrom (net/http's hands a file to sendfile), where
// io.Copy into a writer without it copies through a buffer.
func (w *StatusWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return io.Copy(w.ResponseWriter, r)
}

// Status is the code written, 200 if the handler wrote nothing.
func (w *StatusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush sends what the handler wrote so far, recording an implicit 200: a
// streaming handler asserting w.(http.Flusher) does not look through Unwrap.
func (w *StatusWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush() // a client that left gets nothing; the next Write says so
}

// Hijack hands the connection over to the handler (WebSocket libraries
// assert w.(http.Hijacker)); its error is net/http's when it cannot.
func (w *StatusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}
