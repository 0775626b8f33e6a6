package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Issue 12's targets ("The pool costs nothing"), judged on one run's
// results. The page's tables hold every number; this is the same numbers
// gathered in one place, each beside what the issue asks, so a run says
// itself whether it met the targets instead of leaving a reader to collect
// a dozen cells from five tables (and to miss the one that fell short).
const (
	// TargetAtCPUs: the pool at N = CPUs workers over one process using
	// every core, on every route, with keep-alive and a new connection.
	TargetAtCPUs = 0.95
	// TargetOverProvisioned: the pool at 2 and 4 times the CPUs.
	TargetOverProvisioned = 0.85
	// TargetStack: one process over bare net/http in the worker's unit,
	// `/` keep-alive, req/s (the handler stack's price alone).
	TargetStack = 0.9
	// TargetSpikeP99: the spike's admitted p99 over the unloaded p99, at most.
	TargetSpikeP99 = 2.0
	// TargetHealthP99 and TargetRejectP50: /healthz p99 and the time to
	// turn a request away (p50) during the spike, at most.
	TargetHealthP99 = 10 * time.Millisecond
	TargetRejectP50 = 2 * time.Millisecond
	// TargetStart: `systemctl start` of the sockets to the first 200.
	TargetStart = 100 * time.Millisecond
	// TargetReplace: a worker's exit after kill -9 to its successor's READY=1.
	TargetReplace = 200 * time.Millisecond
	// TargetDuration: the whole bench on 2 CPUs.
	TargetDuration = 15 * time.Minute
)

// ElapsedGoal is the goal of the bench's own time.
const ElapsedGoal = "the bench's own time (cmd/clusterapp-bench, from the box's boot to the page; `make bench` adds the build)"

// Target is one goal as a run measured it.
type Target struct {
	Goal     string // what is measured, e.g. "2 workers × 1 process, curve: `/` new connection"
	Asked    string // e.g. ">= 0.95×"
	Measured string // the value, with what says how far to trust it
	Met      bool

	// value is the measured number alone (a ratio, or nanoseconds), NaN
	// when nothing was measured; meets judges a value against the goal and
	// show prints one, so that runs can be judged together (runs.go).
	value float64
	meets func(float64) bool
	show  func(float64) string
}

// Targets judges res against issue 12's targets, in the order the issue
// lists them. A target whose part of the bench did not run (or was
// skipped) is listed as not met, with the reason: a run that did not
// measure something has not shown it.
func Targets(res *Results) []Target {
	var out []Target
	cpus := res.Plan.CPUs
	ratio := func(goal string, v, want float64, spread []float64) Target {
		meets := func(x float64) bool { return x >= want }
		return Target{Goal: goal, Asked: fmt.Sprintf(">= %.2f×", want), Measured: sided(v, 3, meets) + "×" + spreadOf(spread, "%.2f"),
			Met: !math.IsNaN(v) && v >= want, value: v, meets: meets, show: func(x float64) string { return sided(x, 3, meets) + "×" }}
	}
	missing := func(goal, asked, why string) Target {
		return Target{Goal: goal, Asked: asked, Measured: why, value: math.NaN()}
	}
	// atMost is a duration's target: d at most limit.
	atMost := func(goal string, d, limit time.Duration, measured string) Target {
		meets := func(x float64) bool { return time.Duration(x) <= limit }
		return Target{Goal: goal, Asked: "<= " + Millis(limit), Measured: measured, Met: d <= limit,
			value: float64(d), meets: meets, show: func(x float64) string { return millisSided(time.Duration(x), limit) }}
	}

	// The pool against one process: the curve at N = CPUs, 2 and 4 x CPUs,
	// then the closed-loop table's routes at N = CPUs.
	if c := res.Curve; c != nil {
		for _, n := range []int{cpus, 2 * cpus, 4 * cpus} {
			if !slices.ContainsFunc(c.Points, func(pt CurvePoint) bool { return pt.Workers == n }) {
				out = append(out, missing(fmt.Sprintf("%d workers × %s, curve", n, BaselineName), fmt.Sprintf(">= %.2f×", wantAt(n, cpus)),
					fmt.Sprintf("not measured (the curve runs %s workers)", intList(res.Plan.Curve.Workers))))
			}
		}
		for _, pt := range c.Points {
			want := wantAt(pt.Workers, cpus)
			if want == 0 {
				continue
			}
			for i, cell := range res.Plan.Curve.Cells {
				if i >= len(pt.Cells) || len(pt.Cells[i].Runs) == 0 || i >= len(c.Baseline.Cells) {
					continue // the cell does not run at this point
				}
				base, _, _ := c.Baseline.Cells[i].Median()
				rate, _, _ := pt.Cells[i].Median()
				goal := fmt.Sprintf("%d workers × %s, curve: %s", pt.Workers, BaselineName, cell)
				if base <= 0 {
					out = append(out, missing(goal, fmt.Sprintf(">= %.2f×", want), "no 2xx from "+BaselineName))
					continue
				}
				out = append(out, ratio(goal, rate/base, want, pt.Cells[i].RoundRatios(c.Baseline.Cells[i])))
			}
		}
	} else {
		out = append(out, missing("the pool at every worker count × "+BaselineName, fmt.Sprintf(">= %.2f×, >= %.2f×", TargetAtCPUs, TargetOverProvisioned), "not measured (no curve)"))
	}
	for _, route := range res.Plan.Routes {
		pool, base := res.route(NWorkersName, route), res.route(BaselineName, route)
		if pool == nil || base == nil {
			continue
		}
		goal := fmt.Sprintf("%d workers (%s) × %s, closed-loop table: `%s` keep-alive", cpus, NWorkersName, BaselineName, route)
		b := base.MedianGoodput()
		if b <= 0 {
			out = append(out, missing(goal, fmt.Sprintf(">= %.2f×", TargetAtCPUs), "no 2xx from "+BaselineName))
			continue
		}
		var rounds []float64 // the table runs every configuration once per round
		baseRuns := base.ClosedLoops()
		for i, r := range pool.ClosedLoops() {
			if i < len(baseRuns) && Goodput(baseRuns[i]) > 0 {
				rounds = append(rounds, Goodput(r)/Goodput(baseRuns[i]))
			}
		}
		out = append(out, ratio(goal, pool.MedianGoodput()/b, TargetAtCPUs, rounds))
	}

	// The handler stack.
	const stackGoal = BaselineName + " × bare net/http in the worker's unit, `/` keep-alive, req/s in turn"
	switch s := res.Stack; {
	case s == nil:
		out = append(out, missing(stackGoal, fmt.Sprintf(">= %.2f×", TargetStack), "not measured"))
	case s.Skipped != "":
		out = append(out, missing(stackGoal, fmt.Sprintf(">= %.2f×", TargetStack), "skipped: "+s.Skipped))
	case len(s.Unit) == 0:
		out = append(out, missing(stackGoal, fmt.Sprintf(">= %.2f×", TargetStack), "bare was not measured in the worker's unit"))
	default:
		var rounds []float64
		for i := range min(len(s.Pool), len(s.Unit)) {
			if s.Unit[i] > 0 {
				rounds = append(rounds, s.Pool[i]/s.Unit[i])
			}
		}
		t := ratio(stackGoal, s.StackRatio(), TargetStack, rounds)
		var also []string
		if r := s.StackCPURatio(); r > 0 {
			also = append(also, fmt.Sprintf("CPU per request %.2f×", r))
		}
		if r := s.OnceCPURatio(); r > 0 {
			also = append(also, fmt.Sprintf("at once, CPU %.2f×", r))
		}
		if len(also) > 0 {
			t.Measured += "; " + strings.Join(also, ", ")
		}
		out = append(out, t)
	}

	// The spike, its median round (Runs[0]), every round's range beside it.
	if s := res.Spike; s != nil && len(s.Runs) > 0 && s.Unloaded != nil && s.Unloaded.Latency.P99 > 0 {
		on := s.Runs[0]
		var ratios, rejects, health []float64
		for _, r := range s.Rounds {
			ratios = append(ratios, r.Ratio())
			rejects = append(rejects, float64(r.Run.Result.Non2xxLatency.P50))
			if r.Run.Health != nil {
				health = append(health, float64(r.Run.Health.Latency.P99))
			}
		}
		v := float64(on.Result.Latency.P99) / float64(s.Unloaded.Latency.P99)
		p99Meets := func(x float64) bool { return x <= TargetSpikeP99 }
		out = append(out, Target{Goal: "spike, median round: admitted p99 × unloaded p99",
			Asked: fmt.Sprintf("<= %.0f×", TargetSpikeP99), Measured: sided(v, 2, p99Meets) + "×" + spreadOf(ratios, "%.2f×"), Met: v <= TargetSpikeP99,
			value: v, meets: p99Meets, show: func(x float64) string { return sided(x, 2, p99Meets) + "×" }})
		const rejectGoal = "spike, median round: time to reject p50"
		if on.Result.Responses > on.Result.OK {
			p50 := on.Result.Non2xxLatency.P50
			out = append(out, atMost(rejectGoal, p50, TargetRejectP50, millisSided(p50, TargetRejectP50)+spreadOfDurations(rejects)))
		} else {
			out = append(out, missing(rejectGoal, "<= "+Millis(TargetRejectP50), "none rejected"))
		}
		const healthGoal = "spike, median round: `/healthz` p99"
		if h := on.Health; h != nil && h.OK > 0 {
			out = append(out, atMost(healthGoal, h.Latency.P99, TargetHealthP99, millisSided(h.Latency.P99, TargetHealthP99)+spreadOfDurations(health)))
		} else {
			why := "not probed"
			if h != nil {
				why = millisSided(h.Latency.P99, TargetHealthP99) + spreadOfDurations(health) + ", no probe answered 2xx"
			}
			out = append(out, missing(healthGoal, "<= "+Millis(TargetHealthP99), why))
		}
	} else {
		out = append(out, missing("spike", fmt.Sprintf("<= %.0f×, <= %s, <= %s", TargetSpikeP99, Millis(TargetRejectP50), Millis(TargetHealthP99)), "not measured"))
	}

	// Start and replacement, medians.
	if s := res.Start; s != nil && len(s.Starts) > 0 && len(s.Kills) > 0 {
		var first, kills []float64
		for _, r := range s.Starts {
			first = append(first, float64(r.FirstOK))
		}
		for _, k := range s.Kills {
			kills = append(kills, float64(k))
		}
		f, k := time.Duration(median(first)), time.Duration(median(kills))
		startShown := millisSided(f, TargetStart) + spreadOfDurations(first)
		if len(s.BareStarts) > 0 {
			var bare []float64
			for _, r := range s.BareStarts {
				bare = append(bare, float64(r.FirstOK))
			}
			startShown += "; bare net/http in the worker's unit, started in turn: " + Millis(time.Duration(median(bare)))
		}
		out = append(out,
			atMost("cold start to the first 200, median", f, TargetStart, startShown),
			atMost("kill -9 of a worker to its successor's READY=1, median", k, TargetReplace, millisSided(k, TargetReplace)+spreadOfDurations(kills)))
	} else {
		out = append(out, missing("cold start and replacement", "<= "+Millis(TargetStart)+", <= "+Millis(TargetReplace), "not measured"))
	}

	if res.Elapsed > 0 {
		meets := func(x float64) bool { return time.Duration(x) < TargetDuration }
		show := func(x float64) string { return time.Duration(x).Truncate(time.Second).String() } // truncated: 14m59.6s is not "15m0s"
		out = append(out, Target{Goal: ElapsedGoal, Asked: fmt.Sprintf("< %.0f min", TargetDuration.Minutes()), Measured: show(float64(res.Elapsed)),
			Met: res.Elapsed < TargetDuration, value: float64(res.Elapsed), meets: meets, show: show})
	}
	return out
}

// wantAt is the pool's target at n workers on cpus CPUs (0: none).
func wantAt(n, cpus int) float64 {
	switch n {
	case cpus:
		return TargetAtCPUs
	case 2 * cpus, 4 * cpus:
		return TargetOverProvisioned
	}
	return 0
}

// sided formats v with prec decimals, or more when fewer would print a
// value on the other side of the threshold (met) than v itself: 0.9496
// against ">= 0.95" prints 0.9496, not 0.950, so that no value reads as met
// beside "no", or the reverse.
func sided(v float64, prec int, met func(float64) bool) string {
	for p := prec; ; p++ {
		s := strconv.FormatFloat(v, 'f', p, 64)
		if x, err := strconv.ParseFloat(s, 64); err != nil || met(x) == met(v) || p >= 9 {
			return s
		}
	}
}

// millisSided is Millis, with more decimals when Millis would print a
// duration over limit as one at or under it.
func millisSided(d, limit time.Duration) string {
	s := Millis(d)
	ms, err := strconv.ParseFloat(strings.TrimSuffix(s, " ms"), 64)
	if err != nil || (ms <= limit.Seconds()*1e3) == (d <= limit) {
		return s
	}
	return sided(d.Seconds()*1e3, 0, func(x float64) bool { return x <= limit.Seconds()*1e3 }) + " ms"
}

// spreadOf formats " (rounds lo-hi)" of values, or "" for fewer than two.
func spreadOf(values []float64, format string) string {
	if len(values) < 2 {
		return ""
	}
	return " (rounds " + fmt.Sprintf(format, slices.Min(values)) + "-" + fmt.Sprintf(format, slices.Max(values)) + ")"
}

// spreadOfDurations is spreadOf for durations held as float64 nanoseconds.
func spreadOfDurations(values []float64) string {
	if len(values) < 2 {
		return ""
	}
	return " (rounds " + Millis(time.Duration(slices.Min(values))) + "-" + Millis(time.Duration(slices.Max(values))) + ")"
}

// WriteTargets writes the targets table: each goal, what is asked, this
// run's value and whether it was met.
func WriteTargets(w io.Writer, res *Results) {
	p := asPrinter(w)
	targets := Targets(res)
	met := 0
	for _, t := range targets {
		if t.Met {
			met++
		}
	}
	p.printf("Issue 12's targets (\"The pool costs nothing\") as this run measured them: **%d of %d met**. Each value is\n", met, len(targets))
	p.printf("one of the tables below; ratios with 3 decimals so that none is rounded across its threshold, and in\n")
	p.printf("brackets the lowest and highest of the run's rounds, which say how far one run can be trusted.\n\n")
	p.printf("| target | asked | this run | met |\n|---|---|---|---|\n")
	for _, t := range targets {
		verdict := "yes"
		if !t.Met {
			verdict = "**no**"
		}
		p.printf("| %s | %s | %s | %s |\n", t.Goal, t.Asked, t.Measured, verdict)
	}
}
