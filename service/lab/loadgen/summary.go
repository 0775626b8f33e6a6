package loadgen

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// WriteSummary writes a short human-readable report in the spirit of wrk's:
// what ran, how many requests, latency percentiles, failures by kind and
// which workers served the responses. It returns the first write error.
func (r *Result) WriteSummary(w io.Writer) error {
	p := &summaryPrinter{w: w}
	loop := "closed loop"
	if r.Rate > 0 {
		loop = fmt.Sprintf("open loop at %g req/s", r.Rate)
	}
	conns := "keep-alive"
	if !r.KeepAlive {
		conns = "a new connection per request"
	}
	p.printf("%s for %s @ %s\n", loop, r.Elapsed.Round(time.Millisecond), r.URL)
	p.printf("  %d goroutines, %s, %d connections opened\n", r.Concurrency, conns, r.Dials)
	p.printf("  %d requests, %d responses (%d 2xx), %d errors, %.2f responses/s\n",
		r.Requests, r.Responses, r.OK, r.Errors(), r.Throughput)
	l := r.Latency
	p.printf("  latency  mean %v  p50 %v  p90 %v  p99 %v  p99.9 %v  max %v\n",
		roundLatency(l.Mean), roundLatency(l.P50), roundLatency(l.P90),
		roundLatency(l.P99), roundLatency(l.P999), roundLatency(l.Max))
	if n := r.Non2xxLatency; r.Responses > r.OK {
		p.printf("  non-2xx  p50 %v  p99 %v  max %v\n", roundLatency(n.P50), roundLatency(n.P99), roundLatency(n.Max))
	}
	p.printf("  status   %s\n", joinCounts(r.StatusCodes))
	if r.Errors() > 0 || r.Canceled > 0 {
		p.printf("  errors   connect %d, read %d, timeout %d, other %d, canceled %d\n",
			r.ConnectErrors, r.ReadErrors, r.Timeouts, r.OtherErrors, r.Canceled)
		for _, msg := range r.ErrorSamples {
			p.printf("    %s\n", msg)
		}
	}
	p.printf("  %s  %s%s\n", r.Header, joinCounts(r.ByHeader), r.balance())
	if r.Interrupted {
		p.printf("  interrupted before the planned end\n")
	}
	return p.err
}

// balance describes the spread over the workers seen, e.g. " (max/min 1.04)".
func (r *Result) balance() string {
	switch ratio := r.MaxMinRatio(); {
	case r.HeaderMissing > 0:
		return fmt.Sprintf(" (%d responses without the header)", r.HeaderMissing)
	case len(r.ByHeader) == 0:
		return ""
	case math.IsInf(ratio, 1):
		return " (max/min +Inf: a worker served nothing)"
	default:
		return fmt.Sprintf(" (max/min %.2f)", ratio)
	}
}

func joinCounts[K int | string](counts map[K]int) string {
	if len(counts) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(counts))
	for _, key := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%v=%d", key, counts[key]))
	}
	return strings.Join(parts, " ")
}

// roundLatency keeps three significant digits or so: 1.23ms, not 1.234567ms.
func roundLatency(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond / 10)
	}
}

// summaryPrinter keeps the first write error so the report reads straight.
type summaryPrinter struct {
	w   io.Writer
	err error
}

func (p *summaryPrinter) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
