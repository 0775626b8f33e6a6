package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/loadgen"
)

// The targets table gathers each of issue 12's goals from the run's own
// tables and judges it against what the issue asks: met, missed (with
// the value, unrounded across its threshold), or not measured at all.
func TestTargetsJudgeEachGoalFromTheRun(t *testing.T) {
	res := curveSample() // 2 CPUs; curve at 2 and 4 workers: `/` keep-alive 0.95×, 0.80×; new connection 0.75×, 0.50×
	res.Stack = &StackResult{Route: "/", Pool: []float64{90, 94.9, 96}, Unit: []float64{100, 100, 100},
		PoolCPU: []float64{10, 10, 10}, UnitCPU: []float64{9, 9, 9}} // 0.949× in turn: over 0.9, met
	res.Start = &StartResult{Workers: 2,
		Starts: []StartRun{{FirstOK: 60 * time.Millisecond}, {FirstOK: 120 * time.Millisecond}, {FirstOK: 70 * time.Millisecond}},
		Kills:  []time.Duration{250 * time.Millisecond}}
	res.Elapsed = 12*time.Minute + 30*time.Second

	var out strings.Builder
	WriteTargets(&out, res)
	containsAll(t, "targets table", out.String(),
		"| 2 workers × 1 process, curve: `/` keep-alive | >= 0.95× | 0.950× | yes |",
		"| 2 workers × 1 process, curve: `/` new connection | >= 0.95× | 0.750× | **no** |",
		"| 4 workers × 1 process, curve: `/` keep-alive | >= 0.85× | 0.800× | **no** |",
		// sample(): N workers 190 2xx/s against 200 on every route, one round
		"| 2 workers (N workers) × 1 process, closed-loop table: `/fib?n=30` keep-alive | >= 0.95× | 0.950× | yes |",
		"| 1 process × bare net/http in the worker's unit, `/` keep-alive, req/s in turn | >= 0.90× | 0.949× (rounds 0.90-0.96); CPU per request 0.90× | yes |",
		// sample(): the spike's admitted p99 40 ms over 20 ms unloaded, rejections 1 ms, /healthz 2 ms
		"| spike, median round: admitted p99 × unloaded p99 | <= 2× | 2.00× | yes |",
		"| spike, median round: time to reject p50 | <= 2.00 ms | 1.00 ms | yes |",
		"| spike, median round: `/healthz` p99 | <= 10.0 ms | 2.00 ms | yes |",
		"| cold start to the first 200, median | <= 100 ms | 70.0 ms (rounds 60.0 ms-120 ms) | yes |",
		"| kill -9 of a worker to its successor's READY=1, median | <= 200 ms | 250 ms | **no** |",
		"| the bench's own time (cmd/clusterapp-bench, from the box's boot to the page; `make bench` adds the build) | < 15 min | 12m30s | yes |",
		"| 8 workers × 1 process, curve | >= 0.85× | not measured (the curve runs 2, 4 workers) | **no** |",
		"**9 of 14 met**")

	// A part of the bench that did not run is not met: it showed nothing.
	res.Stack = &StackResult{Skipped: "no bare anchor"}
	res.Spike, res.Start, res.Elapsed = nil, nil, 0
	out.Reset()
	WriteTargets(&out, res)
	containsAll(t, "targets of a partial run", out.String(),
		"| 1 process × bare net/http in the worker's unit, `/` keep-alive, req/s in turn | >= 0.90× | skipped: no bare anchor | **no** |",
		"| spike | <= 2×, <= 2.00 ms, <= 10.0 ms | not measured | **no** |",
		"| cold start and replacement | <= 100 ms, <= 200 ms | not measured | **no** |")
	if strings.Contains(out.String(), "the bench's own time") {
		t.Errorf("a run without its time (results written before it was kept) lists the time target:\n%s", out.String())
	}
}

// The threshold is the issue's, not the rounded value on the page: 0.949
// misses 0.95 although the tables print it as 0.95×.
func TestTargetsDoNotRoundAcrossTheThreshold(t *testing.T) {
	res := curveSample()
	res.Curve.Points[0].Cells[0].Runs[0].Result = &loadgen.Result{OK: 949, Responses: 949, Elapsed: time.Second} // over 1000
	for _, tg := range Targets(res) {
		if tg.Goal == "2 workers × 1 process, curve: `/` keep-alive" {
			if tg.Met || tg.Measured != "0.949×" {
				t.Errorf("0.949 against >= 0.95: %+v, want not met, measured 0.949×", tg)
			}
			return
		}
	}
	t.Fatal("no target for the pool of 2 on `/` keep-alive")
}

// A value is printed with as many decimals as it takes to stay on its own
// side of the threshold: never "0.950×" beside "no" against ">= 0.95×".
func TestTargetsPrintNoValueOnTheWrongSide(t *testing.T) {
	res := curveSample()
	res.Curve.Points[0].Cells[0].Runs[0].Result = &loadgen.Result{OK: 9496, Responses: 9496, Elapsed: 10 * time.Second} // 949.6 over 1000
	found := false
	for _, tg := range Targets(res) {
		if tg.Goal == "2 workers × 1 process, curve: `/` keep-alive" {
			found = true
			if tg.Met || tg.Measured != "0.9496×" {
				t.Errorf("0.9496 against >= 0.95: %+v, want not met, measured 0.9496×", tg)
			}
		}
	}
	if !found {
		t.Fatal("no target for the pool of 2 on `/` keep-alive")
	}

	atLeast := func(x float64) bool { return x >= 0.95 }
	atMost := func(x float64) bool { return x <= 2 }
	for _, c := range []struct{ got, want string }{
		{sided(0.9496, 3, atLeast), "0.9496"},
		{sided(0.9504, 3, atLeast), "0.950"},
		{sided(0.94996, 3, atLeast), "0.94996"},
		{sided(1.2345, 3, atLeast), "1.234"},
		{sided(2.004, 2, atMost), "2.004"},
		{sided(1.996, 2, atMost), "2.00"}, // rounds up onto the threshold: still met
		{millisSided(2004*time.Microsecond, 2*time.Millisecond), "2.004 ms"},
		{millisSided(100400*time.Microsecond, 100*time.Millisecond), "100.4 ms"},
		{millisSided(199600*time.Microsecond, 200*time.Millisecond), "200 ms"}, // 199.6 ms: at or under, met
		{millisSided(10030*time.Microsecond, 10*time.Millisecond), "10.03 ms"},
		{millisSided(58*time.Millisecond, 100*time.Millisecond), "58.0 ms"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
