package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Judging the targets over several runs.
//
// One run's verdict moves with the machine it ran on: on a shared 2-CPU
// guest the same build met 21, 24, 24 and 23 of issue 12's 24 targets in
// four runs an hour (docs/benchmarks.md, notes, "The machine's two
// speeds"), the misses rotating among the targets nearest their edge. So
// every run keeps its raw results in a directory of runs (bin/bench-runs/
// by default, one JSON file each), and the page judges each target again
// over this run and the earlier runs of the same build on the same
// machine: its value in each run, the median across them and how many of
// them met it. A build is the last commit to touch anything but the docs
// (Results.Build); a build with uncommitted changes ("-dirty") or none
// known is never pooled, since two such runs may have measured different
// code.

// MaxRuns is how many runs, this one included, the page judges together.
const MaxRuns = 5

// runFileLayout names a run's file after its start (UTC), so that a
// directory listing is in the order the runs were made.
const runFileLayout = "20060102T150405Z"

// SaveRun writes res into dir (created if missing) as one JSON file named
// after the run's start, and returns the file's path.
func SaveRun(dir string, res *Results) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("runs directory: %w", err)
	}
	raw, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode results: %w", err)
	}
	path := filepath.Join(dir, res.Date.UTC().Format(runFileLayout)+".json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		return "", fmt.Errorf("keep the run: %w", err)
	}
	return path, nil
}

// Pooled reports whether a run of build may be judged with others: its
// build is known and has no uncommitted changes.
func Pooled(build string) bool {
	return build != "" && !strings.HasSuffix(build, "-dirty")
}

// EarlierRuns reads the runs kept in dir and returns those of res's build
// on res's machine (CPU count and model) made before res, oldest first,
// at most MaxRuns-1 of them (the latest). A missing directory holds no
// runs; a file that cannot be read is an error naming it, since a run
// left out silently would change the verdict.
func EarlierRuns(dir string, res *Results) ([]*Results, error) {
	if !Pooled(res.Build) {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("earlier runs: %w", err)
	}
	var runs []*Results
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".json" {
			continue
		}
		path := filepath.Join(dir, e.Name())
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("earlier runs: %w", err)
		}
		var run Results
		if err := json.Unmarshal(raw, &run); err != nil {
			return nil, fmt.Errorf("earlier runs: %s: %w", path, err)
		}
		if run.Build == res.Build && run.Machine.CPUs == res.Machine.CPUs && run.Machine.Model == res.Machine.Model &&
			run.Date.Before(res.Date) {
			runs = append(runs, &run)
		}
	}
	slices.SortFunc(runs, func(a, b *Results) int { return a.Date.Compare(b.Date) })
	if len(runs) > MaxRuns-1 {
		runs = runs[len(runs)-(MaxRuns-1):]
	}
	return runs, nil
}

// Runs is what a page judges its targets with besides its own run.
type Runs struct {
	Dir     string     // where runs are kept, as the page names it ("": the page says nothing of runs)
	Earlier []*Results // the earlier runs of the same build (EarlierRuns)
	Unread  string     // why the earlier runs could not be read ("": they were)
}

// OverRuns is one target judged over several runs; its Met is the
// median's verdict.
type OverRuns struct {
	Target
	Values []float64 // each run's value, oldest first; NaN where a run did not measure it
	Median float64   // of the runs that measured it; NaN if none did
	MetIn  int       // how many runs met it
}

// JudgeOverRuns judges each of res's targets over earlier and res together
// (earlier oldest first, res last): a target's verdict is its median's.
func JudgeOverRuns(res *Results, earlier []*Results) []OverRuns {
	all := append(slices.Clone(earlier), res)
	byRun := make([]map[string]Target, len(all))
	var latest []Target // res's, judged once: its goals are the rows
	for i, run := range all {
		targets := Targets(run)
		byRun[i] = map[string]Target{}
		for _, t := range targets {
			byRun[i][t.Goal] = t
		}
		latest = targets
	}
	var out []OverRuns
	for _, t := range latest {
		o := OverRuns{Target: t, Median: math.NaN()}
		var measured []float64
		for i := range all {
			v := math.NaN()
			if rt, ok := byRun[i][t.Goal]; ok {
				v = rt.value
				if rt.Met {
					o.MetIn++
				}
			}
			o.Values = append(o.Values, v)
			if !math.IsNaN(v) {
				measured = append(measured, v)
			}
		}
		o.Met = false
		if len(measured) > 0 && t.meets != nil {
			o.Median = median(measured)
			o.Met = t.meets(o.Median)
		}
		out = append(out, o)
	}
	return out
}

// WriteTargetsOverRuns writes the targets judged over this run and the
// earlier runs of its build, or says why there are none to judge with.
func WriteTargetsOverRuns(w io.Writer, res *Results, runs Runs) {
	p := asPrinter(w)
	earlier, runsDir := runs.Earlier, runs.Dir
	switch {
	case !Pooled(res.Build):
		build := "unknown"
		if res.Build != "" {
			build = "`" + res.Build + "`"
		}
		p.printf("This run's build is %s: it is judged alone, since only runs of one committed build are judged together.\n", build)
		return
	case runs.Unread != "":
		p.printf("The earlier runs kept in `%s` could not be read (%s): this run is judged alone.\n", runsDir, runs.Unread)
		return
	case len(earlier) == 0:
		p.printf("No earlier run of this build (`%s`) on this machine is kept in `%s`: run `make bench` again to judge\n", res.Build, runsDir)
		p.printf("the targets over several runs, which one run on a shared machine cannot settle.\n")
		return
	}
	judged := JudgeOverRuns(res, earlier)
	met := 0
	for _, o := range judged {
		if o.Met {
			met++
		}
	}
	all := append(slices.Clone(earlier), res)
	p.printf("Over this run and the %d before it of the same build (`%s`, the last commit to touch anything but the\n", len(earlier), res.Build)
	p.printf("docs) on this machine, kept in `%s`: **the median of %d runs meets %d of %d targets**. One run's\n", runsDir, len(all), met, len(judged))
	p.printf("verdict moves with the shared machine's speed; the median across runs is the steadier reading, and\n")
	p.printf("\"met in\" says how often a single run would have said yes.\n\n")
	p.printf("| target | asked |")
	for _, run := range all {
		p.printf(" %s |", runLabel(run, all))
	}
	p.printf(" median | met |\n|---|---|%s---|---|\n", strings.Repeat("---|", len(all)))
	for _, o := range judged {
		p.printf("| %s | %s |", o.Goal, o.Asked)
		for _, v := range o.Values {
			p.printf(" %s |", o.cell(v))
		}
		verdict := "yes"
		if !o.Met {
			verdict = "**no**"
		}
		p.printf(" %s | %s, in %d of %d runs |\n", o.cell(o.Median), verdict, o.MetIn, len(all))
	}
}

// cell prints v, in bold when it misses the goal, "–" when not measured.
func (o OverRuns) cell(v float64) string {
	if math.IsNaN(v) || o.show == nil {
		return "–"
	}
	if o.meets(v) {
		return o.show(v)
	}
	return "**" + o.show(v) + "**"
}

// runLabel names a run by its start (UTC): the time of day when every run
// is of one day, with the date otherwise.
func runLabel(run *Results, all []*Results) string {
	day := func(r *Results) string { return r.Date.UTC().Format(time.DateOnly) }
	for _, r := range all {
		if day(r) != day(all[0]) {
			return run.Date.UTC().Format("01-02 15:04")
		}
	}
	return run.Date.UTC().Format("15:04")
}
