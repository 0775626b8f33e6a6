package loadgen

import (
	"net/http"
	"slices"
	"time"
)

// maxErrorSamples bounds Result.ErrorSamples.
const maxErrorSamples = 5

// stats is what one goroutine measured. Each goroutine owns its stats, so
// recording needs no lock; Run merges them once all goroutines are done.
type stats struct {
	requests      int
	responses     int
	ok            int
	statusCodes   map[int]int
	byHeader      map[string]int
	headerMissing int
	errors        [numErrorKinds]int
	errorSamples  []string
	latency       histogram
	non2xxLatency histogram
}

func newStats() *stats {
	return &stats{statusCodes: map[int]int{}, byHeader: map[string]int{}}
}

func (s *stats) recordResponse(resp *http.Response, header string, latency time.Duration) {
	s.responses++
	s.statusCodes[resp.StatusCode]++
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		s.non2xxLatency.record(latency)
		return
	}
	s.ok++
	s.latency.record(latency)
	if value := resp.Header.Get(header); value != "" {
		s.byHeader[value]++
	} else {
		s.headerMissing++
	}
}

func (s *stats) recordError(err error, canceled bool) {
	kind := classify(err, canceled)
	s.errors[kind]++
	if kind != kindCanceled {
		s.errorSamples = addSample(s.errorSamples, errorSample(err))
	}
}

func addSample(samples []string, msg string) []string {
	if len(samples) >= maxErrorSamples || slices.Contains(samples, msg) {
		return samples
	}
	return append(samples, msg)
}

// merge adds the stats of every goroutine into r.
func (r *Result) merge(all []*stats) {
	var latency, non2xxLatency histogram
	r.StatusCodes = map[int]int{}
	r.ByHeader = map[string]int{}
	r.ErrorSamples = []string{}
	for _, s := range all {
		r.Requests += s.requests
		r.Responses += s.responses
		r.OK += s.ok
		r.HeaderMissing += s.headerMissing
		for code, n := range s.statusCodes {
			r.StatusCodes[code] += n
		}
		for value, n := range s.byHeader {
			r.ByHeader[value] += n
		}
		r.ConnectErrors += s.errors[kindConnect]
		r.ReadErrors += s.errors[kindRead]
		r.Timeouts += s.errors[kindTimeout]
		r.OtherErrors += s.errors[kindOther]
		r.Canceled += s.errors[kindCanceled]
		for _, msg := range s.errorSamples {
			r.ErrorSamples = addSample(r.ErrorSamples, msg)
		}
		latency.merge(&s.latency)
		non2xxLatency.merge(&s.non2xxLatency)
	}
	r.Latency = latencyOf(&latency)
	r.Non2xxLatency = latencyOf(&non2xxLatency)
}
