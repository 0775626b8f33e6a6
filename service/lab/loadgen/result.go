package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"time"
)

// Result is what one run measured. Every attempted request is counted
// exactly once: Requests == Responses + ConnectErrors + ReadErrors +
// Timeouts + OtherErrors + Canceled.
type Result struct {
	// The options the run used, defaults filled in.
	URL         string  `json:"url"`
	Concurrency int     `json:"concurrency"`
	KeepAlive   bool    `json:"keep_alive"`
	Rate        float64 `json:"rate"` // requests per second; 0 is a closed loop
	Header      string  `json:"header"`

	Requests    int         `json:"requests"`     // attempted
	Responses   int         `json:"responses"`    // answered with any status, body read in full
	OK          int         `json:"ok"`           // answered with a 2xx status
	StatusCodes map[int]int `json:"status_codes"` // responses by status code

	ConnectErrors int `json:"connect_errors"` // the dial failed, e.g. connection refused
	ReadErrors    int `json:"read_errors"`    // reset, EOF or close after connecting
	Timeouts      int `json:"timeouts"`       // Options.Timeout expired
	OtherErrors   int `json:"other_errors"`
	// Canceled counts requests cut short because the caller cancelled the
	// run; they are not failures of the server.
	Canceled int `json:"canceled"`
	// ErrorSamples holds up to 5 distinct error messages, for a first look.
	ErrorSamples []string `json:"error_samples"`

	// Dials counts the connections opened (or attempted): Concurrency or
	// fewer with KeepAlive, one per request without.
	Dials int `json:"dials"`
	// Interrupted is true when the caller cancelled the run before it
	// reached its own limits.
	Interrupted bool          `json:"interrupted"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	// CPU is the process's CPU time (user and system, every thread) over
	// the run: the generator's own when the run has its process to itself,
	// as in clusterapp-load. Per response, between runs against the same
	// server, it gauges the machine's speed at the time: on a shared host the
	// whole machine slows down now and then, the generator with the server
	// (docs/benchmarks.md).
	CPU time.Duration `json:"cpu_ns,omitempty"`
	// Throughput is Responses per second of Elapsed.
	Throughput float64 `json:"throughput_rps"`
	// Latency is over 2xx responses only.
	Latency Latency `json:"latency"`
	// Non2xxLatency is over the other responses (e.g. a 503 from admission
	// control, a 429 from the rate limit), measured the same way, so the
	// time a server takes to turn a request away can be told apart from the
	// time it takes to serve one. Zero when every response was 2xx.
	Non2xxLatency Latency `json:"non_2xx_latency"`

	// ByHeader counts 2xx responses by the value of the Header response
	// header, i.e. by the worker that served them. A response without the
	// header counts under the value an earlier response on its connection
	// carried (a worker names itself on a connection's first response).
	ByHeader map[string]int `json:"by_header"`
	// HeaderMissing counts 2xx responses on connections that carried no
	// Header header.
	HeaderMissing int `json:"header_missing"`
	// Trace holds every request of the run in order of Due, with
	// Options.Trace; nil otherwise. Not in the JSON (WriteTrace).
	Trace []Record `json:"-"`
}

// Latency summarises response times in nanoseconds. In a closed loop a
// request's time runs from sending it to the end of its body; in an open
// loop (Rate > 0) from its intended send time. Percentiles are accurate to
// about 1.6%; Max is exact.
type Latency struct {
	Mean time.Duration `json:"mean_ns"`
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
}

func latencyOf(h *histogram) Latency {
	return Latency{
		Mean: h.mean(),
		P50:  h.percentile(0.50),
		P90:  h.percentile(0.90),
		P99:  h.percentile(0.99),
		P999: h.percentile(0.999),
		Max:  h.max,
	}
}

// Errors returns the number of failed requests, not counting Canceled.
func (r *Result) Errors() int {
	return r.ConnectErrors + r.ReadErrors + r.Timeouts + r.OtherErrors
}

// Share returns the largest and the smallest fraction of the 2xx responses
// served by one worker, identified by its Header value. expected lists the
// workers that should have served; one absent from ByHeader served nothing
// and has share 0. With no expected workers, those in ByHeader are used.
// (0, 0) when there are no workers or no 2xx responses.
func (r *Result) Share(expected ...string) (maxShare, minShare float64) {
	counts := r.workerCounts(expected)
	if len(counts) == 0 || r.OK == 0 {
		return 0, 0
	}
	return float64(counts[len(counts)-1]) / float64(r.OK), float64(counts[0]) / float64(r.OK)
}

// MaxMinRatio returns how many times more responses the busiest worker
// served than the least busy one, over the same workers as Share: 1 is an
// even spread. It returns +Inf (test with math.IsInf(ratio, 1)) when one of
// the workers served nothing, or when there are no workers at all.
func (r *Result) MaxMinRatio(expected ...string) float64 {
	counts := r.workerCounts(expected)
	if len(counts) == 0 || counts[0] == 0 {
		return math.Inf(1)
	}
	return float64(counts[len(counts)-1]) / float64(counts[0])
}

// workerCounts returns the responses of each worker, ascending.
func (r *Result) workerCounts(expected []string) []int {
	if len(expected) == 0 {
		for value := range r.ByHeader {
			expected = append(expected, value)
		}
	}
	counts := make([]int, 0, len(expected))
	for _, worker := range expected {
		counts = append(counts, r.ByHeader[worker])
	}
	sort.Ints(counts)
	return counts
}

// ErrNoResult is wrapped by ParseResult when the output holds no JSON
// object at all: the generator failed before printing, or ran without -json.
var ErrNoResult = errors.New("loadgen: no result in the output")

// ParseResult reads the result `clusterapp-load -json` prints: one JSON
// object on a line of its own, the last thing in its output. Lines before
// it are skipped, because callers that run the generator through
// `scripts/sandbox exec` get its stderr and stdout in one stream.
//
// It returns (nil, err wrapping ErrNoResult) when no line starts with '{'
// (e.g. an empty output), (nil, err) naming the JSON error and quoting the
// output when the object does not decode as a Result, and (result, nil)
// otherwise.
func ParseResult(out []byte) (*Result, error) {
	start := 0
	if !bytes.HasPrefix(out, []byte("{")) {
		start = bytes.Index(out, []byte("\n{")) + 1 // 0 when absent
		if start == 0 {
			if len(bytes.TrimSpace(out)) == 0 {
				return nil, fmt.Errorf("%w: empty output", ErrNoResult)
			}
			return nil, fmt.Errorf("%w: no JSON object in %s", ErrNoResult, excerpt(out))
		}
	}
	var res Result
	if err := json.Unmarshal(out[start:], &res); err != nil {
		return nil, fmt.Errorf("parse load result: %w; output: %s", err, excerpt(out))
	}
	return &res, nil
}

// excerptMax bounds how much of an output an error quotes: enough to see
// what the generator said, not a whole JSON result.
const excerptMax = 512

func excerpt(out []byte) string {
	if len(out) > excerptMax {
		return fmt.Sprintf("%q (%d bytes more)", out[:excerptMax], len(out)-excerptMax)
	}
	return fmt.Sprintf("%q", out)
}

// WriteTrace writes Trace as text, one request per line after a header:
// Due in Unix microseconds, then Late and Latency in microseconds, then the
// status (0: the request failed).
func (r *Result) WriteTrace(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "# due_unix_us late_us latency_us status")
	for _, rec := range r.Trace {
		fmt.Fprintf(bw, "%d %d %d %d\n", rec.Due.UnixMicro(), rec.Late.Microseconds(), rec.Latency.Microseconds(), rec.Status)
	}
	return bw.Flush()
}
