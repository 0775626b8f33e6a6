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

func TestParseResult(t *testing.T) {
	good := `{"url":"http://127.0.0.1:8080/","requests":3,"responses":3,"ok":2,"status_codes":{"200":2,"503":1},` +
		`"elapsed_ns":1000000000,"latency":{"p99_ns":2000000},"by_header":{"1":2}}` + "\n"
	for name, out := range map[string]string{
		"alone":                    good,
		"after lines on stderr":    "warning: something\n" + good,
		"without a final new line": strings.TrimSuffix(good, "\n"),
	} {
		res, err := ParseResult([]byte(out))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if res.Requests != 3 || res.OK != 2 || res.StatusCodes[503] != 1 || res.Elapsed != time.Second ||
			res.Latency.P99 != 2*time.Millisecond || res.ByHeader["1"] != 2 {
			t.Errorf("%s: parsed %+v", name, res)
		}
	}

	for _, tt := range []struct {
		name, out string
		noResult  bool   // wraps ErrNoResult
		want      string // in the error
	}{
		{"empty", "", true, "empty output"},
		{"only white space", " \n\t\n", true, "empty output"},
		{"no object", "clusterapp-load: -url: want a host in 127.0.0.0/8\n", true, "want a host"},
		{"truncated", `{"requests":3,"ok":`, false, "parse load result: unexpected end of JSON input"},
		{"wrong type", `{"requests":"three"}`, false, "parse load result: json: cannot unmarshal string"},
		{"trailing text", "{\"requests\":3}\nsomething after\n", false, "after top-level value"},
	} {
		res, err := ParseResult([]byte(tt.out))
		if err == nil {
			t.Errorf("%s: parsed %+v, want an error", tt.name, res)
			continue
		}
		if errors.Is(err, ErrNoResult) != tt.noResult || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q (ErrNoResult: %v), want one saying %q (ErrNoResult: %v)",
				tt.name, err, errors.Is(err, ErrNoResult), tt.want, tt.noResult)
		}
	}
}

// A long output is quoted in part, so a failed load does not flood the log.
func TestParseResultQuotesLongOutputInPart(t *testing.T) {
	_, err := ParseResult([]byte(strings.Repeat("x", 10*excerptMax)))
	if err == nil || len(err.Error()) > 2*excerptMax || !strings.Contains(err.Error(), "bytes more") {
		t.Errorf("error %q, want the output cut short", err)
	}
}
