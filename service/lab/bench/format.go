package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/loadgen"
)

// Goodput is the 2xx responses per second of a run: what a configuration
// served, not counting the requests it turned away.
func Goodput(r *loadgen.Result) float64 {
	if r == nil || r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// Ratio formats num/den as "1.93×"; "n/a" when den is 0 or either is
// missing (NaN), "+Inf" when only den is 0 but num is not.
func Ratio(num, den float64) string {
	switch {
	case math.IsNaN(num) || math.IsNaN(den) || (num == 0 && den == 0):
		return "n/a"
	case den == 0:
		return "+Inf"
	}
	return fmt.Sprintf("%.2f×", num/den)
}

// Share formats the max/min ratio of 2xx responses between the workers of a
// run: "–" for a single worker, "+Inf (worker 2 got nothing)" when one of
// them served nothing.
func Share(r *loadgen.Result, workers int) string {
	if workers < 2 {
		return "–"
	}
	names := make([]string, workers)
	for i := range names {
		names[i] = strconv.Itoa(i + 1)
	}
	ratio := r.MaxMinRatio(names...)
	if math.IsInf(ratio, 1) {
		for _, name := range names {
			if r.ByHeader[name] == 0 {
				return fmt.Sprintf("+Inf (worker %s got nothing)", name)
			}
		}
		return "+Inf"
	}
	return fmt.Sprintf("%.2f", ratio)
}

// Errors formats a run's failures: "0", or the total with the kinds that
// occurred, e.g. "12 (timeout 12)".
func Errors(r *loadgen.Result) string {
	if r.Errors() == 0 {
		return "0"
	}
	s, sep := fmt.Sprintf("%d (", r.Errors()), ""
	for _, kind := range []struct {
		name string
		n    int
	}{{"connect", r.ConnectErrors}, {"read", r.ReadErrors}, {"timeout", r.Timeouts}, {"other", r.OtherErrors}} {
		if kind.n > 0 {
			s += fmt.Sprintf("%s%s %d", sep, kind.name, kind.n)
			sep = ", "
		}
	}
	return s + ")"
}

// sumRuns adds up the failures of several runs into one Result for Errors.
func sumRuns(runs []*loadgen.Result) *loadgen.Result {
	var sum loadgen.Result
	for _, r := range runs {
		sum.ConnectErrors += r.ConnectErrors
		sum.ReadErrors += r.ReadErrors
		sum.Timeouts += r.Timeouts
		sum.OtherErrors += r.OtherErrors
	}
	return &sum
}

// non2xx counts the responses that were not 2xx over several runs.
func non2xx(runs []*loadgen.Result) int {
	n := 0
	for _, r := range runs {
		n += r.Responses - r.OK
	}
	return n
}

// Millis formats a latency in milliseconds with three significant digits.
func Millis(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case d == 0:
		return "–"
	case ms >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.2f ms", ms)
	}
}

// MiB formats KiB as MiB with one decimal.
func MiB(kib int) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// ShareRuns formats the share over the throughput run and its repeats:
// the median, then every run's ratio, e.g. "1.09 (1.25, 1.09, 1.04)".
func ShareRuns(rr *RouteResult, workers int) string {
	if workers < 2 || len(rr.Repeats) == 0 {
		return Share(rr.Max, workers)
	}
	names := make([]string, workers)
	for i := range names {
		names[i] = strconv.Itoa(i + 1)
	}
	runs := rr.ClosedLoops()
	ratios := make([]float64, len(runs))
	each := make([]string, len(runs))
	for i, r := range runs {
		ratios[i] = r.MaxMinRatio(names...)
		each[i] = Share(r, workers)
	}
	m := "+Inf"
	if med := median(ratios); !math.IsInf(med, 1) {
		m = fmt.Sprintf("%.2f", med)
	}
	return fmt.Sprintf("%s (%s)", m, strings.Join(each, ", "))
}

// RateRuns formats the 2xx rate over the closed-loop runs: the median, then
// the lowest and highest when there are several, e.g. "3132.4 (3050.1-3190.0)".
func RateRuns(rr *RouteResult) string {
	runs := rr.ClosedLoops()
	if len(runs) == 1 {
		return fmt.Sprintf("%.1f", Goodput(runs[0]))
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range runs {
		lo, hi = math.Min(lo, Goodput(r)), math.Max(hi, Goodput(r))
	}
	return fmt.Sprintf("%.1f (%.1f-%.1f)", rr.MedianGoodput(), lo, hi)
}

// median of values (the mean of the middle two for an even count); 0 for none.
func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	mid := len(sorted) / 2
	if len(sorted)%2 == 0 {
		return (sorted[mid-1] + sorted[mid]) / 2
	}
	return sorted[mid]
}
