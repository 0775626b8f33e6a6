package bench

import (
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/loadgen"
)

func TestShareRunsReportsTheMedian(t *testing.T) {
	run := func(a, b int) *loadgen.Result {
		return &loadgen.Result{OK: a + b, ByHeader: map[string]int{"1": a, "2": b}}
	}
	rr := &RouteResult{Max: run(125, 100), Repeats: []*loadgen.Result{run(109, 100), run(104, 100)}}
	if got := ShareRuns(rr, 2); got != "1.09 (1.25, 1.09, 1.04)" {
		t.Fatalf("ShareRuns = %q", got)
	}
	idle := &RouteResult{Max: run(100, 0), Repeats: []*loadgen.Result{run(100, 0), run(101, 100)}}
	if got := ShareRuns(idle, 2); got != "+Inf (+Inf (worker 2 got nothing), +Inf (worker 2 got nothing), 1.01)" {
		t.Fatalf("ShareRuns with an idle worker = %q", got)
	}
	if got := ShareRuns(&RouteResult{Max: run(110, 100)}, 2); got != "1.10" {
		t.Fatalf("ShareRuns without repeats = %q", got)
	}
}

func TestThroughputIsTheMedianOfTheClosedLoops(t *testing.T) {
	run := func(ok int) *loadgen.Result {
		return &loadgen.Result{OK: ok, Responses: ok + 1, Timeouts: 1, Elapsed: time.Second}
	}
	rr := &RouteResult{Max: run(300), Repeats: []*loadgen.Result{run(340), run(320)}}
	if got := rr.MedianGoodput(); got != 320 {
		t.Fatalf("MedianGoodput = %v, want 320 (the middle of 300, 340, 320)", got)
	}
	if got := RateRuns(rr); got != "320.0 (300.0-340.0)" {
		t.Fatalf("RateRuns = %q", got)
	}
	if got := non2xx(rr.ClosedLoops()); got != 3 {
		t.Fatalf("non2xx = %d, want 3", got)
	}
	if got := Errors(sumRuns(rr.ClosedLoops())); got != "3 (timeout 3)" {
		t.Fatalf("errors over the runs = %q", got)
	}
	if got := RateRuns(&RouteResult{Max: run(300)}); got != "300.0" {
		t.Fatalf("RateRuns of one run = %q", got)
	}
}
