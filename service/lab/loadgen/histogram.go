package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// The histogram is log-linear, like HdrHistogram: values below subBuckets ns
// have a bucket each; above that, every power-of-two range is split into
// subBuckets/2 equal buckets, so a bucket is at most 1/64 (1.6%) of its
// values wide. Values are clamped below 2^maxValueBits ns (about 73 min),
// longer than any run can last, which fixes the size at numBuckets.
const (
	subBucketBits = 7
	subBuckets    = 1 << subBucketBits
	halfBuckets   = subBuckets / 2
	maxValueBits  = 42
	numBuckets    = subBuckets + (maxValueBits-subBucketBits)*halfBuckets
)

// histogram counts latencies in constant memory; the zero value is empty.
type histogram struct {
	counts [numBuckets]uint64
	total  uint64
	sum    float64 // ns; float so a long run cannot overflow it
	max    time.Duration
}

func (h *histogram) record(d time.Duration) {
	v := uint64(max(d, 0))
	v = min(v, 1<<maxValueBits-1)
	h.counts[bucketIndex(v)]++
	h.total++
	h.sum += float64(v)
	h.max = max(h.max, time.Duration(v))
}

func (h *histogram) merge(other *histogram) {
	for i, c := range other.counts {
		h.counts[i] += c
	}
	h.total += other.total
	h.sum += other.sum
	h.max = max(h.max, other.max)
}

// percentile returns the smallest recorded value v such that a fraction q of
// the values is <= v, rounded up to its bucket's upper end and never above
// the exact maximum. It returns 0 for an empty histogram.
func (h *histogram) percentile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := max(uint64(math.Ceil(q*float64(h.total))), 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(bucketHighest(i)), h.max)
		}
	}
	return h.max
}

func (h *histogram) mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.total))
}

func bucketIndex(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - subBucketBits // >= 1; v>>shift is in [64, 128)
	return subBuckets + (shift-1)*halfBuckets + int(v>>shift) - halfBuckets
}

// bucketHighest is the largest value that falls into bucket i.
func bucketHighest(i int) uint64 {
	if i < subBuckets {
		return uint64(i)
	}
	k := i - subBuckets
	shift := k/halfBuckets + 1
	mantissa := uint64(k%halfBuckets + halfBuckets)
	return (mantissa+1)<<shift - 1
}
