// Package metrics holds the worker's Prometheus registry and the middleware
// that feeds it: requests by route and status, a latency histogram, requests
// in flight, connections open and accepted, and the worker's identity.
//
// Each worker exposes its own /metrics; Prometheus (or `clusterapp status`)
// sums over workers. The instance label says which worker a series comes from
// even when all workers sit behind one shared socket and a scrape lands on
// whichever worker accepts it.
//
// Route labels come from the router's fixed set of routes, never from the
// raw path, so a client requesting random URLs cannot blow up cardinality.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one worker's registry and instruments.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	inFlight  prometheus.Gauge
	connsOpen prometheus.Gauge
	accepted  prometheus.Counter
	prot      protection
	deferred  prometheus.Histogram
}

// New registers the worker's metrics, the Go runtime and process collectors,
// and clusterapp_worker_info{instance,version} and
// clusterapp_worker_start_time_seconds.
func New(instance, version string, start time.Time) *Metrics {
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) prometheus.Collector { reg.MustRegister(c); return c }
	m := &Metrics{
		reg: reg,
		requests: f(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clusterapp_http_requests_total", Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"})).(*prometheus.CounterVec),
		duration: f(prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clusterapp_http_request_duration_seconds",
			Help:    "Time from the end of the request headers to the end of the handler, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"})).(*prometheus.HistogramVec),
		inFlight: f(prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "clusterapp_http_requests_in_flight", Help: "Requests being handled now.",
		})).(prometheus.Gauge),
		connsOpen: f(prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "clusterapp_http_connections_open", Help: "Client connections open on this worker.",
		})).(prometheus.Gauge),
		accepted: f(prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clusterapp_http_connections_accepted_total", Help: "Client connections this worker accepted.",
		})).(prometheus.Counter),
	}
	m.prot = newProtection(reg)
	m.deferred = newBalanceMetrics(reg)
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clusterapp_worker_info", Help: "Always 1; labels name the worker instance and version.",
		ConstLabels: prometheus.Labels{"instance": instance, "version": version},
	})
	info.Set(1)
	started := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clusterapp_worker_start_time_seconds", Help: "When this worker process started, in seconds since the Unix epoch.",
		ConstLabels: prometheus.Labels{"instance": instance},
	})
	started.Set(float64(start.UnixNano()) / 1e9)
	reg.MustRegister(info, started, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry returns the registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ConnOpened counts a new client connection.
func (m *Metrics) ConnOpened() { m.accepted.Inc(); m.connsOpen.Inc() }

// ConnClosed counts a closed client connection.
func (m *Metrics) ConnClosed() { m.connsOpen.Dec() }

type unobservedKey struct{}

// Unobserved marks ctx so requests carrying it are not counted: the
// watchdog's internal health probe goes through the real handler stack but
// is not client traffic.
func Unobserved(ctx context.Context) context.Context {
	return context.WithValue(ctx, unobservedKey{}, true)
}

// IsUnobserved reports whether ctx was marked by Unobserved.
func IsUnobserved(ctx context.Context) bool {
	v, _ := ctx.Value(unobservedKey{}).(bool)
	return v
}

// Instrument wraps a route's handler so its requests are counted and timed
// under the given route label.
func (m *Metrics) Instrument(route string, next http.Handler) http.Handler {
	dur := m.duration.WithLabelValues(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsUnobserved(r.Context()) {
			next.ServeHTTP(w, r)
			return
		}
		m.inFlight.Inc()
		start := time.Now()
		sw := &StatusWriter{ResponseWriter: w}
		defer func() {
			m.inFlight.Dec()
			dur.Observe(time.Since(start).Seconds())
			m.requests.WithLabelValues(route, strconv.Itoa(sw.Status())).Inc()
		}()
		next.ServeHTTP(sw, r)
	})
}

// StatusWriter records the status code written through it.
type StatusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records code and passes it on.
func (w *StatusWriter) WriteHeader(code int) {
	if w.status == 0 {
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

// Status is the code written, 200 if the handler wrote nothing.
func (w *StatusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
