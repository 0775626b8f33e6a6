package app

import (
	"net/http/httptest"
	"testing"

	"github.com/clusterapp/clusterapp/service/app/workload"
)

// BenchmarkHandlerStack measures the whole handler stack (headers, body cap,
// routing, metrics: package worker) per seed route, in-process.
func BenchmarkHandlerStack(b *testing.B) {
	h, _ := newStack(b, nil)
	for _, target := range []string{"/", "/fib?n=20", "/slow", "/healthz", "/nope"} {
		b.Run(target, func(b *testing.B) {
			req := httptest.NewRequest("GET", target, nil)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}

// BenchmarkFib is the bare recursive workload, the baseline for the stack.
func BenchmarkFib(b *testing.B) {
	for b.Loop() {
		workload.Fib(20)
	}
}
