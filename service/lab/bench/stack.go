package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/loadgen"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// StackPlan is the handler stack against bare net/http, side by side: the
// pool's one-process configuration (BaselineName) on the shipped socket and
// the bare anchor (cmd/clusterapp-bare, the same routes on net/http alone)
// on its own port are up at once, and Route is loaded on one, then the
// other, Rounds times. Runs minutes apart on a shared machine move by more
// than the stack costs; alternating runs see the same drift.
type StackPlan struct {
	Route       string        // e.g. "/"
	Rounds      int           // default 1
	Concurrency int           // keep-alive connections
	Duration    time.Duration // of each run
}

// StackGODEBUG is what bare net/http runs with beside the worker in the
// stack comparison: the worker unit's Environment=GODEBUG= (the runtime's
// monitor thread kept awake, config.MonitorTrace).
const StackGODEBUG = "GODEBUG=" + config.MonitorTrace

// StackResult is the side-by-side runs: 2xx req/s of each round and the
// server's CPU time per 2xx response (µs: every thread of the worker, or of
// bare, from schedstat around the run), or why the comparison was skipped
// (no bare anchor).
type StackResult struct {
	Route            string
	Pool, Bare       []float64
	PoolCPU, BareCPU []float64 `json:",omitempty"`
	Skipped          string    `json:",omitempty"`
}

// Ratio is the pool's median req/s over bare's (0 without runs).
func (s *StackResult) Ratio() float64 {
	if b := median(s.Bare); b > 0 {
		return median(s.Pool) / b
	}
	return 0
}

// CPURatio is bare's median CPU time per response over the pool's: 1 when
// the stack costs nothing, 0.9 when the worker spends 11% more per
// response. On a shared machine it moves less than req/s: what else runs
// takes CPUs away from both servers but adds nothing to their own time per
// request. 0 without CPU readings.
func (s *StackResult) CPURatio() float64 {
	if p := median(s.PoolCPU); p > 0 && len(s.BareCPU) > 0 {
		return median(s.BareCPU) / p
	}
	return 0
}

// stack measures plan.Stack with the bare anchor of plan.Anchors.
func (r *Runner) stack(ctx context.Context, plan Plan) (*StackResult, error) {
	sp := plan.Stack
	res := &StackResult{Route: sp.Route}
	var bare *Anchor
	if plan.Anchors != nil {
		for i, a := range plan.Anchors.Anchors {
			if a.Port == barePort {
				bare = &plan.Anchors.Anchors[i]
			}
		}
	}
	switch {
	case bare == nil:
		res.Skipped = "the plan has no bare net/http anchor"
	case bare.Skip != "":
		res.Skipped = bare.Skip
	}
	if res.Skipped != "" {
		r.logf(">> handler stack against bare net/http: skipped: %s", res.Skipped)
		return res, nil
	}
	baseline := baselineOf(plan)
	r.logf(">> handler stack: %s against bare net/http on %s, alternating", baseline.Name, sp.Route)
	if err := r.apply(ctx, baseline, 1); err != nil {
		return nil, err
	}
	// The worker unit's GODEBUG is the unit's, not the handler stack's:
	// bare runs with it too, so the stack is the only difference.
	same := *bare
	same.Env = append(slices.Clip(bare.Env), StackGODEBUG)
	bare = &same
	if bare.prepare != nil {
		if err := bare.prepare(ctx, r.Box); err != nil {
			return nil, fmt.Errorf("handler stack: %w", err)
		}
	}
	stop, err := r.startAnchor(ctx, *bare)
	if err != nil {
		return nil, fmt.Errorf("handler stack: %w", err)
	}
	defer stop()
	flags := []string{"-c", strconv.Itoa(sp.Concurrency), "-d", sp.Duration.String(), "-keepalive=true"}
	type side struct {
		url, units string
		rate, cpu  *[]float64
	}
	sides := []side{
		{sandbox.URL + sp.Route, config.WorkerPattern, &res.Pool, &res.PoolCPU},
		{bare.base() + sp.Route, anchorUnit, &res.Bare, &res.BareCPU},
	}
	// Both warmed up first (their first connections, first heap growth,
	// first page faults), uncounted.
	for _, t := range sides {
		if _, err := r.loadURL(ctx, "", t.url, time.Second, "-c", strconv.Itoa(sp.Concurrency), "-d", "1s", "-keepalive=true"); err != nil {
			return nil, fmt.Errorf("handler stack %s: warm-up: %w", t.url, err)
		}
	}
	for round := range max(sp.Rounds, 1) {
		// The order alternates (pool first, then bare first), so neither
		// side is always the one that runs just after the other.
		order := sides
		if round%2 == 1 {
			order = []side{sides[1], sides[0]}
		}
		for _, t := range order {
			run, err := r.counted(ctx, t.units, func() (*loadgen.Result, error) {
				return r.loadURL(ctx, "", t.url, sp.Duration, flags...)
			})
			if err != nil {
				return nil, fmt.Errorf("handler stack %s: %w", t.url, err)
			}
			_, cpu := run.PerRequest()
			*t.rate, *t.cpu = append(*t.rate, Goodput(run.Result)), append(*t.cpu, cpu)
		}
		i := len(res.Pool) - 1
		r.logf("   round %d: %s %.1f req/s (%.1f µs CPU/req), bare %.1f req/s (%.1f µs CPU/req)",
			i+1, baseline.Name, res.Pool[i], res.PoolCPU[i], res.Bare[i], res.BareCPU[i])
	}
	return res, nil
}

// WriteStack writes the side-by-side runs and the ratio of their medians.
func WriteStack(w io.Writer, res *Results) {
	p := asPrinter(w)
	s := res.Stack
	if s.Skipped != "" {
		p.printf("Skipped: %s.\n", s.Skipped)
		return
	}
	p.printf("| round | %s: 2xx req/s | bare net/http: 2xx req/s | ratio | %s: CPU µs / request | bare: CPU µs / request | bare's CPU / %s's |\n|---|---|---|---|---|---|---|\n",
		BaselineName, BaselineName, BaselineName)
	cpu := func(v []float64, i int) float64 { // results of a run before CPU was read have none
		if i < len(v) {
			return v[i]
		}
		return math.NaN()
	}
	micros := func(v float64) string {
		if math.IsNaN(v) || v == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f", v)
	}
	for i := range s.Pool {
		pc, bc := cpu(s.PoolCPU, i), cpu(s.BareCPU, i)
		p.printf("| %d | %.1f | %.1f | %s | %s | %s | %s |\n", i+1, s.Pool[i], s.Bare[i], Ratio(s.Pool[i], s.Bare[i]), micros(pc), micros(bc), Ratio(bc, pc))
	}
	pc, bc := median(s.PoolCPU), median(s.BareCPU)
	p.printf("| median | %.1f | %.1f | **%s** | %s | %s | **%s** |\n", median(s.Pool), median(s.Bare), Ratio(median(s.Pool), median(s.Bare)), micros(pc), micros(bc), Ratio(bc, pc))
}
