package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/clusterapp/clusterapp/service/config"
)

// Notes markers: what lies between them in an existing docs/benchmarks.md is
// written by a person and kept when the page is regenerated.
const (
	NotesBegin = "<!-- notes:begin -->"
	NotesEnd   = "<!-- notes:end -->"
)

// KeptNotes returns the text between the notes markers of an existing page,
// or "" when there is none.
func KeptNotes(page string) string {
	_, rest, ok := strings.Cut(page, NotesBegin)
	if !ok {
		return ""
	}
	notes, _, ok := strings.Cut(rest, NotesEnd)
	if !ok {
		return ""
	}
	return strings.Trim(notes, "\n")
}

// CurveChart is the file name of the worker-count chart (WriteCurveSVG),
// beside the page.
const CurveChart = "benchmarks-curve.svg"

// WriteMarkdown writes the whole docs/benchmarks.md page: machine, method,
// the tables, a reference to chart (the SVG's file name) and the kept notes;
// the targets are judged over runs too when runs.Dir is set.
func WriteMarkdown(w io.Writer, res *Results, runs Runs, chart, notes string) error {
	p := &printer{w: w}
	p.printf("# Benchmarks\n\n")
	build := ""
	if res.Build != "" {
		build = " (build `" + res.Build + "`)"
	}
	p.printf("Written by `make bench` (`cmd/clusterapp-bench`) on %s%s. Every number comes from that one run\n", res.Date.UTC().Format("2006-01-02 15:04 MST"), build)
	p.printf("but the targets judged over runs, which adds the earlier runs of the same build; ratios compare\n")
	p.printf("configurations measured minutes apart on the same machine. Re-run `make bench` to refresh this page;\nthe notes at the end are kept.\n\n")
	p.printf("## Issue 12's targets\n\n")
	WriteTargets(p, res)
	p.printf("\n")
	if runs.Dir != "" {
		WriteTargetsOverRuns(p, res, runs)
		p.printf("\n")
	}
	writeMachine(p, res)
	writeMethod(p, res)
	p.printf("## Throughput, closed loop\n\n![2xx responses per second, per route and configuration](%s)\n\n", chart)
	WriteThroughput(p, res)
	p.printf("\n## Latency at a fixed rate\n\n")
	WriteLatency(p, res)
	p.printf("\n## Memory per worker\n\n")
	WriteMemory(p, res)
	if res.Curve != nil {
		p.printf("\n## The pool at every worker count\n\n![2xx rate of the pool over one process's, by worker count](%s)\n\n", CurveChart)
		writeCurveMethod(p, res)
		WriteCurve(p, res)
		if res.Anchors != nil {
			p.printf("\n## Against the world\n\n")
			p.printf("The pool at N = CPUs and one clusterapp process (from the curve above) beside programs outside the\n")
			p.printf("suite, each run inside the same box on a port of its own while the pool is stopped, loaded by the same\n")
			p.printf("generator on the same cells (`-c %d -d %s`, %d runs, medians). A program that is missing is named below.\n\n",
				res.Plan.Curve.Concurrency, res.Plan.Curve.Duration, res.Plan.Anchors.repeats(res.Plan.Curve))
			WriteAnchors(p, res)
		}
		if res.Stack != nil {
			p.printf("\n## The handler stack against bare net/http, side by side\n\n")
			p.printf("One clusterapp process (\"%s\", the worker unit) on the shipped socket and bare net/http\n", BaselineName)
			p.printf("(`cmd/clusterapp-bare`, the same routes) twice: as a transient unit with the worker unit's `%s`\n", StackGODEBUG)
			p.printf("(so the runtime is set alike), and under the worker unit itself: a service derived from the shipped\n")
			p.printf("`%s` (every `[Service]` line but what starts, feeds and supervises the worker: its\n", config.WorkerTemplate)
			p.printf("sandbox, seccomp filters and `GODEBUG` kept) on a socket derived from `%s` (`%s`, `%s`).\n", config.SocketUnit, BareUnit, BareSocketUnit)
			p.printf("Against the first, the ratio is the handler stack's price and the unit's together; against the second, the\n")
			p.printf("handler stack's alone, which issue 12's target (0.9×) asks about. All three are up at once in the same box,\n")
			p.printf("`%s` loaded on each in turn, the order turning by one each round, after an uncounted second of each\n", res.Stack.Route)
			p.printf("(keep-alive, `-c %d -d %s`), %d rounds: all see the same drift of a shared machine.\n",
				res.Plan.Stack.Concurrency, res.Plan.Stack.Duration, max(res.Plan.Stack.Rounds, 1))
			p.printf("CPU per request is each server's own CPU time (every thread, `/proc/PID/task/TID/schedstat`) over\n")
			p.printf("its 2xx responses: the steadier of the two measures, since other work on the machine takes CPUs from\n")
			p.printf("every server but adds nothing to their time per request.\n")
			if n := res.Plan.Stack.AtOnce; n > 0 && res.Plan.CPUs >= 2 {
				p.printf("Then %d rounds load the worker and bare in the unit at the same time, each from its own generator with\n", n)
				p.printf("half the connections (`-c %d`): both servers bound to CPU 0 (`taskset`, every thread; both with\n", max(res.Plan.Stack.Concurrency/2, 1))
				p.printf("GOMAXPROCS=%d set, so neither runtime shrinks to the one CPU), the generators to the other CPUs.\n", res.Plan.CPUs)
				p.printf("Each round's two CPU readings cover the same seconds, so what else the machine does weighs on both\n")
				p.printf("alike, and the rounds' ratios spread less than in turn (compare the rounds of the two tables).\n")
			}
			p.printf("\n")
			WriteStack(p, res)
		}
	}
	if res.Spike != nil {
		p.printf("\n## Spike: %s at %gx its sustainable rate\n\n", res.Plan.Spike.Route, res.Plan.Spike.Factor)
		writeSpikeMethod(p, res)
		WriteSpike(p, res)
	}
	if res.Faults != nil {
		p.printf("\n## A frozen or crash-looping worker under load\n\n")
		writeFaultsMethod(p, res)
		WriteFaults(p, res)
	}
	if res.Start != nil && res.Plan.Start != nil {
		p.printf("\n## Start and replacement\n\n")
		p.printf("The pool of %d workers (`%s`), timed with the clocks inside the box, nothing polling it meanwhile.\n",
			res.Start.Workers, strings.ReplaceAll(strings.TrimSpace(res.Plan.Start.Config.Env), "\n", "` `"))
		p.printf("A cold start: every unit stopped, then `systemctl start %s` and a GET of `/` from the same bash,\n", strings.Join(ColdStartUnits, " "))
		p.printf("through its `/dev/tcp` (a client already running: no client's start-up is counted, as curl's was before);\n")
		p.printf("times from just before `systemctl start` to the 200's status line, worker 1's from systemd's journal lines (issue 12's target:\n")
		p.printf("the first 200 within 100 ms); \"sockets listening\" is when `systemctl start` returned (systemd binds each IP socket\n")
		p.printf("in a process it forks for it), the client connecting next; `%s`, which no worker waits for, is started once that is timed.\n", config.MetricsSocketUnit)
		p.printf("A replacement: `kill -9` of worker 1 after it served %v (a lone crash), from\n", res.Plan.Start.killAfter())
		p.printf("systemd's \"Main process exited\" to the new process's \"Started\" (READY=1) (target: 200 ms).\n")
		if res.Plan.Start.Bare {
			p.printf("After each cold start of the pool, bare net/http (`cmd/clusterapp-bare`) is started the same way, by the same\n")
			p.printf("script: socket-activated in units derived from the shipped ones (`%s`, `%s`: the worker\n", BareSocketUnit, BareUnit)
			p.printf("unit's hardening and the socket's settings), so the outside anchor's start shares the machine's moment.\n")
		}
		p.printf("\n")
		WriteStart(p, res)
	}
	p.printf("\n## Notes\n\n%s\n%s\n%s\n", NotesBegin, notes, NotesEnd)
	return p.err
}

func writeMachine(p *printer, res *Results) {
	m := res.Machine
	p.printf("## Machine\n\n")
	p.printf("- CPUs (`nproc`): %d, %s\n- kernel %s, %s\n", m.CPUs, m.Model, m.Kernel, m.Go)
	p.printf("- load average (1, 5, 15 min) before the run: %s; after: %s (the machine is shared: other work\n  running at the same time moves every number)\n", res.LoadBefore, res.LoadAfter)
	p.printf("- the suite runs under a real systemd 252 in a `scripts/sandbox` box (own PID, mount and network\n")
	p.printf("  namespaces); the load generator runs **inside the same box, on the same %d CPUs** as the workers\n", m.CPUs)
	p.printf("  (except in the spike section, which gives it a CPU of its own),\n")
	p.printf("  at `nice -n %d` so that its own scheduling delay is not reported as the server's latency.\n\n", loadNice)
}

func writeMethod(p *printer, res *Results) {
	plan := res.Plan
	p.printf("## Method\n\n")
	p.printf("Each configuration is the body of `%s`; switching to it writes the file,\n", config.EnvFile)
	p.printf("runs `systemctl daemon-reload`, stops every worker and starts `%s` again (fresh processes).\n", config.TargetUnit)
	p.printf("GOMAXPROCS is what each worker's `/metrics` reported (`go_sched_gomaxprocs_threads`).\n\n")
	p.printf("| configuration | workers | GOMAXPROCS per worker | env file | what it is |\n|---|---|---|---|---|\n")
	for _, cr := range res.Configs {
		p.printf("| %s | %d | %s | `%s` | %s |\n", cr.Config.Name, cr.Workers, gomaxprocs(cr.GOMAXPROCS),
			strings.ReplaceAll(strings.TrimSpace(cr.Config.Env), "\n", "` `"), cr.Config.Note)
	}
	p.printf("\n- **Result cache: OFF** (`CLUSTERAPP_CACHE_ENTRIES=0`) and per-client rate limit off in every run,\n")
	p.printf("  so `/fib` is computed every time. Admission control keeps its shipped defaults in the throughput\n")
	p.printf("  runs (the unit generator gives each worker CPUs/workers requests in flight, at least 1; 250ms wait,\n  then 503): throughput counts 2xx only.\n")
	p.printf("- Closed loop: `clusterapp-load -c %d -keepalive -d %s` per route and configuration; req/s = 2xx responses / elapsed.\n", plan.Concurrency, plan.Cell)
	if plan.Repeats > 1 {
		p.printf("  It runs %d times per route and configuration, in rounds (every configuration once per round, applied afresh on\n", plan.Repeats)
		p.printf("  new processes, the order turning by one each round), so every median spans the same stretch of the machine's drift: the tables and the chart give\n")
		p.printf("  the median 2xx rate (lowest-highest in brackets) and ratios of medians; the first round's 2xx rate sets the fixed rate below.\n")
	}
	p.printf("- Fixed rate: %g%% of the first configuration's (%s) closed-loop 2xx rate, offered to every configuration\n", plan.FixedRateFraction*100, plan.Configs[0].Name)
	p.printf("  (`-rate R -c %d -d %s`, keep-alive); latency runs from each request's intended send time (no coordinated omission).\n", plan.Concurrency, plan.Cell)
	p.printf("- Share: max/min of 2xx responses per worker (`X-Worker`, which names the worker on a connection's first response; the generator counts the later ones on it under that name) in the closed-loop run; +Inf means a worker got nothing.\n")
	if res.Plan.Repeats > 1 {
		p.printf("  The median share over the %d closed-loop runs comes first, every run's in brackets.\n", res.Plan.Repeats)
	}
	p.printf("- Memory: VmRSS (and VmHWM, the peak) of each worker's MainPID from `/proc/PID/status` after the configuration's\n")
	p.printf("  loads. systemd's MemoryCurrent is not available: the sandbox's cgroup2 has no memory controller on this host.\n\n")
}

func gomaxprocs(byWorker map[string]int) string {
	if len(byWorker) == 0 {
		return "?"
	}
	var parts []string
	for _, w := range slices.Sorted(maps.Keys(byWorker)) {
		parts = append(parts, fmt.Sprintf("%s: %d", w, byWorker[w]))
	}
	return strings.Join(parts, ", ")
}

// WriteThroughput writes the closed-loop table: 2xx req/s per route and
// configuration, against the first configuration and the baseline.
func WriteThroughput(w io.Writer, res *Results) {
	p := asPrinter(w)
	ref := res.Plan.Configs[0].Name
	p.printf("| route | configuration | 2xx req/s | × %s | × %s | non-2xx (all runs) | errors (all runs) | share max/min |\n|---|---|---|---|---|---|---|---|\n", ref, BaselineName)
	for _, route := range res.Plan.Routes {
		for _, cr := range res.Configs {
			rr := res.route(cr.Config.Name, route)
			if rr == nil {
				continue
			}
			rate := rr.MedianGoodput()
			p.printf("| `%s` | %s | %s | %s | %s | %d | %s | %s |\n", route, cr.Config.Name, RateRuns(rr),
				Ratio(rate, res.goodputOf(ref, route)), Ratio(rate, res.goodputOf(BaselineName, route)),
				non2xx(rr.ClosedLoops()), Errors(sumRuns(rr.ClosedLoops())), ShareRuns(rr, cr.Workers))
		}
	}
}

// WriteLatency writes the fixed-rate table: percentiles at the same offered
// load, p99 against the first configuration's.
func WriteLatency(w io.Writer, res *Results) {
	p := asPrinter(w)
	ref := res.Plan.Configs[0].Name
	p.printf("| route | offered req/s | configuration | p50 | p99 | p99.9 | p99 × %s | non-2xx | errors |\n|---|---|---|---|---|---|---|---|---|\n", ref)
	for _, route := range res.Plan.Routes {
		refP99 := 0.0
		if rr := res.route(ref, route); rr != nil {
			refP99 = float64(rr.Fixed.Latency.P99)
		}
		for _, cr := range res.Configs {
			rr := res.route(cr.Config.Name, route)
			if rr == nil {
				continue
			}
			l := rr.Fixed.Latency
			p.printf("| `%s` | %g | %s | %s | %s | %s | %s | %d | %s |\n", route, rr.FixedRate, cr.Config.Name,
				Millis(l.P50), Millis(l.P99), Millis(l.P999), Ratio(float64(l.P99), refP99),
				rr.Fixed.Responses-rr.Fixed.OK, Errors(rr.Fixed))
		}
	}
}

// WriteMemory writes each worker's resident memory after the loads, and the
// pool's total against the one-process baseline.
func WriteMemory(w io.Writer, res *Results) {
	p := asPrinter(w)
	baseline := 0
	for _, cr := range res.Configs {
		if cr.Config.Name == BaselineName {
			baseline = totalRSS(cr.Memory)
		}
	}
	p.printf("| configuration | VmRSS per worker (peak VmHWM) | total VmRSS | total × %s |\n|---|---|---|---|\n", BaselineName)
	for _, cr := range res.Configs {
		var parts []string
		for _, wk := range cr.Memory {
			parts = append(parts, fmt.Sprintf("@%s %s (%s)", instance(wk.Unit), MiB(wk.RSS), MiB(wk.PeakRSS)))
		}
		total := totalRSS(cr.Memory)
		p.printf("| %s | %s | %s | %s |\n", cr.Config.Name, strings.Join(parts, "; "), MiB(total), Ratio(float64(total), float64(baseline)))
	}
}

func totalRSS(workers []Worker) int {
	total := 0
	for _, w := range workers {
		total += w.RSS
	}
	return total
}

// instance returns N of clusterapp-worker@N.service.
func instance(unit string) string {
	_, rest, _ := strings.Cut(unit, "@")
	return strings.TrimSuffix(rest, ".service")
}

func (res *Results) goodputOf(config, route string) float64 {
	if rr := res.route(config, route); rr != nil {
		return rr.MedianGoodput()
	}
	return 0
}

// printer keeps the first write error so the rendering code reads straight.
type printer struct {
	w   io.Writer
	err error
}

func asPrinter(w io.Writer) *printer {
	if p, ok := w.(*printer); ok {
		return p
	}
	return &printer{w: w}
}

func (p *printer) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.w.Write(b)
	p.err = err
	return n, err
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
