package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// A cold start is timed from before `systemctl start` to a 200's status
// line by the box's bash, its own client, worker 1's "Starting" and "Started" by the journal on the
// same clock; a replacement from the journal's exit line to the next
// "Started". The page gives every run and the medians.
func TestStartupTimesColdStartsAndKills(t *testing.T) {
	const t0 = int64(1796190705_000000000) // ns
	unit := config.WorkerUnit(1)
	var killed []string
	box := fakeStartBox(t0,
		func(string) string {
			return fmt.Sprintf("Warning: Stopping %s, but it can still be activated by:\nresult 200 %d %d %d\n", unit, t0, t0+180e6, t0+40e6)
		},
		func(unit string) { killed = append(killed, unit) },
		journalLine{-5, "Stopped " + unit + " - clusterapp worker 1."},
		journalLine{65, "Starting " + unit + " - clusterapp worker 1..."},
		journalLine{170, "Started " + unit + " - clusterapp worker 1."},
		journalLine{300, unit + ": Main process exited, code=killed, status=9/KILL"},
		journalLine{420, "Started " + unit + " - clusterapp worker 1."})
	plan := Plan{CPUs: 2, Start: &StartPlan{Config: DefaultConfigurations(2)[1], Starts: 2, Kills: 1, KillAfter: time.Millisecond, ReadAfter: time.Millisecond}}
	res, err := (&Runner{Box: box}).startup(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	want := StartRun{FirstOK: 180 * time.Millisecond, Listening: 40 * time.Millisecond, Starting: 65 * time.Millisecond, Ready: 170 * time.Millisecond}
	if len(res.Starts) != 2 || res.Starts[1] != want {
		t.Fatalf("starts %+v, want two of %+v", res.Starts, want)
	}
	if len(res.Kills) != 1 || res.Kills[0] != 120*time.Millisecond || len(killed) != 1 || killed[0] != unit {
		t.Fatalf("kills %v of %q, want one of 120 ms (exit at 300, Started at 420) of %s", res.Kills, killed, unit)
	}
	var page bytes.Buffer
	WriteStart(&page, &Results{Start: res})
	containsAll(t, "the start tables", page.String(), "| median | **180 ms** | 40.0 ms | 65.0 ms | 170 ms |", "| 1 | 120 ms |", "| median | **120 ms** |")
}

// With EarlyStarts, Run times that many cold starts before anything else
// (the box just booted) and the page gives them in a table of their own,
// before the starts the target judges.
func TestRunTimesEarlyColdStartsFirst(t *testing.T) {
	const t0 = int64(1796190705_000000000)
	unit := config.WorkerUnit(1)
	var steps []string
	firstOK := []int{90, 95, 130, 140, 150}
	box := fakeStartBox(t0,
		func(string) string {
			ms := firstOK[len(steps)%len(firstOK)]
			steps = append(steps, "start")
			return fmt.Sprintf("result 200 %d %d %d\n", t0, t0+int64(ms)*1e6, t0+int64(ms)*1e6/4)
		},
		func(string) { steps = append(steps, "kill") },
		journalLine{40, "Starting " + unit + " - clusterapp worker 1..."},
		journalLine{85, "Started " + unit + " - clusterapp worker 1."},
		journalLine{300, unit + ": Main process exited, code=killed, status=9/KILL"},
		journalLine{400, "Started " + unit + " - clusterapp worker 1."})
	plan := Plan{CPUs: 2, Start: &StartPlan{Config: DefaultConfigurations(2)[1], Starts: 3, EarlyStarts: 2, Kills: 1, KillAfter: time.Millisecond, ReadAfter: time.Millisecond}}
	res, err := (&Runner{Box: box}).Run(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(steps, " "); got != "start start start start start kill" {
		t.Fatalf("steps %q, want 2 early starts, 3 starts, a kill", got)
	}
	early, late := res.Start.EarlyStarts, res.Start.Starts
	if len(early) != 2 || early[0].FirstOK != 90*time.Millisecond || early[1].FirstOK != 95*time.Millisecond || len(late) != 3 || late[0].FirstOK != 130*time.Millisecond {
		t.Fatalf("early %+v, late %+v: want the first two starts early", early, late)
	}
	var page bytes.Buffer
	WriteStart(&page, res)
	out := page.String()
	containsAll(t, "the start tables", out, "first in the run, in the box just booted", "| median | **92.5 ms** |", "last in the run, after the load", "| median | **140 ms** |")
	if strings.Index(out, "92.5 ms") > strings.Index(out, "140 ms") {
		t.Errorf("the early starts come after the judged ones:\n%s", out)
	}
}

// With Bare, each cold start of the pool, early and last, is followed by one
// of bare net/http in units derived from the worker's, installed first, by
// the same script on bare's socket; the page gives bare's beside the
// pool's with the median of the pairs' differences, and the target's row
// names bare's median. Without a bare anchor the page says why, and the
// pool is timed as before.
func TestStartupTimesBareAfterEachColdStart(t *testing.T) {
	const t0 = int64(1796190705_000000000)
	unit := config.WorkerUnit(1)
	pool, bare := []int{100, 110, 120, 130}, []int{60, 70, 90, 80}
	lines := []journalLine{
		// Type=simple: active once forked, so systemd says "Started" only.
		{30, "Started " + BareUnit + " - bare net/http under the worker unit's hardening (benchmark)."},
		{40, "Starting " + unit + " - clusterapp worker 1..."},
		{85, "Started " + unit + " - clusterapp worker 1."},
		{300, unit + ": Main process exited, code=killed, status=9/KILL"},
		{400, "Started " + unit + " - clusterapp worker 1."},
	}
	var steps []string
	var pools, bares int
	box := fakeBareStartBox(t0,
		func(script string) string {
			ms := 0
			switch {
			case strings.Contains(script, "/dev/tcp/127.0.0.1/"+strconv.Itoa(bareUnitPort)) && strings.Contains(script, "systemctl start "+BareSocketUnit+"\n"):
				steps, ms = append(steps, "bare"), bare[bares%len(bare)]
				bares++
			case strings.Contains(script, "/dev/tcp/127.0.0.1/8080") && strings.Contains(script, "systemctl start "+config.SocketUnit+"\n") &&
				// the metrics socket after the timed request, off the measured start
				strings.Index(script, "systemctl start "+config.MetricsSocketUnit) > strings.Index(script, "echo \"result"):
				steps, ms = append(steps, "pool"), pool[pools%len(pool)]
				pools++
			default:
				t.Errorf("a cold start script that starts neither the pool nor bare:\n%s", script)
			}
			return fmt.Sprintf("result 200 %d %d %d\n", t0, t0+int64(ms)*1e6, t0+int64(ms)*1e6/4)
		},
		func(string) { steps = append(steps, "kill") },
		func() { steps = append(steps, "install") },
		lines...)
	anchors := DefaultAnchors(t.TempDir(), 2, func(string) (string, error) { return "", nil })
	anchors[0].Skip, anchors[0].prepare = "", nil // a fake repository has no bin/clusterapp-bare
	plan := Plan{CPUs: 2, Anchors: &AnchorPlan{Anchors: anchors},
		Start: &StartPlan{Config: DefaultConfigurations(2)[1], Starts: 3, EarlyStarts: 1, Bare: true, Kills: 1, KillAfter: time.Millisecond, ReadAfter: time.Millisecond}}
	all, err := (&Runner{Box: box}).Run(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	res := all.Start
	if got := strings.Join(steps, " "); got != "install pool bare install pool bare pool bare pool bare kill" {
		t.Fatalf("steps %q, want bare's units installed, then the pool and bare in turn, early and last, then the kill", got)
	}
	wantBare := StartRun{FirstOK: 90 * time.Millisecond, Listening: 22500 * time.Microsecond, Starting: 30 * time.Millisecond}
	if len(res.BareStarts) != 3 || res.BareStarts[1] != wantBare || res.BareSkipped != "" || len(res.EarlyBareStarts) != 1 || res.EarlyBareStarts[0].FirstOK != 60*time.Millisecond {
		t.Fatalf("bare's starts %+v, early %+v (skipped %q), want 3, the second %+v, and one of 60 ms early", res.BareStarts, res.EarlyBareStarts, res.BareSkipped, wantBare)
	}
	var page bytes.Buffer
	WriteStart(&page, &Results{Start: res})
	containsAll(t, "the start tables", page.String(),
		`| 1 | 100 ms | 25.0 ms | 40.0 ms | 85.0 ms | 60.0 ms | 15.0 ms | 30.0 ms |`,
		`| 2 | 120 ms | 30.0 ms | 40.0 ms | 85.0 ms | 90.0 ms | 22.5 ms | 30.0 ms |`,
		`| median | **120 ms** | 30.0 ms | 40.0 ms | 85.0 ms | 80.0 ms | 20.0 ms | 30.0 ms |`,
		"median of the 3 pairs: +40.0 ms")
	var row string
	for _, tg := range Targets(&Results{Start: res}) {
		if strings.HasPrefix(tg.Goal, "cold start") {
			row = tg.Measured
		}
	}
	if !strings.Contains(row, "120 ms") || !strings.Contains(row, "bare net/http in the worker's unit, started in turn: 80.0 ms") {
		t.Errorf("the target's row reads %q, want the pool's 120 ms and bare's 80.0 ms", row)
	}

	// No bare anchor: the pool alone, and the page says why.
	steps, pools = nil, 1
	plan.Anchors = nil
	if res, err = (&Runner{Box: box}).startup(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(steps, " "); got != "pool pool pool kill" || len(res.BareStarts) != 0 {
		t.Fatalf("steps %q, bare %+v: want the pool's 3 starts and the kill only", got, res.BareStarts)
	}
	page.Reset()
	WriteStart(&page, &Results{Start: res})
	containsAll(t, "the start table", page.String(), "Bare net/http in the worker's unit: skipped: the plan has no bare net/http anchor.", "| median | **120 ms** | 30.0 ms | 40.0 ms | 85.0 ms |\n")

	// A page rendered -from results of before the listening time: a dash.
	page.Reset()
	WriteStart(&page, &Results{Start: &StartResult{Workers: 2, Starts: []StartRun{{FirstOK: 90 * time.Millisecond, Starting: 30 * time.Millisecond}}}})
	containsAll(t, "an older run's start table", page.String(), "| 1 | 90.0 ms | – | 30.0 ms | – |\n", "| median | **90.0 ms** | – | 30.0 ms |")
}

// The cold start's script itself, run by bash with a systemctl of the
// test's on PATH that takes 30 ms, against a listener of the test's: it
// prints the 200, then its moments in order, the return of systemctl
// start at least 30 ms after the first and before the status line, and
// hands the unit pattern to systemctl unexpanded.
func TestColdStartScriptTimesSystemctlAndTheStatusLine(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash:", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	fake := "#!/bin/sh\necho \"$*\" >> " + log + "\n[ \"$1\" = start ] && sleep 0.03\nexit 0\n"
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	script := coldStartScript([]string{"a.socket", "b@*.service"}, []string{"a.socket", "b.socket"}, host, port)
	script = strings.Replace(script, "sleep 1\n", "", 1) // the settling pause, not under test
	cmd := exec.Command(bash, "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	f := resultFields(string(out))
	if len(f) != 4 || f[0] != "200" {
		t.Fatalf("result %q of %q, want 200 and three moments", f, out)
	}
	var ns [3]int64
	for i := range ns {
		if ns[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t0, t1, tl := ns[0], ns[1], ns[2]
	if tl-t0 < 30e6 || tl > t1 {
		t.Errorf("before %d, status line %d, systemctl returned %d: want it returned 30 ms or more after the first, before the status line", t0, t1, tl)
	}
	calls, _ := os.ReadFile(log)
	if want := "stop a.socket b@*.service\nreset-failed a.socket b.socket\nstart a.socket b.socket\n"; string(calls) != want {
		t.Errorf("systemctl called with\n%s\nwant\n%s", calls, want)
	}
}

// lineAfter finds the first line with the text at or after the moment, and
// says which line is missing.
func TestLineAfter(t *testing.T) {
	journal := "1796190705.100000 h a: Started x\n1796190705.300000 h a: Started x\nnot a line\n"
	if got, err := lineAfter(journal, "Started x", 1796190705_200000000); err != nil || got != 1796190705_300000000 {
		t.Fatalf("lineAfter = %d, %v; want the second line", got, err)
	}
	if _, err := lineAfter(journal, "Main process exited", 0); !errors.Is(err, errJournal) || !strings.Contains(err.Error(), "Main process exited") {
		t.Fatalf("err = %v, want errJournal naming the text", err)
	}
}

// journalLine is a line of systemd's in the fake box's journal, ms after t0.
type journalLine struct {
	ms   int
	text string
}

// fakeStartBox answers the start step's commands: coldStart gives the cold
// start script's output, kill is told of each killed unit (the kill script
// answers t0), and journalctl gives lines, stamped as short-unix does.
func fakeStartBox(t0 int64, coldStart func(script string) string, kill func(unit string), lines ...journalLine) *sandbox.Driver {
	return fakeBareStartBox(t0, coldStart, kill, func() {}, lines...)
}

// fakeBareStartBox is fakeStartBox that is also told when bare's service
// unit is installed; its tree is this repository's (BareUnits reads it).
func fakeBareStartBox(t0 int64, coldStart func(script string) string, kill func(unit string), install func(), lines ...journalLine) *sandbox.Driver {
	return &sandbox.Driver{Name: "t", Src: "../../..", Command: func(ctx context.Context, args ...string) ([]byte, error) {
		cmd := strings.Join(args, " ")
		switch {
		case strings.Contains(cmd, "bash -c") && strings.Contains(cmd, "/dev/tcp/") && strings.Contains(cmd, "$EPOCHREALTIME"):
			return []byte(coldStart(cmd)), nil
		case strings.HasPrefix(cmd, "cp t ") && strings.HasSuffix(cmd, " "+bareUnitDir+"/"+BareUnit):
			install()
		case strings.Contains(cmd, "kill -9"):
			kill(args[len(args)-1])
			return []byte(fmt.Sprintf("result %d\n", t0)), nil
		case strings.Contains(cmd, "journalctl"):
			var out []string
			for _, l := range lines {
				ns := t0 + int64(l.ms)*1e6
				out = append(out, fmt.Sprintf("%d.%06d h systemd[1]: %s", ns/1e9, ns%1e9/1e3, l.text))
			}
			return []byte(strings.Join(out, "\n")), nil
		case strings.Contains(cmd, "systemctl list-units"):
			return []byte(unitListing(2)), nil
		case strings.Contains(cmd, "curl"):
			return []byte("200"), nil
		}
		return nil, nil
	}}
}
