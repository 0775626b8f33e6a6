package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/loadgen"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// Plan says what one benchmark run measures.
type Plan struct {
	// CPUs is the machine's CPU count, N.
	CPUs int
	// Configs are measured in order; the first is the reference whose
	// closed-loop maximum sets the fixed rate for all of them.
	Configs []Configuration
	// Routes are loaded in every configuration.
	Routes []string
	// Concurrency is the connections of the closed-loop and fixed-rate
	// runs (keep-alive). Default 64.
	Concurrency int
	// Cell is the length of each closed-loop and each fixed-rate run.
	Cell time.Duration
	// FixedRateFraction of the reference's maximum is offered to every
	// configuration in the fixed-rate run. Default 0.5.
	FixedRateFraction float64
	// Repeats is how many closed-loop runs each route gets under each
	// configuration. Throughput and the worker share move from run to run
	// with how the kernel schedules the processes on a shared machine, so
	// their medians are reported (every run is kept). Default 1.
	Repeats int
	// Curve is the worker-count curve; nil skips it.
	Curve *CurvePlan
	// Anchors are programs outside the suite measured on the curve's
	// cells; nil (or no Curve) skips them.
	Anchors *AnchorPlan
	// Stack is the handler stack against the bare anchor of Anchors,
	// alternating; nil skips it.
	Stack *StackPlan
	// Spike is the spike scenario; nil skips it.
	Spike *SpikePlan
	// Faults is the frozen and crash-looping worker scenario; nil skips it.
	Faults *FaultPlan
	// Start times a cold start and a killed worker's replacement; nil
	// skips it.
	Start *StartPlan
}

// SpikePlan is issue 7's scenario: 10x the sustainable rate of a CPU route.
// The sustainable rate is the closed-loop 2xx rate of Route under Off (no
// request turned away), measured in Layout just before the spikes.
type SpikePlan struct {
	Route  string
	Layout SpikeLayout
	// Factor times the sustainable rate is offered. Default 10.
	Factor float64
	// UnloadedFraction of the sustainable rate (at least 10 req/s) is the
	// rate of the unloaded reference run.
	UnloadedFraction float64
	Duration         time.Duration
	Concurrency      int
	Timeout          time.Duration
	On, Off          Configuration
	// Rounds is how many times the protected spike runs, each just after an
	// unloaded run of its own (default 1). A 5 s spike admits about a
	// thousand requests and its unloaded run sends a few dozen, so one
	// round's p99s are its tenth- and first-slowest requests: single rounds
	// of unchanged builds read 0.66x to 3.05x (docs/benchmarks.md, notes).
	Rounds int
}

// Results is everything one run measured.
type Results struct {
	Plan    Plan
	Machine Machine
	Date    time.Time
	// Build names the code measured: the last commit to touch anything
	// but the docs, "-dirty" when such files had uncommitted changes, ""
	// when unknown (runs.go).
	Build string `json:",omitempty"`
	// LoadBefore and LoadAfter are the machine's load averages around the
	// run (1, 5, 15 min), since other work on it moves every number.
	LoadBefore, LoadAfter string
	Configs               []ConfigResult
	Curve                 *CurveResult
	Anchors               []AnchorResult
	Stack                 *StackResult
	Spike                 *SpikeResult
	Faults                *FaultResult
	Start                 *StartResult `json:",omitempty"`
	// Elapsed is the bench's own time, from the box's boot to the last
	// measurement (0 in results written before it was kept).
	Elapsed time.Duration `json:",omitempty"`
}

// ConfigResult is one configuration's measurements.
type ConfigResult struct {
	Config     Configuration
	Workers    int
	GOMAXPROCS map[string]int // by X-Worker value, from /metrics
	Routes     []RouteResult
	Memory     []Worker // after the last load
}

// RouteResult is one route under one configuration.
type RouteResult struct {
	Route     string
	Max       *loadgen.Result // closed loop
	FixedRate float64
	Fixed     *loadgen.Result // open loop at FixedRate
	// Repeats are the extra closed-loop runs (Plan.Repeats - 1 of them).
	Repeats []*loadgen.Result
}

// SpikeResult is the spike scenario's measurements.
type SpikeResult struct {
	Sustainable float64         // req/s
	ClosedLoop  *loadgen.Result // the run Sustainable comes from
	Offered     float64         // req/s
	// Unloaded and Runs[0] are the protected round whose admitted p99 over
	// its unloaded p99 is the median of Rounds; Runs[1] is protection off.
	Unloaded *loadgen.Result
	Runs     []SpikeRun
	// Rounds are every protected round, in the order they ran; Median
	// indexes the one in Unloaded and Runs[0].
	Rounds []SpikeRound
	Median int
}

// SpikeRound is one protected spike and the unloaded run just before it.
type SpikeRound struct {
	Unloaded *loadgen.Result
	Run      SpikeRun
}

// Ratio is the round's admitted p99 over its unloaded p99 (0 when the
// unloaded run has no latency to divide by).
func (sr SpikeRound) Ratio() float64 {
	if sr.Unloaded == nil || sr.Unloaded.Latency.P99 <= 0 {
		return 0
	}
	return float64(sr.Run.Result.Latency.P99) / float64(sr.Unloaded.Latency.P99)
}

// medianRound is the index of the round whose Ratio is the median (the
// lower middle one of an even number).
func medianRound(rounds []SpikeRound) int {
	idx := make([]int, len(rounds))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(rounds[a].Ratio(), rounds[b].Ratio()) })
	return idx[(len(idx)-1)/2]
}

// SpikeRun is the spike under one configuration.
type SpikeRun struct {
	Config        Configuration
	Result        *loadgen.Result
	Before, After []Worker
	AdmissionWait string
	GOMAXPROCS    map[string]int // by X-Worker value, from /metrics
	// Health is a light probe of /healthz sent during the spike by a second
	// generator: what a load balancer's health check sees.
	Health *loadgen.Result
}

// healthProbe is the rate of the /healthz probe during a spike: 500 samples
// in a 5 s spike, so its p99 is the fifth-slowest probe (at 20 req/s it was
// the second-slowest of 100, and read 6-15 ms for the same spike).
const healthProbe = 100

// Runner runs a Plan against a booted box, logging progress to Log.
type Runner struct {
	Box *sandbox.Driver
	Log io.Writer
	// ReadyTimeout bounds how long a configuration's workers may take to
	// start; default 30s.
	ReadyTimeout time.Duration

	started time.Time // when Run began: a step's line says how far in it starts
}

// logf writes a line of progress; a step's line (">> ...") carries the time
// since Run began, so a run's log shows where its minutes went.
func (r *Runner) logf(format string, args ...any) {
	if r.Log == nil {
		return
	}
	if rest, ok := strings.CutPrefix(format, ">> "); ok && !r.started.IsZero() {
		format = ">> [" + time.Since(r.started).Round(time.Second).String() + "] " + rest
	}
	fmt.Fprintf(r.Log, format+"\n", args...)
}

// Run measures every configuration, then the worker-count curve and the
// anchors, the spike scenario and the faults.
func (r *Runner) Run(ctx context.Context, plan Plan) (*Results, error) {
	res := &Results{Plan: plan}
	r.started = time.Now()
	early, earlyBare, err := r.earlyStarts(ctx, plan) // before any load: the box just booted
	if err != nil {
		return nil, err
	}
	var fixedRates map[string]float64 // by route, from the reference
	for i, c := range plan.Configs {
		cr, err := r.measureConfig(ctx, plan, c, fixedRates)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			fixedRates = map[string]float64{}
			for _, rr := range cr.Routes {
				fixedRates[rr.Route] = rr.FixedRate
			}
		}
		res.Configs = append(res.Configs, *cr)
	}
	// The repeats come in rounds, every configuration once per round, so
	// that each configuration's median is taken over the same stretch of a
	// shared machine's drift as every other's (run back to back, one
	// configuration read 0.71x another that a side-by-side run put at
	// 0.95-0.98x). The order turns by one each round (the first round
	// keeps the plan's, whose first configuration sets the fixed rates),
	// so no configuration always runs just after the same neighbour: in
	// one order, the pool at its defaults read 3-9% below the same pool
	// with balancing off on /slow in six runs out of seven, while taking
	// turns in one box put them level (docs/benchmarks.md, notes).
	for round := 2; round <= plan.Repeats; round++ {
		for k := range res.Configs {
			i := (k + round - 1) % len(res.Configs)
			if err := r.repeatConfig(ctx, plan, &res.Configs[i], round); err != nil {
				return nil, err
			}
		}
	}
	if plan.Curve != nil {
		curve, err := r.curve(ctx, plan)
		if err != nil {
			return nil, err
		}
		res.Curve = curve
		if plan.Stack != nil {
			if res.Stack, err = r.stack(ctx, plan); err != nil {
				return nil, err
			}
		}
		if plan.Anchors != nil {
			if res.Anchors, err = r.anchors(ctx, plan); err != nil {
				return nil, err
			}
		}
	}
	if plan.Spike != nil {
		spike, err := r.spike(ctx, plan)
		if err != nil {
			return nil, err
		}
		res.Spike = spike
	}
	if plan.Faults != nil {
		faults, err := r.faults(ctx, plan)
		if err != nil {
			return nil, err
		}
		res.Faults = faults
	}
	if plan.Start != nil {
		start, err := r.startup(ctx, plan)
		if err != nil {
			return nil, err
		}
		start.EarlyStarts, start.EarlyBareStarts = early, earlyBare
		res.Start = start
	}
	return res, nil
}

func (r *Runner) measureConfig(ctx context.Context, plan Plan, c Configuration, fixedRates map[string]float64) (*ConfigResult, error) {
	workers, err := c.Workers(plan.CPUs)
	if err != nil {
		return nil, err
	}
	r.logf(">> %s: %d worker(s)", c.Name, workers)
	if err := r.apply(ctx, c, workers); err != nil {
		return nil, err
	}
	cr := &ConfigResult{Config: c, Workers: workers}
	if cr.GOMAXPROCS, err = r.gomaxprocs(ctx, workers); err != nil {
		return nil, err
	}
	for _, route := range plan.Routes {
		rr, err := r.measureRoute(ctx, plan, route, fixedRates)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", c.Name, route, err)
		}
		cr.Routes = append(cr.Routes, *rr)
	}
	cr.Memory, err = r.workers(ctx, workers)
	return cr, err
}

// repeatConfig applies cr's configuration again (fresh processes) and adds
// one more closed-loop run of every route to it.
func (r *Runner) repeatConfig(ctx context.Context, plan Plan, cr *ConfigResult, round int) error {
	r.logf(">> %s, round %d of %d: %d worker(s)", cr.Config.Name, round, plan.Repeats, cr.Workers)
	if err := r.apply(ctx, cr.Config, cr.Workers); err != nil {
		return err
	}
	for i := range cr.Routes {
		rr := &cr.Routes[i]
		again, err := r.load(ctx, rr.Route, plan.Cell, "-c", fmt.Sprint(plan.Concurrency), "-d", plan.Cell.String(), "-keepalive=true")
		if err != nil {
			return fmt.Errorf("%s %s: %w", cr.Config.Name, rr.Route, err)
		}
		rr.Repeats = append(rr.Repeats, again)
		r.logf("   %-10s max %8.1f req/s (%d errors)", rr.Route, Goodput(again), again.Errors())
	}
	return nil
}

func (r *Runner) measureRoute(ctx context.Context, plan Plan, route string, fixedRates map[string]float64) (*RouteResult, error) {
	cell := plan.Cell.String()
	conc := fmt.Sprint(plan.Concurrency)
	maxRes, err := r.load(ctx, route, plan.Cell, "-c", conc, "-d", cell, "-keepalive=true")
	if err != nil {
		return nil, err
	}
	if maxRes.OK == 0 {
		return nil, fmt.Errorf("%w: no 2xx response in the closed-loop run: status %v, errors %v", ErrNoResponses, maxRes.StatusCodes, maxRes.ErrorSamples)
	}
	rate, ok := fixedRates[route]
	if !ok { // the reference configuration sets the rate for everyone
		rate = math.Max(1, math.Round(Goodput(maxRes)*plan.FixedRateFraction))
	}
	fixed, err := r.load(ctx, route, plan.Cell, "-c", conc, "-d", cell, "-keepalive=true", "-rate", fmt.Sprint(rate))
	if err != nil {
		return nil, err
	}
	r.logf("   %-10s max %8.1f req/s (%d errors)  at %g req/s: p99 %v (%d errors)",
		route, Goodput(maxRes), maxRes.Errors(), rate, fixed.Latency.P99, fixed.Errors())
	return &RouteResult{Route: route, Max: maxRes, FixedRate: rate, Fixed: fixed}, nil
}

func (r *Runner) spike(ctx context.Context, plan Plan) (*SpikeResult, error) {
	sp := plan.Spike
	lay := sp.Layout
	out := &SpikeResult{}
	// Protection off first: its closed loop, where nothing is turned away,
	// is the sustainable rate the spike is a multiple of.
	r.logf(">> spike layout: %s", lay.Describe())
	if err := r.apply(ctx, sp.Off, lay.Workers); err != nil {
		return nil, err
	}
	var err error
	out.ClosedLoop, err = r.loadOn(ctx, lay.LoadCPUs, sp.Route, plan.Cell, "-c", fmt.Sprint(plan.Concurrency), "-d", plan.Cell.String(), "-keepalive=true")
	if err != nil {
		return nil, err
	}
	if out.Sustainable = Goodput(out.ClosedLoop); out.Sustainable <= 0 {
		return nil, fmt.Errorf("%w: spike: no 2xx response from %s in the closed loop: status %v, errors %v",
			ErrNoResponses, sp.Route, out.ClosedLoop.StatusCodes, out.ClosedLoop.ErrorSamples)
	}
	out.Offered = math.Round(out.Sustainable * sp.Factor)
	r.logf("   sustainable %.1f req/s; offering %g req/s", out.Sustainable, out.Offered)
	off, err := r.spikeRun(ctx, sp, sp.Off, out.Offered)
	if err != nil {
		return nil, err
	}
	if err := r.apply(ctx, sp.On, lay.Workers); err != nil {
		return nil, err
	}
	unloaded := math.Max(10, math.Round(out.Sustainable*sp.UnloadedFraction))
	for i := range max(sp.Rounds, 1) {
		if i > 0 {
			r.logf(">> spike round %d of %d", i+1, sp.Rounds)
		}
		var round SpikeRound
		if round.Unloaded, err = r.loadOn(ctx, lay.LoadCPUs, sp.Route, sp.Duration, "-c", "8", "-d", sp.Duration.String(), "-rate", fmt.Sprint(unloaded)); err != nil {
			return nil, err
		}
		on, err := r.spikeRun(ctx, sp, sp.On, out.Offered)
		if err != nil {
			return nil, err
		}
		round.Run = *on
		out.Rounds = append(out.Rounds, round)
	}
	out.Median = medianRound(out.Rounds)
	out.Unloaded = out.Rounds[out.Median].Unloaded
	out.Runs = []SpikeRun{out.Rounds[out.Median].Run, *off}
	return out, nil
}

// spikeRun offers the spike to the running configuration c.
func (r *Runner) spikeRun(ctx context.Context, sp *SpikePlan, c Configuration, offered float64) (*SpikeRun, error) {
	workers := sp.Layout.Workers
	run := &SpikeRun{Config: c}
	run.AdmissionWait, _ = envValue(c.Env, "CLUSTERAPP_ADMISSION_WAIT")
	var err error
	if run.GOMAXPROCS, err = r.gomaxprocs(ctx, workers); err != nil {
		return nil, err
	}
	if run.Before, err = r.workers(ctx, workers); err != nil {
		return nil, err
	}
	r.logf(">> spike, %s: %g req/s offered to %s", c.Name, offered, sp.Route)
	health := make(chan error, 1)
	go func() {
		var err error
		run.Health, err = r.loadOn(ctx, sp.Layout.LoadCPUs, "/healthz", sp.Duration+sp.Timeout, "-c", "4",
			"-d", sp.Duration.String(), "-timeout", sp.Timeout.String(), "-rate", fmt.Sprint(healthProbe))
		health <- err
	}()
	run.Result, err = r.loadOn(ctx, sp.Layout.LoadCPUs, sp.Route, sp.Duration+sp.Timeout, "-c", fmt.Sprint(sp.Concurrency),
		"-d", sp.Duration.String(), "-timeout", sp.Timeout.String(), "-rate", fmt.Sprint(offered))
	if herr := <-health; err == nil && herr != nil {
		err = fmt.Errorf("health probe: %w", herr)
	}
	if err != nil {
		return nil, err
	}
	if run.After, err = r.workers(ctx, workers); err != nil {
		return nil, err
	}
	r.logf("   %d requests: status %v, %d errors, admitted p99 %v, rejected p99 %v",
		run.Result.Requests, run.Result.StatusCodes, run.Result.Errors(), run.Result.Latency.P99, run.Result.Non2xxLatency.P99)
	return run, nil
}

// ClosedLoops returns the closed-loop runs: the first, then the repeats.
func (rr *RouteResult) ClosedLoops() []*loadgen.Result {
	return append([]*loadgen.Result{rr.Max}, rr.Repeats...)
}

// MedianGoodput is the median 2xx rate over the closed-loop runs.
func (rr *RouteResult) MedianGoodput() float64 {
	var rates []float64
	for _, r := range rr.ClosedLoops() {
		rates = append(rates, Goodput(r))
	}
	return median(rates)
}

func (res *Results) route(config, route string) *RouteResult {
	for _, cr := range res.Configs {
		if cr.Config.Name != config {
			continue
		}
		for i := range cr.Routes {
			if cr.Routes[i].Route == route {
				return &cr.Routes[i]
			}
		}
	}
	return nil
}
