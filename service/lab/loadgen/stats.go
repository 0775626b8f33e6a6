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
	trace         []Record // with Options.Trace
}

func newStats() *stats {
	return &stats{statusCodes: map[int]int{}, byHeader: map[string]int{}}
}

// recordResponse counts a response; named is the connection's
// Options.Header value ("" when no response on it carried one).
func (s *stats) recordResponse(resp *http.Response, named string, latency time.Duration) {
	s.responses++
	s.statusCodes[resp.StatusCode]++
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		s.non2xxLatency.record(latency)
		return
	}
	s.ok++
	s.latency.record(latency)
	if named != "" {
		s.byHeader[named]++
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

// Record is one request of a traced run (Options.Trace).
type Record struct {
	// Due is the time the request's latency counts from: its intended send
	// time in an open loop, when the goroutine was ready to send in a
	// closed one.
	Due time.Time
	// Late is how long after Due the generator began to send it: the
	// generator's own delay, included in Latency.
	Late time.Duration
	// Latency is from Due to the end of the body, or to the error.
	Latency time.Duration
	// Status is the response's status code; 0 when the request failed.
	Status int
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
		r.Trace = append(r.Trace, s.trace...)
		latency.merge(&s.latency)
		non2xxLatency.merge(&s.non2xxLatency)
	}
	slices.SortFunc(r.Trace, func(a, b Record) int { return a.Due.Compare(b.Due) })
	r.Latency = latencyOf(&latency)
	r.Non2xxLatency = latencyOf(&non2xxLatency)
}
