package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// protection counts the decisions of admission control, the rate limit and
// the result cache; Metrics implements their Observer interfaces with it.
type protection struct {
	admitted  prometheus.Counter
	shed      prometheus.Counter
	queueWait prometheus.Histogram
	limited   prometheus.Counter
	// limitUnavailable counts 503s while a worker has no rate-limit table
	// (CLUSTERAPP_RATE_LIMIT_FALLBACK=closed).
	limitUnavailable prometheus.Counter
	cacheHit         prometheus.Counter
	cacheMiss        prometheus.Counter
}

func newProtection(reg *prometheus.Registry) protection {
	p := protection{
		admitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clusterapp_admission_admitted_total", Help: "Requests admitted by admission control.",
		}),
		shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clusterapp_admission_shed_total", Help: "Requests answered 503 because the worker was at capacity.",
		}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "clusterapp_admission_wait_seconds", Help: "Time admitted requests waited for a free slot.",
			Buckets: []float64{0, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
		}),
		limited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clusterapp_ratelimit_limited_total", Help: "Requests answered 429 by the per-client rate limit.",
		}),
		limitUnavailable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clusterapp_ratelimit_unavailable_total", Help: "Requests answered 503 because the shared rate-limit table could not be opened and CLUSTERAPP_RATE_LIMIT_FALLBACK=closed.",
		}),
		cacheHit: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clusterapp_cache_hits_total", Help: "Result cache hits.",
		}),
		cacheMiss: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clusterapp_cache_misses_total", Help: "Result cache misses (computations, shared by concurrent identical requests).",
		}),
	}
	reg.MustRegister(p.admitted, p.shed, p.queueWait, p.limited, p.limitUnavailable, p.cacheHit, p.cacheMiss)
	return p
}

// Admitted counts a request admitted after waiting wait.
func (m *Metrics) Admitted(wait time.Duration) {
	m.prot.admitted.Inc()
	m.prot.queueWait.Observe(wait.Seconds())
}

// Shed counts a request refused at capacity.
func (m *Metrics) Shed() { m.prot.shed.Inc() }

// Limited counts a request refused by the rate limit.
func (m *Metrics) Limited() { m.prot.limited.Inc() }

// LimitUnavailable counts a request refused because the worker has no
// rate-limit table.
func (m *Metrics) LimitUnavailable() { m.prot.limitUnavailable.Inc() }

// WatchRateLimitTable exports mode() (shared, local or closed) as
// clusterapp_ratelimit_table{mode=...}: 1 for the table the rate limit is on,
// 0 for the others. Anything but shared means the shared table in the
// runtime directory could not be opened.
func (m *Metrics) WatchRateLimitTable(mode func() string) {
	for _, name := range []string{"shared", "local", "closed"} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "clusterapp_ratelimit_table",
			Help:        "1 for the table the rate limit is on: shared (every worker's), local (this worker's own while the shared one cannot be opened) or closed (none: limited routes answer 503).",
			ConstLabels: prometheus.Labels{"mode": name},
		}, func() float64 {
			if mode() == name {
				return 1
			}
			return 0
		}))
	}
}

// Hit counts a result-cache hit.
func (m *Metrics) Hit() { m.prot.cacheHit.Inc() }

// Miss counts a result-cache miss.
func (m *Metrics) Miss() { m.prot.cacheMiss.Inc() }
