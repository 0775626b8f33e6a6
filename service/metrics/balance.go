package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// balanceDeferBuckets span the accept gate's deferrals, which MaxDefer
// (20ms by default) bounds.
var balanceDeferBuckets = []float64{.0005, .001, .002, .005, .01, .02, .05}

func newBalanceMetrics(reg *prometheus.Registry) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "clusterapp_balance_accept_deferred_seconds",
		Help:    "Accepts this worker put off so a less-loaded worker could take the connection, by how long.",
		Buckets: balanceDeferBuckets,
	})
	reg.MustRegister(h)
	return h
}

// AcceptDeferred counts an accept put off for d (balance.Observer).
func (m *Metrics) AcceptDeferred(d time.Duration) { m.deferred.Observe(d.Seconds()) }

// WatchBalanceGate exports open() as clusterapp_balance_gate_open: 1 while
// the accept gate is on (clients reuse connections), 0 while it is off.
func (m *Metrics) WatchBalanceGate(open func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "clusterapp_balance_gate_open",
		Help: "1 while the accept gate balances connections (clients reuse them), 0 while it stays out of the way.",
	}, func() float64 {
		if open() {
			return 1
		}
		return 0
	}))
}
