package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/config/unitfile"
	"github.com/clusterapp/clusterapp/service/lab/loadgen"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// StackPlan is the handler stack against bare net/http, side by side: the
// pool's one-process configuration (BaselineName) on the shipped socket,
// the bare anchor (cmd/clusterapp-bare, the same routes on net/http alone)
// on its own port, and bare again under the worker unit's own hardening on a
// socket of the shipped socket's settings (BareUnits) are up at once, and
// Route is loaded on each in turn, Rounds times. Runs minutes apart on a
// shared machine move by more than the stack costs; runs taking turns see
// the same drift.
//
// AtOnce rounds follow, which load the worker and bare in the unit at the
// same time, each from its own generator: the two servers share CPU 0 and
// the generators the other CPUs (plan.CPUs >= 2), so whatever else the
// machine does weighs on both alike. On the 2-CPU guest of
// docs/benchmarks.md the stack's CPU ratio of one run's rounds spread over
// 0.93-1.15 in turn, and over 0.86-0.92 at once.
type StackPlan struct {
	Route       string        // e.g. "/"
	Rounds      int           // default 1
	Concurrency int           // keep-alive connections
	Duration    time.Duration // of each run
	AtOnce      int           // rounds at once; 0: none
}

// StackGODEBUG is what bare net/http runs with beside the worker in the
// stack comparison: the worker unit's Environment=GODEBUG= (the runtime's
// monitor thread kept awake, config.MonitorTrace).
const StackGODEBUG = "GODEBUG=" + config.MonitorTrace

// StackResult is the side-by-side runs: 2xx req/s of each round and the
// server's CPU time per 2xx response (µs: every thread of the worker, or of
// bare, from schedstat around the run), or why the comparison was skipped
// (no bare anchor). Pool is the worker, Bare bare net/http as a plain
// transient unit, Unit bare under the worker unit's hardening (absent from
// results written before it was measured).
type StackResult struct {
	Route            string
	Pool, Bare       []float64
	PoolCPU, BareCPU []float64 `json:",omitempty"`
	Unit, UnitCPU    []float64 `json:",omitempty"`
	// Once* are the rounds at once (StackPlan.AtOnce): the worker's and
	// bare in the unit's req/s and CPU per request, each pair measured
	// over the same seconds.
	OncePool, OncePoolCPU []float64 `json:",omitempty"`
	OnceUnit, OnceUnitCPU []float64 `json:",omitempty"`
	Skipped               string    `json:",omitempty"`
}

// OnceCPURatio is StackCPURatio over the rounds at once: the median of
// each round's ratio, since each round's pair saw the same seconds (0
// without them).
func (s *StackResult) OnceCPURatio() float64 {
	var r []float64
	for i := range min(len(s.OncePoolCPU), len(s.OnceUnitCPU)) {
		if s.OncePoolCPU[i] > 0 {
			r = append(r, s.OnceUnitCPU[i]/s.OncePoolCPU[i])
		}
	}
	return median(r)
}

// Ratio is the pool's median req/s over bare's (0 without runs): the
// handler stack and the worker unit together.
func (s *StackResult) Ratio() float64 { return rateRatio(s.Pool, s.Bare) }

// CPURatio is bare's median CPU time per response over the pool's: 1 when
// the stack costs nothing, 0.9 when the worker spends 11% more per
// response. On a shared machine it moves less than req/s: what else runs
// takes CPUs away from both servers but adds nothing to their own time per
// request. 0 without CPU readings.
func (s *StackResult) CPURatio() float64 { return cpuRatio(s.PoolCPU, s.BareCPU) }

// StackRatio and StackCPURatio are Ratio and CPURatio against bare under
// the worker unit's hardening: the handler stack's price alone, both sides
// paying the unit's. 0 when bare was not measured in the unit.
func (s *StackResult) StackRatio() float64    { return rateRatio(s.Pool, s.Unit) }
func (s *StackResult) StackCPURatio() float64 { return cpuRatio(s.PoolCPU, s.UnitCPU) }

// UnitRatio and UnitCPURatio are bare in the worker's unit against bare
// plain: the unit's price alone.
func (s *StackResult) UnitRatio() float64    { return rateRatio(s.Unit, s.Bare) }
func (s *StackResult) UnitCPURatio() float64 { return cpuRatio(s.UnitCPU, s.BareCPU) }

// rateRatio is the median of num over the median of den (0 without den).
func rateRatio(num, den []float64) float64 {
	if d := median(den); d > 0 {
		return median(num) / d
	}
	return 0
}

// cpuRatio is base's median CPU time per response over cost's: 1 when
// cost's side spends no more per response, 0.9 when it spends 11% more
// (0 without readings).
func cpuRatio(cost, base []float64) float64 {
	if c := median(cost); c > 0 && len(base) > 0 {
		return median(base) / c
	}
	return 0
}

// stack measures plan.Stack with the bare anchor of plan.Anchors.
func (r *Runner) stack(ctx context.Context, plan Plan) (*StackResult, error) {
	sp := plan.Stack
	res := &StackResult{Route: sp.Route}
	bare, skipped := bareAnchor(plan)
	if res.Skipped = skipped; skipped != "" {
		r.logf(">> handler stack against bare net/http: skipped: %s", res.Skipped)
		return res, nil
	}
	baseline := baselineOf(plan)
	r.logf(">> handler stack: %s against bare net/http, plain and in the worker's unit, on %s, in turn", baseline.Name, sp.Route)
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
	stopUnit, err := r.startBareUnit(ctx, bare.Argv[0], plan.CPUs)
	if err != nil {
		return nil, fmt.Errorf("handler stack: %w", err)
	}
	defer stopUnit()
	flags := []string{"-c", strconv.Itoa(sp.Concurrency), "-d", sp.Duration.String(), "-keepalive=true"}
	type side struct {
		url, units string
		rate, cpu  *[]float64
	}
	sides := []side{
		{sandbox.URL + sp.Route, config.WorkerPattern, &res.Pool, &res.PoolCPU},
		{fmt.Sprintf("http://127.0.0.1:%d%s", bareUnitPort, sp.Route), BareUnit, &res.Unit, &res.UnitCPU},
		{bare.base() + sp.Route, anchorUnit, &res.Bare, &res.BareCPU},
	}
	// Each warmed up first (its first connections, first heap growth,
	// first page faults; bare in the unit is started by its first
	// connection), uncounted.
	for _, t := range sides {
		if _, err := r.loadURL(ctx, "", t.url, time.Second, "-c", strconv.Itoa(sp.Concurrency), "-d", "1s", "-keepalive=true"); err != nil {
			return nil, fmt.Errorf("handler stack %s: warm-up: %w", t.url, err)
		}
	}
	for round := range max(sp.Rounds, 1) {
		// The order turns by one each round, so no side always runs just
		// after the same other one.
		order := append(slices.Clone(sides[round%len(sides):]), sides[:round%len(sides)]...)
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
		r.logf("   round %d: %s %.1f req/s (%.1f µs CPU/req), bare in its unit %.1f req/s (%.1f µs), bare %.1f req/s (%.1f µs)",
			i+1, baseline.Name, res.Pool[i], res.PoolCPU[i], res.Unit[i], res.UnitCPU[i], res.Bare[i], res.BareCPU[i])
	}
	if sp.AtOnce > 0 && plan.CPUs >= 2 {
		if err := r.stackAtOnce(ctx, plan, sides[0].url, sides[1].url, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// pinScript binds every thread of the main process of each active unit
// matching $2 to the CPUs $1 (threads started later inherit it).
const pinScript = `for u in $(systemctl list-units --plain --no-legend --state=active "$2" | cut -d' ' -f1); do
  p=$(systemctl show -p MainPID --value "$u")
  [ "$p" -gt 0 ] 2>/dev/null && taskset -a -p -c "$1" "$p" >/dev/null
done`

// stackAtOnce runs the rounds at once (StackPlan): the worker (pool) and
// bare in the unit (unit) bound to CPU 0, each loaded from a generator
// bound to the other CPUs with half the connections (the pair has the
// cells' count between them: more only queue at the generators' CPUs),
// both runs started together. Both run with
// GOMAXPROCS = plan.CPUs set explicitly (the baseline's environment file,
// bare's drop-in), so neither shrinks to the one CPU it is bound to. The
// servers are unbound again after.
func (r *Runner) stackAtOnce(ctx context.Context, plan Plan, pool, unit string, res *StackResult) error {
	sp := plan.Stack
	pin := func(cpus string) error {
		for _, pattern := range []string{config.WorkerPattern, BareUnit} {
			if _, err := r.Box.Exec(ctx, 10*time.Second, "sh", "-c", pinScript, "pin", cpus, pattern); err != nil {
				return fmt.Errorf("handler stack at once: bind %s to CPUs %s: %w", pattern, cpus, err)
			}
		}
		return nil
	}
	if err := pin("0"); err != nil {
		return err
	}
	defer func() { _ = pin(fmt.Sprintf("0-%d", plan.CPUs-1)) }() // the next section restarts the workers anyway
	others := "1"
	if plan.CPUs > 2 {
		others = fmt.Sprintf("1-%d", plan.CPUs-1)
	}
	r.logf(">> handler stack at once: %s and bare in the worker's unit on CPU 0, their generators on CPUs %s, %d rounds", BaselineName, others, sp.AtOnce)
	sides := []struct{ url, units string }{{pool, config.WorkerPattern}, {unit, BareUnit}}
	for round := range sp.AtOnce + 1 {
		var runs [2]CurveRun
		var errs [2]error
		var wg sync.WaitGroup
		for i, t := range sides {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := sp.Duration
				if round == 0 { // an uncounted second of each, bound as they will run
					d = time.Second
				}
				runs[i], errs[i] = r.counted(ctx, t.units, func() (*loadgen.Result, error) {
					return r.loadURL(ctx, others, t.url, d, "-c", strconv.Itoa(max(sp.Concurrency/2, 1)), "-d", d.String(), "-keepalive=true")
				})
			}()
		}
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			return fmt.Errorf("handler stack at once: %w", err)
		}
		if round == 0 {
			continue
		}
		_, pc := runs[0].PerRequest()
		_, uc := runs[1].PerRequest()
		res.OncePool, res.OncePoolCPU = append(res.OncePool, Goodput(runs[0].Result)), append(res.OncePoolCPU, pc)
		res.OnceUnit, res.OnceUnitCPU = append(res.OnceUnit, Goodput(runs[1].Result)), append(res.OnceUnitCPU, uc)
		r.logf("   at once %d: %s %.1f req/s (%.1f µs CPU/req), bare in its unit %.1f req/s (%.1f µs): %.3f",
			round, BaselineName, res.OncePool[round-1], pc, res.OnceUnit[round-1], uc, uc/pc)
	}
	return nil
}

// startBareUnit installs bare's units derived from the worker's (BareUnits;
// bin is bare's path in the box) and starts its socket; stop stops both
// and removes them.
func (r *Runner) startBareUnit(ctx context.Context, bin string, gomaxprocs int) (stop func(), err error) {
	service, socket, err := BareUnits(r.Box.Src, bin)
	if err != nil {
		return nil, err
	}
	// GOMAXPROCS as the baseline's environment file sets it for the worker:
	// explicit, so the runtime keeps it when the rounds at once bind the
	// process to one CPU (it would follow the binding otherwise).
	dropIn, err := unitfile.New("").Section("Service").Set("Environment", fmt.Sprintf("GOMAXPROCS=%d", gomaxprocs)).String()
	if err != nil {
		return nil, err
	}
	files := map[string]string{BareUnit: service, BareSocketUnit: socket, BareUnit + ".d/gomaxprocs.conf": dropIn}
	for name, text := range files {
		if err := r.Box.WriteFile(ctx, bareUnitDir+"/"+name, text); err != nil {
			return nil, err
		}
	}
	stop = func() {
		_, _ = r.Box.Exec(context.Background(), time.Minute, "sh", "-c",
			"systemctl stop "+BareSocketUnit+" "+BareUnit+"; rm -rf "+bareUnitDir+"/"+BareUnit+" "+bareUnitDir+"/"+BareUnit+".d "+bareUnitDir+"/"+BareSocketUnit+"; systemctl daemon-reload")
	}
	if _, err := r.Box.Exec(ctx, time.Minute, "sh", "-c", "systemctl daemon-reload && systemctl start "+BareSocketUnit); err != nil {
		stop()
		return nil, fmt.Errorf("bare in the worker's unit: %w", err)
	}
	return stop, nil
}

// WriteStack writes the side-by-side runs and the ratios of their medians:
// one table of 2xx req/s and one of CPU per request, each with the
// handler stack's ratio (against bare in the worker's unit), the unit's
// (bare in it against bare plain) and both together (against bare plain).
// Results from before bare ran in the unit have the last ratio only.
func WriteStack(w io.Writer, res *Results) {
	p := asPrinter(w)
	s := res.Stack
	if s.Skipped != "" {
		p.printf("Skipped: %s.\n", s.Skipped)
		return
	}
	at := func(v []float64, i int) float64 { // runs of results older than a column have none
		if i < len(v) {
			return v[i]
		}
		return math.NaN()
	}
	num := func(v float64, format string) string {
		if math.IsNaN(v) || v == 0 {
			return "–"
		}
		return fmt.Sprintf(format, v)
	}
	ratio := func(a, b float64) string {
		if math.IsNaN(a) || math.IsNaN(b) || a == 0 || b == 0 {
			return "–"
		}
		return Ratio(a, b)
	}
	unit := len(s.Unit) > 0
	// table writes one table; higher says whether more is better (req/s)
	// or less (CPU per request). Either way a ratio is the first side as a
	// fraction of the second: below 1 when the first is the slower or the
	// dearer.
	table := func(title, format string, pool, inUnit, bare []float64, higher bool) {
		of := func(a, b float64) string {
			if higher {
				return ratio(a, b)
			}
			return ratio(b, a)
		}
		heads := [3]string{BaselineName + " ÷ bare in the unit", "bare in it ÷ bare", BaselineName + " ÷ bare"}
		if !higher {
			heads = [3]string{"bare in the unit's ÷ " + BaselineName + "'s", "bare's ÷ bare in the unit's", "bare's ÷ " + BaselineName + "'s"}
		}
		if unit {
			p.printf("| round | %s: %s | bare in the worker's unit | bare | **the stack:** %s | the unit: %s | both: %s |\n|---|---|---|---|---|---|---|\n",
				BaselineName, title, heads[0], heads[1], heads[2])
		} else {
			p.printf("| round | %s: %s | bare | %s |\n|---|---|---|---|\n", BaselineName, title, heads[2])
		}
		row := func(label string, a, u, b float64, bold string) {
			if unit {
				p.printf("| %s | %s | %s | %s | %s%s%s | %s | %s |\n", label, num(a, format), num(u, format), num(b, format), bold, of(a, u), bold, of(u, b), of(a, b))
			} else {
				p.printf("| %s | %s | %s | %s%s%s |\n", label, num(a, format), num(b, format), bold, of(a, b), bold)
			}
		}
		for i := range pool {
			row(fmt.Sprint(i+1), at(pool, i), at(inUnit, i), at(bare, i), "")
		}
		row("median", median(pool), median(inUnit), median(bare), "**")
	}
	table("2xx req/s", "%.1f", s.Pool, s.Unit, s.Bare, true)
	p.printf("\n")
	table("CPU µs / request", "%.1f", s.PoolCPU, s.UnitCPU, s.BareCPU, false)
	writeStackAtOnce(p, s)
}

// writeStackAtOnce writes the rounds at once, each with its own ratio: the
// median is of those ratios, each over one pair of runs.
func writeStackAtOnce(p *printer, s *StackResult) {
	n := min(len(s.OncePool), len(s.OncePoolCPU), len(s.OnceUnit), len(s.OnceUnitCPU))
	if n == 0 {
		return
	}
	p.printf("\nAt once: both servers on CPU 0, each loaded from its own generator on the other CPUs, over the same seconds.\n\n")
	p.printf("| round | %s: 2xx req/s | CPU µs / request | bare in the worker's unit: 2xx req/s | CPU µs / request | **the stack:** bare in the unit's CPU ÷ %s's |\n|---|---|---|---|---|---|\n",
		BaselineName, BaselineName)
	for i := range n {
		p.printf("| %d | %.1f | %.1f | %.1f | %.1f | %s |\n", i+1, s.OncePool[i], s.OncePoolCPU[i], s.OnceUnit[i], s.OnceUnitCPU[i], Ratio(s.OnceUnitCPU[i], s.OncePoolCPU[i]))
	}
	p.printf("| median | %.1f | %.1f | %.1f | %.1f | **%.2f×** |\n", median(s.OncePool[:n]), median(s.OncePoolCPU[:n]), median(s.OnceUnit[:n]), median(s.OnceUnitCPU[:n]), s.OnceCPURatio())
}
