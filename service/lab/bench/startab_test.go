package bench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
)

func TestRoundOrderReversesEveryOtherRound(t *testing.T) {
	for _, c := range []struct {
		n, round int
		want     []int
	}{{2, 1, []int{0, 1}}, {2, 2, []int{1, 0}}, {3, 3, []int{0, 1, 2}}, {3, 4, []int{2, 1, 0}}, {1, 2, []int{0}}} {
		if got := roundOrder(c.n, c.round); !slices.Equal(got, c.want) {
			t.Errorf("roundOrder(%d, %d) = %v, want %v", c.n, c.round, got, c.want)
		}
	}
}

// Each tree is installed before its own cold start, with the pool stopped
// first; the trees take turns, in reverse order every other round; bare's
// start follows each; `systemctl start` starts the units asked for; the
// table gives each tree's medians and, from the second tree on, how it
// compares round by round with the first.
func TestStartABTakesTurnsInOneBox(t *testing.T) {
	const t0 = int64(1796190705_000000000)
	unit := config.WorkerUnit(1)
	var steps []string
	// The pool's first 200 by start: tree 1 reads 100, 104, 98; tree 2
	// 95, 99, 101 (in the order taken: 1 2 | 2 1 | 1 2).
	poolMs := []int{100, 95, 99, 104, 98, 101}
	pools := 0
	box := fakeBareStartBox(t0,
		func(script string) string {
			ms := 0
			switch {
			case strings.Contains(script, "systemctl start "+BareSocketUnit+"\n"):
				steps, ms = append(steps, "bare"), 80
			case strings.Contains(script, "/dev/tcp/127.0.0.1/8080") && strings.Contains(script, "systemctl start "+config.SocketUnit+"\n") &&
				strings.Contains(script, "systemctl stop '"+config.TargetUnit+"' '"+config.WorkerPattern+"'"):
				steps, ms = append(steps, "pool"), poolMs[pools]
				pools++
			default:
				t.Errorf("a cold start script that starts neither the pool's socket alone nor bare:\n%s", script)
			}
			return fmt.Sprintf("result 200 %d %d %d\n", t0, t0+int64(ms)*1e6, t0+20e6)
		},
		func(string) { t.Error("nothing is killed") },
		func() { steps = append(steps, "bare-units") },
		journalLine{30, "Started " + BareUnit + " - bare net/http under the worker unit's hardening (benchmark)."},
		journalLine{40, "Starting " + unit + " - clusterapp worker 1..."},
		journalLine{85, "Started " + unit + " - clusterapp worker 1."})
	fake := box.Command
	stopped := false
	box.Command = func(ctx context.Context, args ...string) ([]byte, error) {
		cmd := strings.Join(args, " ")
		switch {
		case strings.HasPrefix(cmd, "exec t -- sh -c systemctl stop ") && strings.Contains(cmd, "'"+config.WorkerPattern+"'"):
			stopped = true
		case cmd == "install t":
			if !stopped {
				t.Error("a tree was installed while the pool could still run its executables")
			}
			steps, stopped = append(steps, "install"), false
		}
		return fake(ctx, args...)
	}
	anchors := DefaultAnchors(t.TempDir(), 2, func(string) (string, error) { return "", nil })
	anchors[0].Skip, anchors[0].prepare = "", nil // a fake repository has no bin/clusterapp-bare
	plan := Plan{CPUs: 2, Anchors: &AnchorPlan{Anchors: anchors}, Start: &StartPlan{Config: DefaultConfigurations(2)[1], Bare: true}}
	res, err := (&Runner{Box: box}).StartAB(context.Background(), plan, StartABPlan{Trees: []string{"/a", "/b"}, Rounds: 3, Start: []string{config.SocketUnit}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(steps, " "), "bare-units"+strings.Repeat(" install pool bare", 6); got != want {
		t.Fatalf("steps %q, want %q", got, want)
	}
	var order []string
	for _, run := range res.Runs {
		order = append(order, strconv.Itoa(run.Round)+":"+strconv.Itoa(run.Tree+1))
		if run.Bare == nil || run.Bare.FirstOK != 80*time.Millisecond || run.Pool.Starting != 40*time.Millisecond || run.Pool.Ready != 85*time.Millisecond {
			t.Errorf("run %+v (bare %+v): want bare's 80 ms beside it, Starting at 40 and READY=1 at 85 ms", run, run.Bare)
		}
	}
	if got := strings.Join(order, " "); got != "1:1 1:2 2:2 2:1 3:1 3:2" {
		t.Fatalf("rounds and trees %q, want the trees in turn, reversed in round 2", got)
	}
	var out bytes.Buffer
	WriteStartAB(&out, res)
	containsAll(t, "the A/B table", out.String(),
		"Cold starts of 2 trees in one box, 2 workers, `systemctl start "+config.SocketUnit+"`",
		"| 2 | 2 | 99.0 ms | 20.0 ms | 40.0 ms | 85.0 ms | 80.0 ms |",
		// Tree 1: 100, 104, 98; tree 2: 95, 99, 101, so -5, -5, +3 by round.
		"| 1 `/a` | 3 | **100 ms** | 20.0 ms | 40.0 ms | 85.0 ms | 80.0 ms | +20.0 ms | – | – |",
		"| 2 `/b` | 3 | **99.0 ms** | 20.0 ms | 40.0 ms | 85.0 ms | 80.0 ms | +19.0 ms | -5.00 ms | 2 of 3 |")
}

func TestStartABSaysWhatIsMissing(t *testing.T) {
	r := &Runner{Box: fakeStartBox(0, func(string) string { return "" }, func(string) {})}
	plan := Plan{CPUs: 2, Start: &StartPlan{Config: DefaultConfigurations(2)[1]}}
	if _, err := r.StartAB(context.Background(), plan, StartABPlan{}); err == nil || !strings.Contains(err.Error(), "no tree") {
		t.Errorf("no trees: %v, want an error naming it", err)
	}
	if _, err := r.StartAB(context.Background(), Plan{CPUs: 2}, StartABPlan{Trees: []string{"/a"}}); err == nil || !strings.Contains(err.Error(), "no start configuration") {
		t.Errorf("no start configuration: %v, want an error naming it", err)
	}
	// A start that gives no 200 ends the comparison with the tree named.
	_, err := r.StartAB(context.Background(), plan, StartABPlan{Trees: []string{"/a"}, Rounds: 1})
	if err == nil || !strings.Contains(err.Error(), "tree /a") {
		t.Errorf("a start without a 200: %v, want an error naming the tree", err)
	}
}

func TestSignedMillis(t *testing.T) {
	for d, want := range map[time.Duration]string{3500 * time.Microsecond: "+3.50 ms", -8200 * time.Microsecond: "-8.20 ms", 0: "0 ms"} {
		if got := signedMillis(d); got != want {
			t.Errorf("signedMillis(%v) = %q, want %q", d, got, want)
		}
	}
}
