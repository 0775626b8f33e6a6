package loadgen

import (
	"testing"
	"time"
)

func TestBucketsAreContiguous(t *testing.T) {
	// Every bucket must start right after the previous one ends, or values
	// would be lost or double counted.
	for i := 1; i < numBuckets; i++ {
		lowest := bucketHighest(i-1) + 1
		if got := bucketIndex(lowest); got != i {
			t.Fatalf("bucketIndex(%d) = %d, want %d", lowest, got, i)
		}
		if got := bucketIndex(bucketHighest(i)); got != i {
			t.Fatalf("bucketIndex(bucketHighest(%d)) = %d", i, got)
		}
	}
	if got := bucketIndex(1<<maxValueBits - 1); got != numBuckets-1 {
		t.Fatalf("largest value lands in bucket %d, want %d", got, numBuckets-1)
	}
}

func TestHistogramPercentiles(t *testing.T) {
	var h histogram
	for v := 1; v <= 100000; v++ {
		h.record(time.Duration(v) * time.Microsecond)
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 50 * time.Millisecond},
		{0.9, 90 * time.Millisecond},
		{0.99, 99 * time.Millisecond},
		{0.999, 99900 * time.Microsecond},
	}
	for _, tt := range tests {
		got := h.percentile(tt.q)
		// Reported values are the bucket's upper end: never below the true
		// value and at most 1/64 above it.
		if got < tt.want || float64(got) > float64(tt.want)*(1+1.0/64) {
			t.Errorf("percentile(%g) = %v, want %v within +1.6%%", tt.q, got, tt.want)
		}
	}
	if h.max != 100*time.Millisecond || h.percentile(1) != h.max {
		t.Errorf("max = %v, percentile(1) = %v, want 100ms for both", h.max, h.percentile(1))
	}
	if mean := h.mean(); mean < 50*time.Millisecond-time.Microsecond || mean > 50*time.Millisecond+time.Microsecond {
		t.Errorf("mean = %v, want 50.0005ms", mean)
	}
}

func TestHistogramSmallValuesAreExact(t *testing.T) {
	var h, other histogram
	h.record(5)
	h.record(5)
	other.record(7)
	other.record(-3) // a clock step must not panic; counted as 0
	h.merge(&other)
	if h.total != 4 || h.percentile(0.5) != 5 || h.percentile(0.25) != 0 || h.max != 7 {
		t.Errorf("total %d p25 %v p50 %v max %v, want 4, 0, 5, 7", h.total, h.percentile(0.25), h.percentile(0.5), h.max)
	}
	var empty histogram
	if empty.percentile(0.99) != 0 || empty.mean() != 0 {
		t.Errorf("empty histogram reports %v, %v; want 0", empty.percentile(0.99), empty.mean())
	}
}
