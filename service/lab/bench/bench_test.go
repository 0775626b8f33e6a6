package bench

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/loadgen"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

func TestWorkers(t *testing.T) {
	tests := []struct {
		env     string
		want    int
		wantErr bool
	}{
		{"", 4, false},
		{"CLUSTERAPP_WORKERS=0\n", 4, false},
		{"CLUSTERAPP_WORKERS=1\nGOMAXPROCS=1\n", 1, false},
		{"# CLUSTERAPP_WORKERS=9\nCLUSTERAPP_WORKERS=\"3\"\n", 3, false},
		{"CLUSTERAPP_WORKERS=2\nCLUSTERAPP_WORKERS=5\n", 5, false}, // the last line wins, as in systemd
		{"CLUSTERAPP_WORKERS=many\n", 0, true},
	}
	for _, tt := range tests {
		got, err := Configuration{Name: "x", Env: tt.env}.Workers(4)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("Workers(%q) = %d, %v; want %d, error %v", tt.env, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestConfigurationsKeepTheCacheOff(t *testing.T) {
	on, off := SpikeConfigurations(NewSpikeLayout(2), "0")
	for _, c := range append(DefaultConfigurations(2), on, off) {
		if v, ok := envValue(c.Env, "CLUSTERAPP_CACHE_ENTRIES"); !ok || v != "0" {
			t.Errorf("%s: CLUSTERAPP_CACHE_ENTRIES=%q, want 0 written out", c.Name, v)
		}
	}
	if v, _ := envValue(on.Env, "CLUSTERAPP_ADMISSION_WAIT"); v != "0" {
		t.Errorf("protection on waits %q, want 0", v)
	}
	if v, _ := envValue(on.Env, "CLUSTERAPP_MAX_IN_FLIGHT"); v != "1" {
		t.Errorf("protection on admits %q per worker, want 1 (one per CPU of its own)", v)
	}
	for _, c := range []Configuration{on, off} {
		if n, _ := c.Workers(2); n != 1 || c.WorkerDropIn != "[Service]\nCPUAffinity=0\n" {
			t.Errorf("%s on 2 CPUs: %d workers, drop-in %q; want 1 worker pinned to CPU 0", c.Name, n, c.WorkerDropIn)
		}
	}
}

func TestSpikeLayoutGivesTheGeneratorACPUOfItsOwn(t *testing.T) {
	for _, tt := range []struct {
		cpus int
		want SpikeLayout
	}{
		{1, SpikeLayout{Workers: 1}},
		{2, SpikeLayout{PoolCPUs: "0", LoadCPUs: "1", Workers: 1}},
		{8, SpikeLayout{PoolCPUs: "0-6", LoadCPUs: "7", Workers: 7}},
	} {
		if got := NewSpikeLayout(tt.cpus); got != tt.want {
			t.Errorf("NewSpikeLayout(%d) = %+v, want %+v", tt.cpus, got, tt.want)
		}
	}
	on, _ := SpikeConfigurations(NewSpikeLayout(1), "0")
	if on.WorkerDropIn != "" {
		t.Errorf("one CPU: drop-in %q, want none (nothing to split)", on.WorkerDropIn)
	}
}

// The spike's configuration pins the workers with a drop-in, the next
// configuration removes it, and loadOn pins the generator with taskset.
func TestApplyWritesAndRemovesTheWorkerDropIn(t *testing.T) {
	var calls []string
	box := &sandbox.Driver{Name: "t", Command: func(ctx context.Context, args ...string) ([]byte, error) {
		calls = append(calls, strings.Join(args, " "))
		switch {
		case len(args) > 4 && args[3] == "systemctl" && args[4] == "list-units":
			return []byte(config.WorkerUnit(1) + " loaded active running\n"), nil
		case len(args) > 3 && args[3] == "curl":
			return []byte("200 1"), nil
		case len(args) > 3 && args[3] == "taskset":
			return []byte(`{"ok":1}`), nil
		}
		return nil, nil
	}}
	r := &Runner{Box: box}
	ctx := context.Background()
	on, _ := SpikeConfigurations(NewSpikeLayout(2), "0")
	if err := r.apply(ctx, on, 1); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(calls, func(c string) bool {
		return strings.HasPrefix(c, "cp t ") && strings.HasSuffix(c, " "+WorkerDropInPath)
	}) {
		t.Errorf("the drop-in was not copied in: %q", calls)
	}
	calls = nil
	if err := r.apply(ctx, DefaultConfigurations(2)[1], 1); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(calls, "exec t -- rm -f "+WorkerDropInPath) {
		t.Errorf("the drop-in was not removed for a configuration without one: %q", calls)
	}
	calls = nil
	if _, err := r.loadOn(ctx, "1", "/", time.Second, "-n", "1"); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || !strings.HasPrefix(calls[0], "exec t -- taskset -c 1 nice -n -10 "+sandbox.LoadPath) {
		t.Errorf("loadOn ran %q, want the generator under taskset -c 1", calls)
	}
}

func TestRatio(t *testing.T) {
	tests := []struct {
		num, den float64
		want     string
	}{
		{2, 1, "2.00×"}, {1, 3, "0.33×"}, {1, 0, "+Inf"}, {0, 0, "n/a"}, {math.NaN(), 1, "n/a"},
	}
	for _, tt := range tests {
		if got := Ratio(tt.num, tt.den); got != tt.want {
			t.Errorf("Ratio(%v, %v) = %q, want %q", tt.num, tt.den, got, tt.want)
		}
	}
}

func TestShareSaysWhichWorkerGotNothing(t *testing.T) {
	r := &loadgen.Result{OK: 30, ByHeader: map[string]int{"1": 20, "2": 10}}
	if got := Share(r, 2); got != "2.00" {
		t.Errorf("Share = %q, want 2.00", got)
	}
	if got := Share(r, 3); got != "+Inf (worker 3 got nothing)" {
		t.Errorf("Share with an idle worker = %q", got)
	}
	if got := Share(r, 1); got != "–" {
		t.Errorf("Share of one worker = %q, want –", got)
	}
}

func TestGoodputCountsOnly2xx(t *testing.T) {
	r := &loadgen.Result{Responses: 300, OK: 100, Elapsed: 2 * time.Second}
	if got := Goodput(r); got != 50 {
		t.Errorf("Goodput = %v, want 50", got)
	}
	if got := Goodput(&loadgen.Result{}); got != 0 {
		t.Errorf("Goodput of an empty run = %v, want 0", got)
	}
}

func TestErrorsAndMillis(t *testing.T) {
	if got := Errors(&loadgen.Result{Timeouts: 3, ReadErrors: 1}); got != "4 (read 1, timeout 3)" {
		t.Errorf("Errors = %q", got)
	}
	for d, want := range map[time.Duration]string{0: "–", 1234 * time.Microsecond: "1.23 ms", 45600 * time.Microsecond: "45.6 ms", 2 * time.Second: "2000 ms"} {
		if got := Millis(d); got != want {
			t.Errorf("Millis(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestParsers(t *testing.T) {
	status := "Name:\tclusterapp\nVmHWM:\t   21000 kB\nVmRSS:\t   16384 kB\nThreads:\t7\n"
	if rss, peak := parseStatusMemory(status); rss != 16384 || peak != 21000 {
		t.Errorf("parseStatusMemory = %d, %d; want 16384, 21000", rss, peak)
	}
	metrics := "# TYPE go_sched_gomaxprocs_threads gauge\ngo_sched_gomaxprocs_threads{worker=\"1\"} 3\ngo_sched_gomaxprocs_threads{worker=\"2\"} 2\n"
	if got := parseGOMAXPROCS(metrics); len(got) != 2 || got["1"] != 3 || got["2"] != 2 {
		t.Errorf("parseGOMAXPROCS = %v, want 1: 3, 2: 2", got)
	}
	if got := parseGOMAXPROCS("no such gauge\n"); len(got) != 0 {
		t.Errorf("parseGOMAXPROCS of a scrape without the gauge = %v", got)
	}
	if got := cpuModel("processor\t: 0\nmodel name\t: AMD  EPYC 7B13\n"); got != "AMD EPYC 7B13" {
		t.Errorf("cpuModel = %q", got)
	}
	if p := parseProperties("MainPID=42\nNRestarts=0\n"); p["MainPID"] != "42" || p["NRestarts"] != "0" {
		t.Errorf("parseProperties = %v", p)
	}
}

func TestNiceCeiling(t *testing.T) {
	for v, want := range map[float64]float64{0: 0, 7: 10, 10: 10, 11: 20, 163: 200, 420: 500, 46036: 50000} {
		if got := niceCeiling(v); got != want {
			t.Errorf("niceCeiling(%v) = %v, want %v", v, got, want)
		}
	}
}

func TestKeptNotes(t *testing.T) {
	page := "# Benchmarks\n...\n" + NotesBegin + "\nwritten by hand\n" + NotesEnd + "\n"
	if got := KeptNotes(page); got != "written by hand" {
		t.Errorf("KeptNotes = %q", got)
	}
	if got := KeptNotes("no markers"); got != "" {
		t.Errorf("KeptNotes without markers = %q", got)
	}
}

// sample is a small but complete result set, as a run would produce.
func sample() *Results {
	run := func(ok int, byHeader map[string]int, p99 time.Duration) *loadgen.Result {
		return &loadgen.Result{Requests: ok + 5, Responses: ok + 5, OK: ok, StatusCodes: map[int]int{200: ok, 503: 5},
			Elapsed: time.Second, ByHeader: byHeader, Latency: loadgen.Latency{P50: p99 / 2, P99: p99, P999: p99}}
	}
	configs := DefaultConfigurations(2)
	on, off := SpikeConfigurations(NewSpikeLayout(2), "0")
	res := &Results{
		Plan: Plan{CPUs: 2, Configs: configs, Routes: []string{"/", "/fib?n=30"}, Concurrency: 64, Cell: time.Second,
			FixedRateFraction: 0.5, Spike: &SpikePlan{Route: "/fib?n=30", Layout: NewSpikeLayout(2), Factor: 10, Duration: time.Second, On: on, Off: off}},
		Machine: Machine{CPUs: 2, Model: "Test CPU", Kernel: "6.1", Go: "go1.26"},
	}
	oks := map[string]int{"1 worker": 100, NWorkersName: 190, BaselineName: 200}
	for _, c := range configs {
		workers, _ := c.Workers(2)
		byHeader := map[string]int{"1": oks[c.Name]} // with 2 workers, worker 2 got nothing
		cr := ConfigResult{Config: c, Workers: workers, GOMAXPROCS: map[string]int{"1": 2}, Memory: []Worker{{Unit: config.WorkerUnit(1), RSS: 16384, PeakRSS: 20480}}}
		for _, route := range res.Plan.Routes {
			cr.Routes = append(cr.Routes, RouteResult{Route: route, Max: run(oks[c.Name], byHeader, 0), FixedRate: 50, Fixed: run(50, byHeader, 10*time.Millisecond)})
		}
		res.Configs = append(res.Configs, cr)
	}
	spike := run(20, nil, 40*time.Millisecond)
	spike.Non2xxLatency = loadgen.Latency{P50: time.Millisecond, P90: 1500 * time.Microsecond, P99: 2 * time.Millisecond, Max: 3 * time.Millisecond}
	before := []Worker{{Unit: config.WorkerUnit(1), PID: 10}}
	res.Spike = &SpikeResult{Sustainable: 190, Offered: 1900, Unloaded: run(10, nil, 20*time.Millisecond), Runs: []SpikeRun{
		{Config: on, Result: spike, Before: before, After: before, GOMAXPROCS: map[string]int{"1": 2}, Health: run(95, nil, 2*time.Millisecond)},
		{Config: off, Result: run(30, nil, 400*time.Millisecond), Before: before, After: []Worker{{Unit: config.WorkerUnit(1), PID: 11, Restarts: 1}}},
	}}
	res.Plan.Faults = &FaultPlan{Config: FaultConfiguration(2), Route: "/", Concurrency: 16, Duration: time.Second, Timeout: 5 * time.Second}
	res.Faults = &FaultResult{Workers: 2, Runs: []FaultRun{
		{Name: "all healthy", Result: run(200, map[string]int{"1": 100, "2": 100}, time.Millisecond)},
		{Name: "worker 2 frozen (SIGSTOP)", Result: run(150, map[string]int{"1": 150}, time.Millisecond)},
		{Name: "worker 2 crash-looping", Result: run(180, map[string]int{"1": 180}, time.Millisecond), Restarts: 12},
	}}
	return res
}

func TestWriteMarkdown(t *testing.T) {
	var out strings.Builder
	if err := WriteMarkdown(&out, sample(), Runs{}, "benchmarks.svg", "kept"); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, want := range []string{
		"![2xx responses per second, per route and configuration](benchmarks.svg)",
		"Result cache: OFF",
		"MemoryCurrent is not available",
		"| `/fib?n=30` | N workers | 190.0 | 1.90× | 0.95× | 5 | 0 | +Inf (worker 2 got nothing) |",
		"| `/` | 50 | 1 worker | 5.00 ms | 10.0 ms | 10.0 ms | 1.00× | 5 | 0 |",
		"| 1 process | @1 16.0 MiB (20.0 MiB) | 16.0 MiB | 1.00× |",
		"| admitted p99 × unloaded p99 (20.0 ms) | 2.00× | 20.00× |",
		"| time to reject p50 / p90 / p99 / max | 1.00 ms / 1.50 ms / 2.00 ms / 3.00 ms | – / – / – / – |",
		"| worker restarts (NRestarts, PID changes) | 0 | 1 (@1 pid 10→11) |",
		"| GOMAXPROCS per worker as the spike begins (`/metrics`) | 1: 2 | ? |",
		"| `/healthz` during the spike: p50 / p90 / p99 / max (non-2xx, errors) | 1.00 ms / – / 2.00 ms / – (5, 0) | – |",
		"the pool, 1 worker(s), on CPU 0 (a `CPUAffinity=0` drop-in); the generator on CPU 1 (`taskset -c 1`)",
		"| worker 2 frozen (SIGSTOP) | 155 | 150 | 5 | 0 | 1.00 ms | 1: 150, 2: 0 | 0.75× | 0 |",
		"| worker 2 crash-looping | 185 | 180 | 5 | 0 | 1.00 ms | 1: 180, 2: 0 | 0.90× | 12 |",
		"`clusterapp-load -c 16 -keepalive=false -d 1s -timeout 5s` on `/`",
		NotesBegin + "\nkept\n" + NotesEnd,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if got := KeptNotes(page); got != "kept" {
		t.Errorf("the notes do not survive a rewrite: %q", got)
	}
}

func TestWriteSVG(t *testing.T) {
	var out strings.Builder
	res := sample()
	if err := WriteSVG(&out, res); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML, one bar per route and configuration, names escaped.
	wellFormed(t, out.String())
	if bars, want := strings.Count(out.String(), "</title></rect>"), len(res.Plan.Routes)*len(res.Configs); bars != want {
		t.Errorf("%d bars, want %d (one per route and configuration)", bars, want)
	}
	for _, want := range []string{"/fib?n=30", "1.90×", "190", "1 process"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
}

func TestApplyFailsClearlyWhenWorkersDoNotStart(t *testing.T) {
	box := &sandbox.Driver{Name: "t", Command: func(ctx context.Context, args ...string) ([]byte, error) {
		if len(args) > 4 && args[3] == "systemctl" && args[4] == "list-units" {
			return []byte(config.WorkerUnit(1) + " loaded active running\n"), nil
		}
		return nil, nil
	}}
	err := (&Runner{Box: box, ReadyTimeout: 300 * time.Millisecond}).apply(context.Background(), Configuration{Name: "N workers"}, 2)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), `configuration "N workers"`) || !strings.Contains(err.Error(), "want 2 workers") {
		t.Errorf("err = %v, want ErrNotReady naming the configuration and the 2 workers wanted", err)
	}
}

// wellFormed fails t unless doc is well-formed XML.
func wellFormed(t *testing.T, doc string) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(doc))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, doc)
		}
	}
}

// containsAll reports each of wants missing from got, which is what.
func containsAll(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, got)
		}
	}
}

// The closed-loop table's repeats come in rounds: every configuration is
// measured (closed loop, then fixed rate) once, then applied again for one
// more closed-loop run per round, so no configuration's runs are all
// bunched at one end of the run.
func TestRunRepeatsInRounds(t *testing.T) {
	var events []string
	current := ""
	box := &sandbox.Driver{Name: "t", Command: func(ctx context.Context, args ...string) ([]byte, error) {
		cmd := strings.Join(args, " ")
		switch {
		case strings.HasPrefix(cmd, "cp t ") && strings.HasSuffix(cmd, " "+config.EnvFile):
			body, err := readCopied(args[2])
			c := Configuration{Env: body}
			n, _ := c.Workers(2)
			current = fmt.Sprintf("w%d", n)
			events = append(events, "apply "+current)
			return nil, err
		case strings.Contains(cmd, "systemctl list-units"):
			n, _ := strconv.Atoi(strings.TrimPrefix(current, "w"))
			return []byte(unitListing(n)), nil
		case strings.Contains(cmd, "systemctl show"):
			return []byte("MainPID=42\nNRestarts=0\n"), nil
		case strings.Contains(cmd, "curl") && strings.Contains(cmd, "metrics"):
			return []byte("go_sched_gomaxprocs_threads{worker=\"1\"} 1\ngo_sched_gomaxprocs_threads{worker=\"2\"} 1\n"), nil
		case strings.Contains(cmd, "curl"):
			return []byte("200"), nil
		case strings.Contains(cmd, sandbox.LoadPath):
			kind := "max"
			if strings.Contains(cmd, "-rate") {
				kind = "fixed"
			}
			events = append(events, kind+" "+current)
			return []byte(`{"ok":500,"responses":500,"requests":500,"elapsed_ns":1000000000}`), nil
		}
		return nil, nil
	}}
	plan := Plan{CPUs: 2, Routes: []string{"/"}, Repeats: 3, Concurrency: 8, Cell: time.Second, FixedRateFraction: 0.5,
		Configs: []Configuration{{Name: "one", Env: "CLUSTERAPP_WORKERS=1\n"}, {Name: "two", Env: "CLUSTERAPP_WORKERS=2\n"}}}
	res, err := (&Runner{Box: box}).Run(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	// The first round in the plan's order (its first configuration sets
	// the fixed rates), then the order turns by one each round.
	want := "apply w1, max w1, fixed w1, apply w2, max w2, fixed w2, " +
		"apply w2, max w2, apply w1, max w1, apply w1, max w1, apply w2, max w2"
	if got := strings.Join(events, ", "); got != want {
		t.Fatalf("events:\n%s\nwant:\n%s", got, want)
	}
	for _, cr := range res.Configs {
		if n := len(cr.Routes[0].ClosedLoops()); n != 3 {
			t.Errorf("%s: %d closed-loop runs, want 3", cr.Config.Name, n)
		}
	}
}

// A spike of several rounds shows the median round in its column and every
// round in the rows "each round", the median in bold.
func TestWriteSpikeRounds(t *testing.T) {
	res := sample()
	s := res.Spike
	round := func(unloaded, admitted time.Duration, health time.Duration) SpikeRound {
		run := s.Runs[0]
		result := *run.Result
		result.Latency.P99 = admitted
		run.Result = &result
		h := *run.Health
		h.Latency.P99 = health
		run.Health = &h
		return SpikeRound{Unloaded: &loadgen.Result{Latency: loadgen.Latency{P99: unloaded}}, Run: run}
	}
	s.Rounds = []SpikeRound{
		round(10*time.Millisecond, 30*time.Millisecond, 9*time.Millisecond),  // 3.00x
		round(10*time.Millisecond, 15*time.Millisecond, 12*time.Millisecond), // 1.50x
		round(8*time.Millisecond, 16*time.Millisecond, 7*time.Millisecond),   // 2.00x: the median
	}
	if got := medianRound(s.Rounds); got != 2 {
		t.Fatalf("medianRound = %d, want 2 (ratios 3.00, 1.50, 2.00)", got)
	}
	s.Median = 2
	s.Unloaded, s.Runs[0] = s.Rounds[2].Unloaded, s.Rounds[2].Run
	var out strings.Builder
	if err := WriteMarkdown(&out, res, Runs{}, "benchmarks.svg", ""); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, want := range []string{
		"runs 3 times, each spike just after an unloaded run of its own",
		"is the median (round 3)",
		"| admitted p99 × unloaded p99 (8.00 ms) | 2.00× | 50.00× |",
		"| each round: admitted p99 × unloaded p99 (unloaded p99) | 3.00× (10.0 ms), 1.50× (10.0 ms), **2.00× (8.00 ms)** | one round |",
		"| each round: `/healthz` p99 | 9.00 ms, 12.0 ms, **7.00 ms** | one round |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
}

func TestMedianRoundOfTwoIsTheLower(t *testing.T) {
	r := func(ratio float64) SpikeRound {
		return SpikeRound{Unloaded: &loadgen.Result{Latency: loadgen.Latency{P99: 1000}},
			Run: SpikeRun{Result: &loadgen.Result{Latency: loadgen.Latency{P99: time.Duration(ratio * 1000)}}}}
	}
	if got := medianRound([]SpikeRound{r(3), r(1)}); got != 1 {
		t.Errorf("medianRound of 3x, 1x = %d, want 1 (the lower)", got)
	}
	if got := medianRound([]SpikeRound{r(1)}); got != 0 {
		t.Errorf("medianRound of one = %d", got)
	}
}

// A step's line in the log says how far into the run it starts, so a slow
// section shows in the log; other lines are written as they are.
func TestStepLinesCarryTheTimeIntoTheRun(t *testing.T) {
	var log strings.Builder
	r := &Runner{Log: &log}
	r.logf(">> before the run")
	r.started = time.Now().Add(-125 * time.Second)
	r.logf(">> curve, %s", "1 process")
	r.logf("   detail %d", 7)
	want := ">> before the run\n>> [2m5s] curve, 1 process\n   detail 7\n"
	if log.String() != want {
		t.Fatalf("log:\n%s\nwant:\n%s", log.String(), want)
	}
}
