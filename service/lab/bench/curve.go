package bench

import (
	"context"
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/loadgen"
)

// CurvePlan is the worker-count curve: the pool at each of Workers against
// one process using every core, on the same cells, in the same run. Besides
// throughput it counts what a pool of many processes pays for: how often
// the workers' threads were put on a CPU (wake-ups) and how much CPU they
// used, per request, from /proc/PID/task/*/schedstat.
type CurvePlan struct {
	Workers []int
	Cells   []CurveCell
	Repeats int
	// Duration of each run and its connections.
	Duration    time.Duration
	Concurrency int
}

// CurveCell is one route, with connections kept alive or one per request.
type CurveCell struct {
	Route     string
	KeepAlive bool
	// Workers, when set, are the only worker counts the cell runs at
	// (besides the baseline, which runs every cell): a route whose ratio
	// matters at some pool sizes need not lengthen every point's round.
	// The anchors leave such a cell out, having no pool at N = CPUs to
	// compare with.
	Workers []int
}

// at reports whether the cell runs at a point of the curve: the baseline
// always, a pool of workers when Workers is unset or lists it.
func (c CurveCell) at(pt *CurvePoint, baseline bool) bool {
	return baseline || c.Workers == nil || slices.Contains(c.Workers, pt.Workers)
}

// String names the cell in tables: "`/` keep-alive", "`/` new connection".
func (c CurveCell) String() string {
	if c.KeepAlive {
		return fmt.Sprintf("`%s` keep-alive", c.Route)
	}
	return fmt.Sprintf("`%s` new connection", c.Route)
}

// CurveResult is the curve's measurements: the baseline first, then one
// point per worker count.
type CurveResult struct {
	Baseline CurvePoint
	Points   []CurvePoint
}

// CurvePoint is one configuration of the curve.
type CurvePoint struct {
	Config     Configuration
	Workers    int
	GOMAXPROCS map[string]int // after the runs, from /metrics
	Cells      []CurveCellResult
}

// CurveCellResult is one cell's runs under one configuration.
type CurveCellResult struct {
	Cell CurveCell
	Runs []CurveRun
}

// CurveRun is one closed-loop run with the workers' scheduling counters
// around it.
type CurveRun struct {
	Result *loadgen.Result
	// Wakeups is how many times the workers' threads were put on a CPU
	// (schedstat's third field, summed over every thread); CPUNs the CPU
	// time they used, both over the run.
	Wakeups, CPUNs uint64
}

// PerRequest returns wake-ups and CPU microseconds per 2xx response.
func (r CurveRun) PerRequest() (wakeups, cpuMicros float64) {
	if r.Result == nil || r.Result.OK == 0 {
		return math.NaN(), math.NaN()
	}
	n := float64(r.Result.OK)
	return float64(r.Wakeups) / n, float64(r.CPUNs) / 1e3 / n
}

// NotOK returns how many of the run's requests got no 2xx: answered with
// another status (a 503 from admission, say) or failed.
func (r CurveRun) NotOK() int {
	if r.Result == nil {
		return 0
	}
	return r.Result.Responses - r.Result.OK + r.Result.Errors()
}

// NotOKSpread returns the median and the largest of the runs' NotOK.
func (c CurveCellResult) NotOKSpread() (med float64, most int) {
	var ns []float64
	for _, r := range c.Runs {
		n := r.NotOK()
		ns, most = append(ns, float64(n)), max(most, n)
	}
	return median(ns), most
}

// GeneratorPerRequest returns the load generator's own CPU microseconds per
// 2xx response (loadgen.Result.CPU), or NaN when the generator did not
// report it.
func (r CurveRun) GeneratorPerRequest() float64 {
	if r.Result == nil || r.Result.OK == 0 || r.Result.CPU <= 0 {
		return math.NaN()
	}
	return float64(r.Result.CPU) / 1e3 / float64(r.Result.OK)
}

// GeneratorMedian is the median of the runs' GeneratorPerRequest, NaN when
// a run lacks it.
func (c CurveCellResult) GeneratorMedian() float64 {
	var gens []float64
	for _, r := range c.Runs {
		g := r.GeneratorPerRequest()
		if math.IsNaN(g) {
			return math.NaN()
		}
		gens = append(gens, g)
	}
	return median(gens)
}

// Median returns the median 2xx rate, wake-ups and CPU per request over
// the runs.
func (c CurveCellResult) Median() (rate, wakeups, cpuMicros float64) {
	var rates, wakes, cpus []float64
	for _, r := range c.Runs {
		w, cpu := r.PerRequest()
		rates, wakes, cpus = append(rates, Goodput(r.Result)), append(wakes, w), append(cpus, cpu)
	}
	return median(rates), median(wakes), median(cpus)
}

// RoundRatios returns, round by round, this cell's 2xx rate over base's in
// the same round. A round measures every configuration once, a few seconds
// apart, so each ratio sees one stretch of a shared machine's drift; their
// spread says how far one round's reading can be trusted.
func (c CurveCellResult) RoundRatios(base CurveCellResult) []float64 {
	var out []float64
	for i := range min(len(c.Runs), len(base.Runs)) {
		if b := Goodput(base.Runs[i].Result); b > 0 {
			out = append(out, Goodput(c.Runs[i].Result)/b)
		}
	}
	return out
}

// roundSpread formats RoundRatios as " (lowest-highest)", or "" for fewer
// than two rounds.
func roundSpread(ratios []float64) string {
	if len(ratios) < 2 {
		return ""
	}
	return fmt.Sprintf(" (%.2f-%.2f)", slices.Min(ratios), slices.Max(ratios))
}

// CurveConfiguration is the pool of n workers at the shipped defaults (the
// worker sizes its GOMAXPROCS itself), with the cache and rate limit off.
func CurveConfiguration(n int) Configuration {
	return Configuration{
		Name: fmt.Sprintf("%d workers", n),
		Env:  fmt.Sprintf("CLUSTERAPP_WORKERS=%d\n", n) + commonEnv,
		Note: "the pool at the shipped defaults",
	}
}

// baselineOf is the plan's "1 process" configuration (BaselineName), the
// default one when the plan has none.
func baselineOf(plan Plan) Configuration {
	for _, c := range plan.Configs {
		if c.Name == BaselineName {
			return c
		}
	}
	return DefaultConfigurations(plan.CPUs)[3]
}

// curve measures plan.Curve: the baseline configuration (one process with
// GOMAXPROCS = CPUs), then each worker count, in rounds: every point once
// per round (applied afresh), so that every point's median is taken over
// the same stretch of a shared machine's drift.
func (r *Runner) curve(ctx context.Context, plan Plan) (*CurveResult, error) {
	cp := plan.Curve
	configs := []Configuration{baselineOf(plan)}
	for _, n := range cp.Workers {
		configs = append(configs, CurveConfiguration(n))
	}
	points := make([]CurvePoint, len(configs))
	for i, c := range configs {
		workers, err := c.Workers(plan.CPUs)
		if err != nil {
			return nil, err
		}
		points[i] = CurvePoint{Config: c, Workers: workers}
		for _, cell := range cp.Cells {
			points[i].Cells = append(points[i].Cells, CurveCellResult{Cell: cell})
		}
	}
	// The order turns by one each round, as the closed-loop table's does:
	// in one fixed order (the baseline first, then 1, 2, 4, 8, 16
	// workers) the baseline's new-connection runs read 15.4-16.1k req/s
	// in all four rounds of one run while the point just after it, the
	// same configuration but for GOMAXPROCS left to the worker, read
	// 13.5-14.1k in three, with the generator's own CPU per request up
	// as much: the machine, not the configuration. Turning the order
	// spreads such stretches over every point instead of one position.
	rounds := max(cp.Repeats, 1)
	for round := 1; round <= rounds; round++ {
		for k := range points {
			i := (k + round - 1) % len(points)
			if err := r.curveRound(ctx, plan, &points[i], i == 0, round, round == rounds); err != nil {
				return nil, err
			}
		}
	}
	return &CurveResult{Baseline: points[0], Points: points[1:]}, nil
}

// curveRound applies pt's configuration and adds one run of each cell that
// runs at it, reading the workers' schedstat around every run; in the last
// round it also reads each worker's GOMAXPROCS.
func (r *Runner) curveRound(ctx context.Context, plan Plan, pt *CurvePoint, baseline bool, round int, last bool) error {
	cp := plan.Curve
	c := pt.Config
	r.logf(">> curve, %s, round %d of %d: %d worker(s)", c.Name, round, max(cp.Repeats, 1), pt.Workers)
	if err := r.apply(ctx, c, pt.Workers); err != nil {
		return err
	}
	for i := range pt.Cells {
		cr := &pt.Cells[i]
		if !cr.Cell.at(pt, baseline) {
			continue
		}
		run, err := r.counted(ctx, config.WorkerPattern, func() (*loadgen.Result, error) {
			return r.load(ctx, cr.Cell.Route, cp.Duration, "-c", strconv.Itoa(cp.Concurrency), "-d", cp.Duration.String(),
				"-keepalive="+strconv.FormatBool(cr.Cell.KeepAlive))
		})
		if err != nil {
			return fmt.Errorf("curve %s %s: %w", c.Name, cr.Cell, err)
		}
		res := run.Result
		if res.OK == 0 {
			return fmt.Errorf("%w: curve %s %s: status %v, errors %v", ErrNoResponses, c.Name, cr.Cell, res.StatusCodes, res.ErrorSamples)
		}
		cr.Runs = append(cr.Runs, run)
		wakes, cpu := run.PerRequest()
		r.logf("   %-28s %8.1f req/s  %5.2f wake-ups/req  %6.1f µs CPU/req  generator %6.1f µs/req", cr.Cell, Goodput(res), wakes, cpu, run.GeneratorPerRequest())
	}
	if !last {
		return nil
	}
	var err error
	pt.GOMAXPROCS, err = r.gomaxprocs(ctx, pt.Workers)
	return err
}

// SchedCounters are the workers' scheduling counters at one moment.
type SchedCounters struct {
	Wakeups, CPUNs uint64
}

// schedScript sums schedstat over every thread of the main process of each
// active unit matching the pattern $1: "<cpu ns> <wake-ups>".
const schedScript = `t=0; c=0
for u in $(systemctl list-units --plain --no-legend --state=active "$1" | cut -d' ' -f1); do
  p=$(systemctl show -p MainPID --value "$u")
  [ "$p" -gt 0 ] 2>/dev/null || continue
  for f in /proc/$p/task/*/schedstat; do read -r a b n < "$f" && c=$((c+a)) && t=$((t+n)); done
done
echo "$c $t"`

// counted runs load between two readings of the scheduling counters of
// the units matching pattern. A thread or process that ends between the
// two takes its counts with it, so the load must not restart them.
func (r *Runner) counted(ctx context.Context, pattern string, load func() (*loadgen.Result, error)) (CurveRun, error) {
	before, err := r.schedOf(ctx, pattern)
	if err != nil {
		return CurveRun{}, err
	}
	res, err := load()
	if err != nil {
		return CurveRun{}, err
	}
	after, err := r.schedOf(ctx, pattern)
	if err != nil {
		return CurveRun{}, err
	}
	return CurveRun{Result: res, Wakeups: after.Wakeups - before.Wakeups, CPUNs: after.CPUNs - before.CPUNs}, nil
}

// schedOf reads the scheduling counters of the units matching pattern.
func (r *Runner) schedOf(ctx context.Context, pattern string) (SchedCounters, error) {
	out, err := r.Box.Exec(ctx, 10*time.Second, "sh", "-c", schedScript, "sched", pattern)
	if err != nil {
		return SchedCounters{}, fmt.Errorf("read schedstat: %w", err)
	}
	return parseSched(out)
}

func parseSched(out string) (SchedCounters, error) {
	f := strings.Fields(out)
	if len(f) != 2 {
		return SchedCounters{}, fmt.Errorf("read schedstat: unexpected output %q", out)
	}
	cpu, err1 := strconv.ParseUint(f[0], 10, 64)
	wakes, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return SchedCounters{}, fmt.Errorf("read schedstat: unexpected output %q", out)
	}
	return SchedCounters{Wakeups: wakes, CPUNs: cpu}, nil
}

func writeCurveMethod(p *printer, res *Results) {
	cp := res.Plan.Curve
	p.printf("- Configurations: the baseline \"%s\" (`%s`), then `CLUSTERAPP_WORKERS=N` for N in %s, each at the\n",
		res.Curve.Baseline.Config.Name, strings.ReplaceAll(strings.TrimSpace(res.Curve.Baseline.Config.Env), "\n", "` `"), intList(cp.Workers))
	p.printf("  shipped defaults (each worker's GOMAXPROCS is its own choice, shown at the end), cache and rate limit off.\n")
	p.printf("- Closed loop: `clusterapp-load -c %d -d %s`, keep-alive or a new connection per request, %d runs per cell,\n",
		cp.Concurrency, cp.Duration, cp.Repeats)
	p.printf("  in rounds (every configuration once per round, applied afresh, the order turning by one each round); medians.\n")
	p.printf("  Same generator, same box, same %d CPUs as the workers.\n", res.Machine.CPUs)
	for _, cell := range cp.Cells {
		if cell.Workers != nil {
			p.printf("- %s runs at %s workers only, besides the baseline.\n", cell, intList(cell.Workers))
		}
	}
	p.printf("- \"× %s\": the ratio of the medians; in brackets the lowest and highest of each round's own ratio\n", BaselineName)
	p.printf("  (the point's run over the baseline's run of the same round), which says how far one run can be trusted.\n")
	p.printf("- Wake-ups per request: how many times the workers' threads were put on a CPU during the run (the\n")
	p.printf("  third field of `/proc/PID/task/TID/schedstat`, summed over every thread of every worker), divided\n")
	p.printf("  by the 2xx responses; CPU per request likewise from the first field. What grows with N: each\n")
	p.printf("  process serves fewer requests per wake-up, so more of its threads sleep between requests and are\n")
	p.printf("  woken for the next (a new connection wakes one idle worker, once: its poller holds the socket with\n")
	p.printf("  EPOLLEXCLUSIVE, and the socket defers accepts until the request arrives; and the unit's GODEBUG keeps\n")
	p.printf("  each runtime's monitor thread awake, docs/operations.md).\n")
	p.printf("- Generator CPU per request: the load generator's own CPU time (user and system, `getrusage`) over\n")
	p.printf("  the run, divided by the 2xx responses. Between runs of one configuration it gauges the machine's\n")
	p.printf("  speed: a shared host can run the whole machine some 15%% slower for tens of seconds at a time, the\n")
	p.printf("  workers and the generator alike; the column gives the median, the log every run's.\n")
	p.printf("  Between configurations it also moves with how the server's responses come back, most on keep-alive.\n")
	p.printf("- Not 2xx: the requests of a run answered with another status (a 503 when a request waited past\n")
	p.printf("  `CLUSTERAPP_ADMISSION_WAIT` for a slot) or failed, the median of the runs and in brackets the most\n")
	p.printf("  in one. The 2xx rate counts only the others, so a cell can hold its ratio while turning requests away.\n\n")
}

// WriteCurve writes the worker-count table: for each cell, the 2xx rate
// against the baseline, wake-ups and CPU per request, and the requests
// that got no 2xx.
func WriteCurve(w io.Writer, res *Results) {
	p := asPrinter(w)
	c := res.Curve
	p.printf("| cell | configuration | 2xx req/s | × %s (each round's) | wake-ups / request | CPU µs / request | generator CPU µs / request | not 2xx / run (most) |\n|---|---|---|---|---|---|---|---|\n", BaselineName)
	for i, cell := range res.Plan.Curve.Cells {
		base, _, _ := c.Baseline.Cells[i].Median()
		for j, pt := range append([]CurvePoint{c.Baseline}, c.Points...) {
			if i >= len(pt.Cells) || len(pt.Cells[i].Runs) == 0 {
				continue // the cell does not run at this point
			}
			rate, wakes, cpu := pt.Cells[i].Median()
			spread := ""
			if j > 0 {
				spread = roundSpread(pt.Cells[i].RoundRatios(c.Baseline.Cells[i]))
			}
			gen := "?"
			if g := pt.Cells[i].GeneratorMedian(); !math.IsNaN(g) {
				gen = fmt.Sprintf("%.1f", g)
			}
			bad, most := pt.Cells[i].NotOKSpread()
			p.printf("| %s | %s | %.1f | %s%s | %.2f | %.1f | %s | %s (%d) |\n", cell, pt.Config.Name, rate, Ratio(rate, base), spread, wakes, cpu, gen, strconv.FormatFloat(bad, 'f', -1, 64), most)
		}
	}
	p.printf("\nGOMAXPROCS per worker after the runs: ")
	var parts []string
	for _, pt := range append([]CurvePoint{c.Baseline}, c.Points...) {
		parts = append(parts, fmt.Sprintf("%s: %s", pt.Config.Name, procsSummary(pt.GOMAXPROCS)))
	}
	p.printf("%s.\n", strings.Join(parts, "; "))
}

// procsSummary compresses per-worker GOMAXPROCS: "1 (×7), 2 (×1)".
func procsSummary(byWorker map[string]int) string {
	if len(byWorker) == 0 {
		return "?"
	}
	count := map[int]int{}
	for _, v := range byWorker {
		count[v]++
	}
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("%d (×%d)", v, count[v]))
	}
	return strings.Join(parts, ", ")
}

func intList(ns []int) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ", ")
}

// WriteCurveSVG draws the curve: for each cell, the pool's 2xx rate against
// the baseline's (1.0 = as fast as one process) over the worker count.
func WriteCurveSVG(w io.Writer, res *Results) error {
	p := &printer{w: w}
	c := res.Curve
	const width, height, left, right, top, bottom = 960, 380, 70, 220, 50, 320
	p.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	p.printf(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p.printf(`<text x="%d" y="24" font-size="16" font-weight="bold">The pool against one process (GOMAXPROCS=%d), by worker count, %d CPUs</text>`+"\n",
		left, res.Machine.CPUs, res.Machine.CPUs)
	top1 := 1.2
	for i := range res.Plan.Curve.Cells {
		base, _, _ := c.Baseline.Cells[i].Median()
		for _, pt := range c.Points {
			if rate, _, _ := pt.Cells[i].Median(); base > 0 && !math.IsNaN(rate) {
				top1 = math.Max(top1, rate/base)
			}
		}
	}
	top1 = math.Ceil(top1*5) / 5
	y := func(v float64) float64 { return bottom - (bottom-top)*v/top1 }
	n := len(c.Points)
	x := func(i int) float64 { return left + float64(i)*float64(width-left-right)/math.Max(float64(n-1), 1) }
	for v := 0.0; v <= top1+1e-9; v += 0.2 {
		p.printf(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%.1f×</text>`+"\n",
			left, width-right, y(v), y(v), left-6, y(v)+4, v)
	}
	p.printf(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="4 3"/>`+"\n", left, width-right, y(1), y(1))
	for i, pt := range c.Points {
		p.printf(`<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(i), bottom+18, pt.Workers)
	}
	p.printf(`<text x="%d" y="%d" text-anchor="middle">workers (CLUSTERAPP_WORKERS)</text>`+"\n", (left+width-right)/2, bottom+38)
	for ci, cell := range res.Plan.Curve.Cells {
		base, _, _ := c.Baseline.Cells[ci].Median()
		colour := palette[ci%len(palette)]
		var pts []string
		for i, pt := range c.Points {
			rate, _, _ := pt.Cells[ci].Median()
			if base > 0 && !math.IsNaN(rate) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(rate/base)))
				p.printf(`<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(i), y(rate/base), colour)
			}
		}
		p.printf(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), colour)
		p.printf(`<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			width-right+20, top+ci*20, colour, width-right+36, top+ci*20+11, html.EscapeString(strings.ReplaceAll(cell.String(), "`", "")))
	}
	p.printf(`<text x="%d" y="%d" fill="#555">1.0× (dashed): as fast as one process using every core, same run</text>`+"\n", left, height-8)
	p.printf("</svg>\n")
	return p.err
}
