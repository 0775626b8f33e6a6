package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/loadgen"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

func TestParseSched(t *testing.T) {
	got, err := parseSched("123456789 4200\n")
	if err != nil || got.CPUNs != 123456789 || got.Wakeups != 4200 {
		t.Fatalf("parseSched = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "12", "a b", "1 2 3"} {
		if _, err := parseSched(bad); err == nil {
			t.Errorf("parseSched(%q) did not fail", bad)
		}
	}
}

// The curve runs the baseline, then each worker count, in rounds (every
// point once per round, applied afresh), reading the workers' schedstat
// around every run; the counters' differences become wake-ups and CPU per
// request.
func TestCurveRunsEveryPointAndCountsWakeups(t *testing.T) {
	var applied []string
	box := curveBox(&applied, nil)
	plan := Plan{CPUs: 2, Configs: DefaultConfigurations(2), Curve: &CurvePlan{
		Workers: []int{1, 2}, Repeats: 2, Duration: time.Second, Concurrency: 8,
		Cells: []CurveCell{{Route: "/", KeepAlive: true}, {Route: "/", KeepAlive: false}},
	}}
	res, err := (&Runner{Box: box}).curve(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, body := range applied {
		c := Configuration{Env: body}
		n, _ := c.Workers(2)
		order = append(order, fmt.Sprintf("%d/%v", n, strings.Contains(body, "GOMAXPROCS=2")))
	}
	if got := strings.Join(order, " "); got != "1/true 1/false 2/false 1/false 2/false 1/true" {
		t.Fatalf("applied (workers/GOMAXPROCS=2) %q, want the baseline, 1 and 2 workers, then 1 and 2 workers and the baseline (the order turns by one each round)", got)
	}
	if res.Baseline.Config.Name != BaselineName || len(res.Points) != 2 || len(res.Points[1].Cells) != 2 || len(res.Points[1].Cells[0].Runs) != 2 {
		t.Fatalf("curve = %+v", res)
	}
	rate, wakes, cpu := res.Points[1].Cells[1].Median()
	if rate != 500 || wakes != 2 || cpu != 0.002 {
		t.Errorf("median = %v req/s, %v wake-ups/req, %v µs/req; want 500, 2 (1000/500), 0.002", rate, wakes, cpu)
	}
}

// readCopied reads the host file a `cp` to the box names.
func readCopied(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

func unitListing(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s loaded active running\n", config.WorkerUnit(i))
	}
	return b.String()
}

func curveSample() *Results {
	res := sample()
	res.Plan.Curve = &CurvePlan{Workers: []int{2, 4}, Repeats: 1, Duration: time.Second, Concurrency: 64,
		Cells: []CurveCell{{Route: "/", KeepAlive: true}, {Route: "/", KeepAlive: false}}}
	point := func(c Configuration, workers int, oks ...int) CurvePoint {
		pt := CurvePoint{Config: c, Workers: workers, GOMAXPROCS: map[string]int{"1": 1, "2": 2}}
		for i, ok := range oks {
			r := &loadgen.Result{OK: ok, Responses: ok, Elapsed: time.Second}
			pt.Cells = append(pt.Cells, CurveCellResult{Cell: res.Plan.Curve.Cells[i], Runs: []CurveRun{{Result: r, Wakeups: uint64(ok) * 2, CPUNs: uint64(ok) * 40000}}})
		}
		return pt
	}
	res.Curve = &CurveResult{
		Baseline: point(DefaultConfigurations(2)[3], 1, 1000, 400),
		Points:   []CurvePoint{point(CurveConfiguration(2), 2, 950, 300), point(CurveConfiguration(4), 4, 800, 200)},
	}
	return res
}

func TestWriteCurve(t *testing.T) {
	var out strings.Builder
	WriteCurve(&out, curveSample())
	containsAll(t, "curve table", out.String(),
		"| `/` keep-alive | 1 process | 1000.0 | 1.00× | 2.00 | 40.0 |",
		"| `/` keep-alive | 4 workers | 800.0 | 0.80× | 2.00 | 40.0 |",
		"| `/` new connection | 2 workers | 300.0 | 0.75× |",
		"4 workers: 1 (×1), 2 (×1)")
	var page strings.Builder
	if err := WriteMarkdown(&page, curveSample(), Runs{}, "benchmarks.svg", ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "## The pool at every worker count") || !strings.Contains(page.String(), CurveChart) {
		t.Errorf("the page has no curve section")
	}
}

func TestWriteCurveSVG(t *testing.T) {
	var out strings.Builder
	if err := WriteCurveSVG(&out, curveSample()); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, out.String())
	if lines := strings.Count(out.String(), "<polyline"); lines != 2 {
		t.Errorf("%d lines, want one per cell (2)", lines)
	}
	if pts := strings.Count(out.String(), "<circle"); pts != 4 {
		t.Errorf("%d points, want 4 (2 cells × 2 worker counts)", pts)
	}
}

// A missing program is skipped with its reason, never silently.
func TestDefaultAnchorsNameWhatIsMissing(t *testing.T) {
	none := func(string) (string, error) { return "", errors.New("not found") }
	anchors := DefaultAnchors(t.TempDir(), 2, none)
	skips := map[string]string{}
	for _, a := range anchors {
		skips[a.Name] = a.Skip
	}
	for name, want := range map[string]string{
		"bare net/http":          "bin/clusterapp-bare is missing",
		"nginx `return 200`":     "nginx is not installed",
		"Node cluster (Express)": "node is not installed",
		"PM2 cluster (Express)":  "node is not installed",
	} {
		if !strings.Contains(skips[name], want) {
			t.Errorf("%s: skip %q, want it to say %q", name, skips[name], want)
		}
	}
	all := func(string) (string, error) { return "/usr/bin/x", nil }
	for _, a := range DefaultAnchors(t.TempDir(), 2, all) {
		if strings.HasPrefix(a.Name, "PM2") && !strings.Contains(a.Skip, "npm ci") {
			t.Errorf("PM2 without bin/node-anchor: skip %q, want it to point at npm ci", a.Skip)
		}
	}
}

func TestWriteAnchors(t *testing.T) {
	res := curveSample()
	res.Machine.CPUs = 2
	cell := func(ok int) *CurveCellResult {
		return &CurveCellResult{Runs: []CurveRun{{Result: &loadgen.Result{OK: ok, Elapsed: time.Second}}}}
	}
	res.Anchors = []AnchorResult{
		{Name: "nginx `return 200`", Note: "the ceiling", Cells: []*CurveCellResult{cell(1900), nil}},
		{Name: "Node cluster (Express)", Skipped: "node is not installed"},
	}
	var out strings.Builder
	WriteAnchors(&out, res)
	containsAll(t, "anchors table", out.String(),
		"| clusterapp pool, 2 workers | 950.0 (1.00×) | 300.0 (1.00×) |",
		"| clusterapp, 1 process | 1000.0 (1.05×) | 400.0 (1.33×) |",
		"| nginx `return 200` | 1900.0 (2.00×) | – |",
		"- Node cluster (Express): **skipped**: node is not installed")
}

// Each round's ratio pairs a point's run with the baseline's run of the same
// round; the table gives their spread beside the ratio of the medians.
func TestCurveShowsEachRoundsRatio(t *testing.T) {
	res := curveSample()
	runs := func(oks ...int) []CurveRun {
		var out []CurveRun
		for _, ok := range oks {
			out = append(out, CurveRun{Result: &loadgen.Result{OK: ok, Responses: ok, Elapsed: time.Second}, Wakeups: 1, CPUNs: 1})
		}
		return out
	}
	res.Curve.Baseline.Cells[1].Runs = runs(400, 200, 300)
	res.Curve.Points[0].Cells[1].Runs = runs(300, 240, 270)
	got := res.Curve.Points[0].Cells[1].RoundRatios(res.Curve.Baseline.Cells[1])
	if want := []float64{0.75, 1.2, 0.9}; !slices.Equal(got, want) {
		t.Fatalf("round ratios %v, want %v", got, want)
	}
	var out strings.Builder
	WriteCurve(&out, res)
	containsAll(t, "curve table", out.String(),
		"| `/` new connection | 1 process | 300.0 | 1.00× | ",
		"| `/` new connection | 2 workers | 270.0 | 0.90× (0.75-1.20) |",
		"| `/` keep-alive | 2 workers | 950.0 | 0.95× | ")
}

// The anchors carry no target: they run their own number of times per cell
// (fewer than the curve's rounds), and the curve's when they name none.
func TestAnchorsRunTheirOwnRepeats(t *testing.T) {
	for _, tc := range []struct{ anchorRepeats, want int }{{2, 2}, {0, 5}} {
		loads := 0
		box := &sandbox.Driver{Name: "t", Command: func(ctx context.Context, args ...string) ([]byte, error) {
			cmd := strings.Join(args, " ")
			switch {
			case strings.Contains(cmd, sandbox.LoadPath):
				loads++
				return []byte(`{"ok":500,"responses":500,"requests":500,"elapsed_ns":1000000000}`), nil
			case strings.Contains(cmd, "curl"):
				return []byte("200"), nil
			}
			return nil, nil
		}}
		plan := Plan{CPUs: 2,
			Curve:   &CurvePlan{Repeats: 5, Duration: time.Second, Concurrency: 8, Cells: []CurveCell{{Route: "/", KeepAlive: true}}},
			Anchors: &AnchorPlan{Anchors: []Anchor{{Name: "x", Port: 18090, Routes: []string{"/"}, Argv: []string{"/bin/x"}}}, Repeats: tc.anchorRepeats}}
		res, err := (&Runner{Box: box}).anchors(context.Background(), plan)
		if err != nil {
			t.Fatal(err)
		}
		if loads != tc.want || len(res[0].Cells[0].Runs) != tc.want {
			t.Errorf("AnchorPlan.Repeats %d: %d loads, %d runs; want %d", tc.anchorRepeats, loads, len(res[0].Cells[0].Runs), tc.want)
		}
	}
}

// curveBox is a box whose commands answer as a pool under load would: each
// env file copied in is appended to applied (its worker count is what the
// unit listing then shows), every schedstat reading is 1000 wake-ups and
// 1000 ns on, and every load is 500 responses in a second; load, when set,
// is told of each load's command line and the worker count applied.
func curveBox(applied *[]string, load func(cmd string, workers int)) *sandbox.Driver {
	sched := uint64(0)
	workers := func() int {
		n, _ := Configuration{Env: (*applied)[len(*applied)-1]}.Workers(2)
		return n
	}
	return &sandbox.Driver{Name: "t", Command: func(ctx context.Context, args ...string) ([]byte, error) {
		cmd := strings.Join(args, " ")
		switch {
		case strings.HasPrefix(cmd, "cp t ") && strings.HasSuffix(cmd, " "+config.EnvFile):
			body, err := readCopied(args[2])
			*applied = append(*applied, body)
			return nil, err
		case strings.Contains(cmd, schedScript):
			sched += 1000 // 1000 wake-ups and 1000 ns more at each reading
			return []byte(fmt.Sprintf("%d %d\n", sched, sched)), nil
		case strings.Contains(cmd, "systemctl list-units"):
			return []byte(unitListing(workers())), nil
		case strings.Contains(cmd, "curl") && strings.Contains(cmd, "metrics"):
			return []byte("go_sched_gomaxprocs_threads{worker=\"1\"} 1\n"), nil
		case strings.Contains(cmd, "curl"):
			return []byte("200"), nil
		case strings.Contains(cmd, sandbox.LoadPath):
			if load != nil {
				load(cmd, workers())
			}
			return []byte(`{"ok":500,"responses":500,"requests":500,"elapsed_ns":1000000000}`), nil
		}
		return nil, nil
	}}
}

// A cell limited to some worker counts runs there and at the baseline
// only; the table and the chart leave the other points out, and the anchors
// (compared with the pool at N = CPUs, where it does not run) leave the
// cell out.
func TestCurveCellAtSomeWorkerCounts(t *testing.T) {
	var applied []string
	ran := map[string][]int{}
	box := curveBox(&applied, func(cmd string, workers int) {
		for _, route := range []string{"/slow", "/fib?n=30"} {
			if strings.Contains(cmd, route) {
				ran[route] = append(ran[route], workers)
			}
		}
	})
	plan := Plan{CPUs: 2, Configs: DefaultConfigurations(2), Curve: &CurvePlan{
		Workers: []int{1, 2, 4}, Repeats: 2, Duration: time.Second, Concurrency: 8,
		Cells: []CurveCell{{Route: "/", KeepAlive: true}, {Route: "/slow", KeepAlive: true, Workers: []int{4}}},
	}, Anchors: &AnchorPlan{Anchors: []Anchor{{Name: "x", Port: 18090, Routes: []string{"/", "/slow"}, Argv: []string{"/bin/x"}}}}}
	r := &Runner{Box: box}
	curve, err := r.curve(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ran["/slow"]); got != "[1 4 4 1]" {
		t.Errorf("/slow ran at %s workers (the baseline is 1), want [1 4 4 1]: the baseline and 4, each round, the second round starting one point later", got)
	}
	if n := len(curve.Points[1].Cells[1].Runs); n != 0 {
		t.Errorf("2 workers have %d runs of /slow, want none", n)
	}
	anchors, err := r.anchors(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if anchors[0].Cells[1] != nil || ran["/slow"] == nil || len(ran["/slow"]) != 4 {
		t.Errorf("the anchor ran /slow (%+v, runs at %v)", anchors[0].Cells[1], ran["/slow"])
	}
	res := sample()
	res.Plan.Curve, res.Curve, res.Anchors = plan.Curve, curve, anchors
	var table, chart, world strings.Builder
	WriteCurve(&table, res)
	containsAll(t, "curve table", table.String(), "| `/slow` keep-alive | 1 process | 500.0 | 1.00× |",
		"| `/slow` keep-alive | 4 workers | 500.0 | 1.00× (1.00-1.00) |", "| `/` keep-alive | 2 workers | 500.0 | 1.00× (1.00-1.00) |")
	if strings.Contains(table.String(), "| `/slow` keep-alive | 2 workers") || strings.Contains(table.String(), "NaN") {
		t.Errorf("the table has a /slow row at 2 workers, or a NaN:\n%s", table.String())
	}
	if err := WriteCurveSVG(&chart, res); err != nil || strings.Contains(chart.String(), "NaN") {
		t.Errorf("chart: %v, NaN in it: %v", err, strings.Contains(chart.String(), "NaN"))
	}
	WriteAnchors(&world, res)
	if strings.Contains(world.String(), "/slow") || !strings.Contains(world.String(), "`/` keep-alive: 2xx req/s") {
		t.Errorf("the anchors' table should have `/` and not /slow:\n%s", world.String())
	}
	var method strings.Builder
	writeCurveMethod(asPrinter(&method), res)
	containsAll(t, "curve method", method.String(), "- `/slow` keep-alive runs at 4 workers only, besides the baseline.")
}

// When the generator reports its own CPU time, the curve's table gives it per
// request; a run without it shows "?".
func TestWriteCurveGivesTheGeneratorsCPU(t *testing.T) {
	res := curveSample()
	res.Curve.Baseline.Cells[1].Runs[0].Result.CPU = 400 * 60 * time.Microsecond  // 60 µs a request
	res.Curve.Points[0].Cells[1].Runs[0].Result.CPU = 300 * 69 * time.Microsecond // 69 µs a request
	var table strings.Builder
	WriteCurve(&table, res)
	containsAll(t, "curve table", table.String(),
		"| generator CPU µs / request |",
		"| `/` new connection | 1 process | 400.0 | 1.00× | 2.00 | 40.0 | 60.0 |",
		"| `/` new connection | 2 workers | 300.0 | 0.75× | 2.00 | 40.0 | 69.0 |",
		"| `/` keep-alive | 2 workers | 950.0 | 0.95× | 2.00 | 40.0 | ? |")
}

// The 2xx rate leaves out the requests turned away; the table counts them
// per run (answered with another status, or failed), median and most, so a
// cell that keeps its ratio while answering 503s shows it.
func TestWriteCurveCountsTheRequestsNotOK(t *testing.T) {
	res := curveSample()
	res.Plan.Curve.Repeats = 3
	cell := &res.Curve.Points[1].Cells[0] // 4 workers, `/` keep-alive
	cell.Runs = []CurveRun{
		{Result: &loadgen.Result{OK: 800, Responses: 830, StatusCodes: map[int]int{200: 800, 503: 30}, Elapsed: time.Second}},
		{Result: &loadgen.Result{OK: 800, Responses: 800, Elapsed: time.Second}},
		{Result: &loadgen.Result{OK: 790, Responses: 845, ReadErrors: 2, Timeouts: 1, Elapsed: time.Second}},
	}
	var table strings.Builder
	WriteCurve(&table, res)
	containsAll(t, "curve table", table.String(),
		"| not 2xx / run (most) |",
		"| `/` keep-alive | 4 workers | 800.0 | 0.80× | 0.00 | 0.0 | ? | 30 (58) |",
		"| `/` keep-alive | 1 process | 1000.0 | 1.00× | 2.00 | 40.0 | ? | 0 (0) |")
	var method strings.Builder
	writeCurveMethod(asPrinter(&method), res)
	containsAll(t, "curve method", method.String(), "- Not 2xx: the requests of a run answered with another status")
}
