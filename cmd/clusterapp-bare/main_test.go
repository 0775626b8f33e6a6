package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The anchor must serve what the worker serves, or the ratios compare
// different work: the same bodies on / and /fib, the /slow workload, 404
// elsewhere.
func TestRoutes(t *testing.T) {
	h := Mux()
	for _, c := range []struct {
		target, body string
		code         int
	}{
		{"/", "Hello World!\n", 200},
		{"/fib?n=10", `{"fib":55,"n":10}` + "\n", 200},
		{"/fib?n=25", `{"fib":75025,"n":25}` + "\n", 200},
		{"/fib?n=x", "", 400},
		{"/healthz", `{"status":"ok"}` + "\n", 200},
		{"/nope", "", 404},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", c.target, nil))
		if rec.Code != c.code || (c.body != "" && rec.Body.String() != c.body) {
			t.Errorf("GET %s: %d %q, want %d %q", c.target, rec.Code, rec.Body.String(), c.code, c.body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/slow", nil))
	var slow struct {
		Count int     `json:"count"`
		Sum   float64 `json:"sum_of_squares"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &slow); err != nil || rec.Code != 200 || slow.Count != 100_000 || slow.Sum < 30_000 {
		t.Errorf("GET /slow: %d %q (%v), want 100000 squares summing near 33333", rec.Code, rec.Body.String(), err)
	}
}

// The program serves on the address it is given and stops on its context
// (the signal), exit status 0; bad flags are usage errors.
func TestRun(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-listen", addr}, io.Discard) }()
	var body string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		break
	}
	if body != "Hello World!\n" {
		t.Errorf("GET / on %s: %q", addr, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after its context ended: %v", err)
	}
	var stderr strings.Builder
	if err := run(context.Background(), []string{"-bogus"}, &stderr); !strings.Contains(stderr.String(), "-bogus") {
		t.Errorf("run -bogus: %v, stderr %q: want the bad flag named", err, stderr.String())
	}
}

// BenchmarkBare is the allocation baseline for service/app's
// BenchmarkHandlerStack: the same requests through net/http's mux alone.
func BenchmarkBare(b *testing.B) {
	h := Mux()
	for _, target := range []string{"/", "/fib?n=20", "/healthz"} {
		b.Run(target, func(b *testing.B) {
			req := httptest.NewRequest("GET", target, nil)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
