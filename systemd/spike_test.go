package systemd_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// The rate limit is one budget per client for the whole service: with two
// workers sharing the socket, a client on fresh connections (spread over
// both workers) gets the burst once, not once per worker.
func TestRateLimitIsServiceWide(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_RATE_LIMIT=1\nCLUSTERAPP_RATE_BURST=50\n"})
	b.Start(2)
	// 400 requests in well under a second: at 1/s with a burst of 50, about
	// 50 are allowed (plus one per second elapsed), whichever worker answers.
	res := b.Load("/", "-c", "4", "-n", "400", "-d", "20s", "-keepalive=false")
	ok, limited := res.StatusCodes[200], res.StatusCodes[429]
	t.Logf("%d allowed, %d limited, by worker %v, in %v", ok, limited, res.ByHeader, res.Elapsed)
	if ok+limited != 400 || res.Errors() != 0 {
		t.Fatalf("status codes %v, errors %v", res.StatusCodes, res.ErrorSamples)
	}
	// b.Start's first request already took one token of 127.0.0.1's burst.
	minAllowed, maxAllowed := 50-1, 50+int(res.Elapsed.Seconds())+1
	if ok < minAllowed || ok > maxAllowed {
		t.Fatalf("%d requests allowed, want %d..%d: the budget must not multiply by the number of workers", ok, minAllowed, maxAllowed)
	}
	if len(res.ByHeader) != 2 {
		t.Fatalf("both workers must have answered some of the allowed requests: %v", res.ByHeader)
	}
	metrics := b.Must("curl", "-s", sandbox.MetricsURL)
	if !strings.Contains(metrics, "clusterapp_ratelimit_limited_total") {
		t.Fatal("/metrics lacks the limited counter")
	}
}

// Admission control under a spike of CPU-bound requests far above what the
// pool sustains: the excess is answered 503 at once, health stays
// answerable, and no worker is restarted.
func TestAdmissionShedsSpike(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_ADMISSION_WAIT=5ms\n"})
	b.Start(2)
	// 64 connections each asking for fib(30) back to back: 16x the 4 slots.
	res := b.Load("/fib?n=30", "-c", "64", "-d", "4s")
	ok, shed := res.StatusCodes[200], res.StatusCodes[503]
	t.Logf("%d admitted (p50 %v p99 %v), %d shed, errors %d", ok, res.Latency.P50, res.Latency.P99, shed, res.Errors())
	if res.Errors() != 0 || ok == 0 || shed == 0 {
		t.Fatalf("want admitted and shed requests and no errors: codes %v errors %v", res.StatusCodes, res.ErrorSamples)
	}
	for _, unit := range b.WorkerUnits(2) {
		if n, _ := strconv.Atoi(b.Show(unit, "NRestarts")); n != 0 {
			t.Fatalf("%s restarted %d times under the spike", unit, n)
		}
	}
	metrics := b.Must("curl", "-s", sandbox.MetricsURL)
	if !strings.Contains(metrics, "clusterapp_admission_shed_total") {
		t.Fatal("/metrics lacks the shed counter")
	}
}

// The result cache, switched on in the environment file, answers repeated
// /fib from memory and says so to front caches.
func TestResultCacheFromEnvFile(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\nCLUSTERAPP_CACHE_ENTRIES=1000\n"})
	b.Start(1)
	first := b.Must("curl", "-s", "-D", "-", "-o", "/dev/null", "http://127.0.0.1:8080/fib?n=32")
	second := b.Must("curl", "-s", "-D", "-", "-o", "/dev/null", "http://127.0.0.1:8080/fib?n=32")
	if !strings.Contains(first, "X-Cache: MISS") || !strings.Contains(second, "X-Cache: HIT") || !strings.Contains(second, "Cache-Control: public, max-age=60") {
		t.Fatalf("first:\n%s\nsecond:\n%s", first, second)
	}
}
