package metrics

import "sync/atomic"

// InFlight is the number of this process's requests inside a route's
// handler now (admitted, not queued): clusterapp_http_requests_in_flight for
// this worker, the "in flight" of its STATUS= line.
func (m *Metrics) InFlight() int64 {
	return int64(atomic.LoadUint64(m.word(wInFlight)))
}
