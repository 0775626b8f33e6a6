package main

import "testing"

// The p99 of the requests between two snapshots is the bound of the bucket
// that holds it.
func TestQuantile(t *testing.T) {
	n := 16 // the duration buckets and +Inf
	before, after := make([]uint64, n), make([]uint64, n)
	after[2] = 98 // ≤2.5ms
	after[5] = 2  // ≤25ms
	if got := quantile(0.99, before, after); got != "≤25ms" {
		t.Errorf("p99 = %s, want ≤25ms", got)
	}
	after[2], after[5] = 99, 1 // 99 of 100 within 2.5ms
	if got := quantile(0.99, before, after); got != "≤2.5ms" {
		t.Errorf("p99 = %s, want ≤2.5ms", got)
	}
	if got := quantile(0.99, after, after); got != "-" {
		t.Errorf("no requests: %s", got)
	}
	after[n-1] = 1000
	if got := quantile(0.99, before, after); got != ">30s" {
		t.Errorf("beyond the last bound: %s", got)
	}
}
