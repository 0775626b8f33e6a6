// Command clusterapp-bench is `make bench`: it boots the suite in a sandbox
// box (scripts/sandbox, a real systemd in private namespaces), measures 1
// worker, N workers and one process with GOMAXPROCS=N on /, /fib?n=25,
// /fib?n=30 and /slow; then the pool at 1, 2, 4, 8 and 16 workers against
// that one process (throughput, wake-ups and CPU per request), and beside
// them bare net/http, nginx, Node's cluster module and PM2; then the
// spike scenario of /fib?n=30 with admission control on and off (the
// generator on a CPU of its own); then the pool with a frozen and a
// crash-looping worker. It writes docs/benchmarks.md, docs/benchmarks.svg
// and docs/benchmarks-curve.svg, and keeps the run's raw results in
// bin/bench-runs/, where the page finds the earlier runs of the same build
// to judge issue 12's targets over several runs; the latest run's are also
// bin/benchmarks.json. All load goes to the box's own 127.0.0.1,
// from the project's generator run inside the box; every run is bounded.
//
//	clusterapp-bench [-repo .] [-box bench] [-cell 3s] [-out docs] [-runs bin/bench-runs]
//
// With -start-ab TREE,TREE... (`make bench-start`) it measures only cold
// starts: each tree's build and units in turn in one box, each start
// followed by bare net/http's (bench.StartABPlan), and prints their table.
//
// Exit status: 0 when every run was made (whatever the numbers), 1 when one
// could not be (the box did not boot, a worker did not start, nothing was
// served), 2 for bad flags.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/bench"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "clusterapp-bench:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "clusterapp-bench: FAILED:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

type flags struct {
	repo, box, out, admissionWait, from, runs string
	cell, spikeDuration                       time.Duration
	concurrency                               int
	// startAB: compare these trees' cold starts instead of the whole run.
	startAB, startABUnits []string
	startABRounds         int
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("clusterapp-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.repo, "repo", ".", "repository root: bin/ (built), systemd/, scripts/sandbox")
	fs.StringVar(&f.box, "box", "bench", "name of the sandbox box to boot (must not be up)")
	fs.StringVar(&f.out, "out", "docs", "directory for benchmarks.md and benchmarks.svg (the raw results go to bin/benchmarks.json)")
	fs.DurationVar(&f.cell, "cell", 3*time.Second, "length of each closed-loop and fixed-rate run")
	fs.IntVar(&f.concurrency, "c", 64, "keep-alive connections of the closed-loop and fixed-rate runs")
	fs.DurationVar(&f.spikeDuration, "spike", 5*time.Second, "length of each spike run")
	fs.StringVar(&f.runs, "runs", filepath.Join("bin", "bench-runs"), "directory keeping every run's raw results, relative to -repo; the page judges the targets over the earlier runs of the same build there")
	fs.StringVar(&f.from, "from", "", "render the page and chart from this raw results `file` (bin/benchmarks.json) without measuring")
	fs.StringVar(&f.admissionWait, "admission-wait", "0", "CLUSTERAPP_ADMISSION_WAIT of the protected spike run (0: a request finding every slot busy is turned away at once)")
	fs.Func("start-ab", "instead of the run: compare the cold starts of these comma-separated `trees` (checkouts with bin/ built), taking turns in one box, each start followed by bare net/http's; prints a table (nothing is written to the page)", func(v string) error {
		f.startAB = strings.Split(v, ",")
		return nil
	})
	fs.IntVar(&f.startABRounds, "start-ab-rounds", 10, "with -start-ab: cold starts of each tree")
	fs.Func("start-ab-units", "with -start-ab: the comma-separated `units` `systemctl start` starts (default: "+strings.Join(bench.ColdStartUnits, ",")+", as the run's cold start)", func(v string) error {
		f.startABUnits = strings.Split(v, ",")
		return nil
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, err
		}
		return f, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 || f.cell <= 0 || f.spikeDuration <= 0 || f.concurrency < 1 {
		return f, fmt.Errorf("%w: see -h", errUsage)
	}
	if f.startABRounds < 1 {
		return f, fmt.Errorf("%w: -start-ab-rounds wants 1 or more, got %d", errUsage, f.startABRounds)
	}
	for _, tree := range f.startAB {
		if tree == "" {
			return f, fmt.Errorf("%w: -start-ab wants comma-separated trees, got an empty one", errUsage)
		}
	}
	for _, unit := range f.startABUnits {
		if unit == "" || strings.ContainsAny(unit, " '\"*?[") {
			return f, fmt.Errorf("%w: -start-ab-units wants comma-separated unit names, got %q", errUsage, unit)
		}
	}
	return f, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if f.from != "" {
		return rerender(f, stdout, stderr)
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root: the sandbox boots systemd in private namespaces")
	}
	repo, err := filepath.Abs(f.repo)
	if err != nil {
		return fmt.Errorf("repo: %w", err)
	}
	for _, bin := range []string{"clusterapp", "clusterapp-worker", "clusterapp-load"} {
		if _, err := os.Stat(filepath.Join(repo, "bin", bin)); err != nil {
			return fmt.Errorf("bin/%s missing (run make build): %w", bin, err)
		}
	}
	machine, build := bench.DetectMachine(), detectBuild(ctx, repo)
	plan := newPlan(machine.CPUs, repo, f)
	box := &sandbox.Driver{Script: filepath.Join(repo, "scripts", "sandbox"), Name: f.box, Src: repo}
	if len(f.startAB) > 0 {
		return startAB(ctx, f, plan, box, stdout, stderr)
	}
	begun := time.Now() // the bench's own time counts the box's boot
	var res *bench.Results
	err = inBox(ctx, box, stderr, func() error {
		started, loadBefore := time.Now(), bench.LoadAverage()
		var err error
		if res, err = (&bench.Runner{Box: box, Log: stderr}).Run(ctx, plan); err != nil {
			return err
		}
		res.Machine, res.Date, res.Build = machine, started, build
		res.LoadBefore, res.LoadAfter = loadBefore, bench.LoadAverage()
		res.Elapsed = time.Since(begun)
		fmt.Fprintf(stderr, ">> measured in %s (%s with the box's boot)\n", time.Since(started).Round(time.Second), res.Elapsed.Round(time.Second))
		return nil
	})
	if err != nil {
		return err
	}
	// Earlier runs are read before this one is kept, and neither failing
	// loses the run: the page and bin/benchmarks.json are still written.
	runsDir := inRepo(repo, f.runs)
	runs := earlierRuns(res, f.runs, runsDir, stderr)
	if kept, err := bench.SaveRun(runsDir, res); err != nil {
		fmt.Fprintf(stderr, ">> this run is not kept for judging with later ones: %v\n", err)
	} else {
		fmt.Fprintf(stderr, ">> this run's results kept in %s\n", kept)
	}
	return write(res, inRepo(repo, f.out), filepath.Join(repo, "bin", "benchmarks.json"), runs, stdout)
}

// inBox boots box with the suite installed, runs measure and powers the
// box off, also when the boot or measure fails (a half-booted box must not
// stay); the first error is returned.
func inBox(ctx context.Context, box *sandbox.Driver, stderr io.Writer, measure func() error) (err error) {
	fmt.Fprintf(stderr, ">> booting sandbox box %q\n", box.Name)
	defer func() {
		if downErr := box.Down(context.Background()); downErr != nil && err == nil {
			err = downErr
		}
	}()
	if err := box.Up(ctx, sandbox.Options{}); err != nil {
		return err
	}
	return measure()
}

// startAB boots the box from the repository (bare's units and binary come
// from it), compares the trees' cold starts and prints the table.
func startAB(ctx context.Context, f flags, plan bench.Plan, box *sandbox.Driver, stdout, stderr io.Writer) (err error) {
	trees := make([]string, len(f.startAB))
	for i, tree := range f.startAB {
		if trees[i], err = filepath.Abs(tree); err != nil {
			return fmt.Errorf("tree %s: %w", tree, err)
		}
		for _, need := range []string{"bin/clusterapp", "bin/clusterapp-worker", "systemd"} {
			if _, err := os.Stat(filepath.Join(trees[i], need)); err != nil {
				return fmt.Errorf("tree %s: %s missing (a checkout, then make build): %w", tree, need, err)
			}
		}
	}
	var res *bench.StartAB
	err = inBox(ctx, box, stderr, func() error {
		var err error
		res, err = (&bench.Runner{Box: box, Log: stderr}).StartAB(ctx, plan, bench.StartABPlan{Trees: trees, Rounds: f.startABRounds, Start: f.startABUnits})
		return err
	})
	if err != nil {
		return err
	}
	var out bytes.Buffer
	bench.WriteStartAB(&out, res)
	_, err = stdout.Write(out.Bytes())
	return err
}

// earlierRuns finds the earlier runs of res's build kept in runsDir (named
// dir on the page); when they cannot be read, the page says so and judges
// the run alone.
func earlierRuns(res *bench.Results, dir, runsDir string, stderr io.Writer) bench.Runs {
	runs := bench.Runs{Dir: dir}
	earlier, err := bench.EarlierRuns(runsDir, res)
	if err != nil {
		fmt.Fprintf(stderr, ">> earlier runs not judged: %v\n", err)
		runs.Unread = err.Error()
		return runs
	}
	runs.Earlier = earlier
	return runs
}

// inRepo is path, relative to repo unless absolute.
func inRepo(repo, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(repo, path)
}

// measuredPaths are what a build is made of: everything but the docs
// (pathspecs for git, relative to the repository's root).
var measuredPaths = []string{":/", ":(exclude,top)docs", ":(exclude,top,glob)**/*.md"}

// detectBuild names the code a run measures (bench.Results.Build): the
// last commit to touch anything but the docs, with "-dirty" when any of
// those files has uncommitted changes; "" when git cannot say (no git, not
// a repository). Runs of one build are judged together on the page.
func detectBuild(ctx context.Context, repo string) string {
	git := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...).Output()
		return strings.TrimSpace(string(out)), err
	}
	commit, err := git(append([]string{"log", "-1", "--format=%h", "--"}, measuredPaths...)...)
	if err != nil || commit == "" {
		return ""
	}
	changed, err := git(append([]string{"status", "--porcelain", "--"}, measuredPaths...)...)
	if err != nil {
		return ""
	}
	if changed != "" {
		commit += "-dirty"
	}
	return commit
}

func newPlan(cpus int, repo string, f flags) bench.Plan {
	overProvisioned := []int{2 * cpus, 4 * cpus} // issue 12: ">= 0.85x" at 2x and 4x the CPUs
	layout := bench.NewSpikeLayout(cpus)
	on, off := bench.SpikeConfigurations(layout, f.admissionWait)
	return bench.Plan{
		CPUs:              cpus,
		Configs:           bench.DefaultConfigurations(cpus),
		Routes:            []string{"/", "/fib?n=25", "/fib?n=30", "/slow"},
		Repeats:           3,
		Concurrency:       f.concurrency,
		Cell:              f.cell,
		FixedRateFraction: 0.5,
		Curve: &bench.CurvePlan{
			Workers: []int{1, 2, 4, 8, 16}, Repeats: 4, Duration: 3 * time.Second, Concurrency: f.concurrency,
			Cells: []bench.CurveCell{{Route: "/", KeepAlive: true}, {Route: "/", KeepAlive: false}, {Route: "/fib?n=25", KeepAlive: true},
				// The over-provisioned pools' target covers these routes too;
				// at N = CPUs the table above measures them.
				{Route: "/fib?n=30", KeepAlive: true, Workers: overProvisioned},
				{Route: "/slow", KeepAlive: true, Workers: overProvisioned}},
		},
		Anchors: &bench.AnchorPlan{Anchors: bench.DefaultAnchors(repo, cpus, nil), Repeats: 3},
		Stack:   &bench.StackPlan{Route: "/", Rounds: 6, Concurrency: f.concurrency, Duration: 3 * time.Second, AtOnce: 6},
		Spike: &bench.SpikePlan{
			Route: "/fib?n=30", Layout: layout, Factor: 10, UnloadedFraction: 0.05,
			Duration: f.spikeDuration, Concurrency: 256, Timeout: 10 * time.Second, On: on, Off: off, Rounds: 3,
		},
		Faults: &bench.FaultPlan{
			Config: bench.FaultConfiguration(cpus), Route: "/", Concurrency: 16, Duration: f.cell, Timeout: 5 * time.Second,
		},
		Start: &bench.StartPlan{Config: nWorkers(cpus), Starts: 5, EarlyStarts: 3, Bare: true, Kills: 3},
	}
}

// nWorkers is the default configurations' pool of one worker per CPU.
func nWorkers(cpus int) bench.Configuration {
	for _, c := range bench.DefaultConfigurations(cpus) {
		if c.Name == bench.NWorkersName {
			return c
		}
	}
	return bench.CurveConfiguration(cpus)
}

// write renders the page and the chart into dir, the raw results (every
// generator result in full) into rawPath, and prints the page to stdout.
// The page judges the targets over runs too.
func write(res *bench.Results, dir, rawPath string, runs bench.Runs, stdout io.Writer) error {
	page := filepath.Join(dir, "benchmarks.md")
	old, _ := os.ReadFile(page) // absent on the first run: no notes to keep
	var md, svg, curve bytes.Buffer
	if err := bench.WriteMarkdown(&md, res, runs, "benchmarks.svg", bench.KeptNotes(string(old))); err != nil {
		return err
	}
	if err := bench.WriteSVG(&svg, res); err != nil {
		return err
	}
	files := map[string][]byte{
		filepath.Join(dir, "benchmarks.md"): md.Bytes(), filepath.Join(dir, "benchmarks.svg"): svg.Bytes(),
	}
	if res.Curve != nil {
		if err := bench.WriteCurveSVG(&curve, res); err != nil {
			return err
		}
		files[filepath.Join(dir, bench.CurveChart)] = curve.Bytes()
	}
	raw, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	files[rawPath] = raw
	for path, content := range files {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	_, err = stdout.Write(md.Bytes())
	return err
}

// rerender writes the page and the chart again from a previous run's raw
// results, e.g. after a change to the rendering or to the kept notes.
func rerender(f flags, stdout, stderr io.Writer) error {
	raw, err := os.ReadFile(f.from)
	if err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	var res bench.Results
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("read results %s: %w", f.from, err)
	}
	return write(&res, f.out, f.from, earlierRuns(&res, f.runs, inRepo(f.repo, f.runs), stderr), stdout)
}
