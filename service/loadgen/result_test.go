package loadgen

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestShareAndMaxMinRatio(t *testing.T) {
	res := &Result{OK: 100, ByHeader: map[string]int{"w0": 60, "w1": 40}}
	if maxShare, minShare := res.Share(); maxShare != 0.6 || minShare != 0.4 {
		t.Errorf("Share() = %v, %v; want 0.6, 0.4", maxShare, minShare)
	}
	if maxShare, minShare := res.Share("w0", "w1", "w2"); maxShare != 0.6 || minShare != 0 {
		t.Errorf("Share(w0, w1, w2) = %v, %v; want 0.6, 0", maxShare, minShare)
	}
	if ratio := res.MaxMinRatio(); ratio != 1.5 {
		t.Errorf("MaxMinRatio() = %v, want 1.5", ratio)
	}
	if ratio := res.MaxMinRatio("w0", "w1", "w2"); !math.IsInf(ratio, 1) {
		t.Errorf("MaxMinRatio(w0, w1, w2) = %v, want +Inf for the idle w2", ratio)
	}
	empty := &Result{}
	if ratio := empty.MaxMinRatio(); !math.IsInf(ratio, 1) {
		t.Errorf("MaxMinRatio of no responses = %v, want +Inf", ratio)
	}
	if maxShare, minShare := empty.Share("w0"); maxShare != 0 || minShare != 0 {
		t.Errorf("Share of no responses = %v, %v; want 0, 0", maxShare, minShare)
	}
}

func TestWriteSummary(t *testing.T) {
	res := &Result{
		URL: "http://127.0.0.1:8080/", Concurrency: 4, KeepAlive: true, Header: "X-Worker",
		Requests: 12, Responses: 10, OK: 9, StatusCodes: map[int]int{200: 9, 503: 1},
		ConnectErrors: 2, ErrorSamples: []string{"dial tcp 127.0.0.1:8080: connect: connection refused"},
		Dials: 6, Elapsed: time.Second, Throughput: 10,
		Latency:       Latency{P50: 1234567 * time.Nanosecond, Max: 3 * time.Millisecond},
		Non2xxLatency: Latency{P50: 200 * time.Microsecond, P99: 200 * time.Microsecond, Max: 200 * time.Microsecond},
		ByHeader:      map[string]int{"w1": 9},
	}
	var out strings.Builder
	if err := res.WriteSummary(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"closed loop for 1s @ http://127.0.0.1:8080/",
		"12 requests, 10 responses (9 2xx), 2 errors, 10.00 responses/s",
		"p50 1.23ms",
		"200=9 503=1",
		"non-2xx  p50 200µs",
		"connect 2, read 0",
		"connection refused",
		"X-Worker  w1=9 (max/min 1.00)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	if err := res.WriteSummary(failingWriter{}); err == nil {
		t.Error("WriteSummary to a failing writer returned nil")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
