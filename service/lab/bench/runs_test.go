package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runOf is curveSample with the handler stack read at stack× bare, the
// start at start, made at date by build.
func runOf(build string, date time.Time, stack float64, start time.Duration) *Results {
	res := curveSample()
	res.Build, res.Date = build, date
	res.Machine = Machine{CPUs: 2, Model: "AMD EPYC", Kernel: "6.1", Go: "go1.26"}
	res.Stack = &StackResult{Route: "/", Pool: []float64{stack * 1000}, Unit: []float64{1000}}
	res.Start = &StartResult{Workers: 2, Starts: []StartRun{{FirstOK: start}}, Kills: []time.Duration{80 * time.Millisecond}}
	res.Elapsed = 14 * time.Minute
	return res
}

// A target over runs is judged by its median, not by the latest run: the
// stack at 0.93×, 0.95× and then 0.86× meets 0.9× (two runs of three would
// have said yes), the start at 110, 105 and then 90 ms misses 100 ms
// though the latest run met it. Each run's value is printed, a missed one
// in bold.
func TestTargetsOverRunsAreJudgedByTheirMedian(t *testing.T) {
	day := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	earlier := []*Results{
		runOf("abc1234", day, 0.93, 110*time.Millisecond),
		runOf("abc1234", day.Add(20*time.Minute), 0.95, 105*time.Millisecond),
	}
	res := runOf("abc1234", day.Add(40*time.Minute), 0.86, 90*time.Millisecond)

	var out strings.Builder
	WriteTargetsOverRuns(&out, res, Runs{Dir: "bin/bench-runs", Earlier: earlier})
	page := out.String()
	containsAll(t, "targets over runs", page,
		"Over this run and the 2 before it of the same build (`abc1234`",
		"kept in `bin/bench-runs`",
		"| target | asked | 10:00 | 10:20 | 10:40 | median | met |",
		"| 1 process × bare net/http in the worker's unit, `/` keep-alive, req/s in turn | >= 0.90× | 0.930× | 0.950× | **0.860×** | 0.930× | yes, in 2 of 3 runs |",
		"| cold start to the first 200, median | <= 100 ms | **110 ms** | **105 ms** | 90.0 ms | **105 ms** | **no**, in 1 of 3 runs |",
		// curveSample: `/` new connection at 2 workers 0.75×, in every run
		"| 2 workers × 1 process, curve: `/` new connection | >= 0.95× | **0.750×** | **0.750×** | **0.750×** | **0.750×** | **no**, in 0 of 3 runs |",
		"| "+ElapsedGoal+" | < 15 min | 14m0s | 14m0s | 14m0s | 14m0s | yes, in 3 of 3 runs |")

	judged := JudgeOverRuns(res, earlier)
	met := 0
	for _, o := range judged {
		if o.Met {
			met++
		}
	}
	if !strings.Contains(page, "**the median of 3 runs meets "+strconv.Itoa(met)+" of "+strconv.Itoa(len(judged))+" targets**") {
		t.Errorf("the summary does not count the medians' verdicts (%d of %d):\n%s", met, len(judged), page)
	}
}

// A target one run did not measure is "–" in that run and left out of the
// median; a target no run measured is not met.
func TestTargetsOverRunsLeaveOutWhatARunDidNotMeasure(t *testing.T) {
	day := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	old := runOf("abc1234", day, 0.80, 90*time.Millisecond)
	old.Stack = &StackResult{Skipped: "no bare anchor"}
	res := runOf("abc1234", day.Add(time.Hour), 0.92, 90*time.Millisecond)
	for _, o := range JudgeOverRuns(res, []*Results{old}) {
		if o.Goal == BaselineName+" × bare net/http in the worker's unit, `/` keep-alive, req/s in turn" {
			if !o.Met || o.MetIn != 1 || o.cell(o.Values[0]) != "–" || o.cell(o.Median) != "0.920×" {
				t.Errorf("stack over a run that skipped it: %+v, want met on 0.920× alone, \"–\" for the skipped run", o)
			}
		}
	}
	res.Spike = nil
	for _, o := range JudgeOverRuns(res, []*Results{res}) {
		if o.Goal == "spike" && o.Met {
			t.Errorf("a target no run measured is judged met: %+v", o)
		}
	}
}

// Only runs of one committed build on one machine are judged together:
// the directory keeps every run, EarlierRuns picks the latest MaxRuns-1 of
// the same build, CPU count and model made before the run, oldest first.
func TestEarlierRunsAreTheSameBuildOnTheSameMachine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bench-runs") // created by the first SaveRun
	day := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return day.Add(time.Duration(min) * time.Minute) }
	res := runOf("abc1234", at(100), 0.9, 90*time.Millisecond)

	var want []time.Time
	for i, r := range []*Results{
		runOf("abc1234", at(0), 0.9, 90*time.Millisecond), // older than the MaxRuns-1 latest: left out
		runOf("abc1234", at(10), 0.9, 90*time.Millisecond),
		runOf("abc1234", at(20), 0.9, 90*time.Millisecond),
		runOf("abc1234", at(30), 0.9, 90*time.Millisecond),
		runOf("abc1234", at(40), 0.9, 90*time.Millisecond),
		runOf("fff0000", at(50), 0.9, 90*time.Millisecond),       // another build
		runOf("abc1234-dirty", at(60), 0.9, 90*time.Millisecond), // uncommitted changes
		runOf("abc1234", at(200), 0.9, 90*time.Millisecond),      // made after the run
		res, // the run itself
	} {
		if _, err := SaveRun(dir, r); err != nil {
			t.Fatal(err)
		}
		if i >= 1 && i <= 4 {
			want = append(want, r.Date)
		}
	}
	other := runOf("abc1234", at(70), 0.9, 90*time.Millisecond)
	other.Machine.CPUs = 64
	if _, err := SaveRun(dir, other); err != nil {
		t.Fatal(err)
	}

	got, err := EarlierRuns(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	var dates []time.Time
	for _, r := range got {
		dates = append(dates, r.Date)
	}
	if len(dates) != len(want) {
		t.Fatalf("earlier runs made at %v, want %v", dates, want)
	}
	for i := range want {
		if !dates[i].Equal(want[i]) {
			t.Fatalf("earlier runs made at %v, want %v", dates, want)
		}
	}

	// A dirty or unknown build is judged alone, and says so.
	for _, build := range []string{"abc1234-dirty", ""} {
		alone := runOf(build, at(300), 0.9, 90*time.Millisecond)
		if got, err := EarlierRuns(dir, alone); err != nil || len(got) != 0 {
			t.Errorf("build %q pooled with %d earlier runs (err %v)", build, len(got), err)
		}
		var out strings.Builder
		WriteTargetsOverRuns(&out, alone, Runs{Dir: "bin/bench-runs"})
		if !strings.Contains(out.String(), "it is judged alone") {
			t.Errorf("build %q: %q", build, out.String())
		}
	}

	// A first run says how to get a verdict over runs.
	var out strings.Builder
	WriteTargetsOverRuns(&out, runOf("new0001", at(300), 0.9, 90*time.Millisecond), Runs{Dir: "bin/bench-runs"})
	if !strings.Contains(out.String(), "run `make bench` again") {
		t.Errorf("a first run: %q", out.String())
	}

	// A file that cannot be read is an error naming it: a run left out
	// silently would change the verdict.
	bad := filepath.Join(dir, "20261205T090000Z.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := EarlierRuns(dir, res); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a corrupt run: error %v, want one naming %s", err, bad)
	}

	// No directory yet: no earlier runs, no error.
	if got, err := EarlierRuns(filepath.Join(t.TempDir(), "none"), res); err != nil || len(got) != 0 {
		t.Errorf("missing directory: %d runs, err %v", len(got), err)
	}
}
