package bench

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// The stack comparison applies the one-process configuration, starts the
// bare anchor beside it, and bare again in units derived from the shipped
// worker unit and socket, and loads each in turn, round after round; the
// ratios are of the medians, and the anchors are stopped at the end. Each
// side is warmed up once, uncounted, and the order turns by round.
func TestStackTakesTurnsWithBare(t *testing.T) {
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	var applied, loads, sched []string
	var started, stopped, unitStarted, unitStopped bool
	units := map[string]string{}
	var cpuNs uint64
	box := &sandbox.Driver{Name: "t", Src: repo, Command: func(ctx context.Context, args ...string) ([]byte, error) {
		cmd := strings.Join(args, " ")
		switch {
		case strings.Contains(cmd, "schedstat"):
			// 36 ms of CPU between two readings: 40 µs for each of the
			// pool's 900 responses, 37.9 for each of the 950 of bare in
			// the unit, 36 µs for each of bare's 1000.
			sched = append(sched, args[len(args)-1])
			cpuNs += 36e6
			return []byte(fmt.Sprintf("%d 5", cpuNs)), nil
		case strings.HasPrefix(cmd, "cp t ") && strings.HasSuffix(cmd, " "+config.EnvFile):
			body, err := readCopied(args[2])
			applied = append(applied, body)
			return nil, err
		case strings.HasPrefix(cmd, "cp t ") && strings.Contains(cmd, " "+bareUnitDir+"/"):
			body, err := readCopied(args[2])
			units[filepath.Base(args[3])] = body
			return nil, err
		case strings.Contains(cmd, "systemd-run") && strings.Contains(cmd, "clusterapp-bare"):
			// The runtime set alike on both sides: the worker unit's GODEBUG.
			started = strings.Contains(cmd, "--setenv="+StackGODEBUG+" ")
		case strings.Contains(cmd, "systemctl stop "+anchorUnit):
			stopped = true
		case strings.Contains(cmd, "systemctl start "+BareSocketUnit):
			unitStarted = true
		case strings.Contains(cmd, "systemctl stop "+BareSocketUnit+" "+BareUnit):
			unitStopped = true
		case strings.Contains(cmd, "systemctl list-units"):
			return []byte(unitListing(1)), nil
		case strings.Contains(cmd, "curl"):
			return []byte("200"), nil
		case strings.Contains(cmd, sandbox.LoadPath):
			switch {
			case strings.Contains(cmd, "127.0.0.1:18090/"):
				loads = append(loads, "bare")
				return []byte(`{"ok":1000,"responses":1000,"requests":1000,"elapsed_ns":1000000000}`), nil
			case strings.Contains(cmd, "127.0.0.1:18094/"):
				loads = append(loads, "unit")
				return []byte(`{"ok":950,"responses":950,"requests":950,"elapsed_ns":1000000000}`), nil
			}
			loads = append(loads, "pool")
			return []byte(`{"ok":900,"responses":900,"requests":900,"elapsed_ns":1000000000}`), nil
		}
		return nil, nil
	}}
	anchors := DefaultAnchors(t.TempDir(), 2, func(string) (string, error) { return "", nil })
	anchors[0].Skip, anchors[0].prepare = "", nil // a fake repository has no bin/clusterapp-bare
	plan := Plan{CPUs: 2, Configs: DefaultConfigurations(2), Anchors: &AnchorPlan{Anchors: anchors},
		Stack: &StackPlan{Route: "/", Rounds: 3, Concurrency: 8, Duration: time.Second}}
	res, err := (&Runner{Box: box}).stack(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 1 || !strings.Contains(applied[0], "GOMAXPROCS=2") || !strings.Contains(applied[0], "CLUSTERAPP_WORKERS=1") {
		t.Fatalf("applied %q, want the one-process configuration", applied)
	}
	if got := strings.Join(loads, " "); got != "pool unit bare"+" pool unit bare unit bare pool bare pool unit" {
		t.Fatalf("loads in the order %q, want the warm-ups, then the order turning by one each round", got)
	}
	if !started || !stopped {
		t.Fatalf("bare anchor started with %s: %v, stopped %v", StackGODEBUG, started, stopped)
	}
	if !unitStarted || !unitStopped {
		t.Fatalf("bare in the worker's unit: socket started %v, units stopped %v", unitStarted, unitStopped)
	}
	containsAll(t, "bare's service", units[BareUnit], "ExecStart=/usr/local/bin/clusterapp-bare\n", "Sockets="+BareSocketUnit+"\n",
		"SystemCallFilter=@system-service\n", "PrivateNetwork=yes\n", "DynamicUser=yes\n", "Environment=GODEBUG=")
	for _, gone := range []string{"WatchdogSec", "EnvironmentFile", "Type=notify", "serve --instance", "RuntimeDirectory"} {
		if strings.Contains(units[BareUnit], gone) {
			t.Errorf("bare's service carries the worker's %s:\n%s", gone, units[BareUnit])
		}
	}
	containsAll(t, "bare's socket", units[BareSocketUnit], "ListenStream=127.0.0.1:18094\n", "Service="+BareUnit+"\n", "Backlog=4096\n")
	if strings.Contains(units[BareSocketUnit], ":8080") {
		t.Errorf("bare's socket listens on the pool's port:\n%s", units[BareSocketUnit])
	}
	for name, r := range map[string][2]float64{
		"Ratio": {res.Ratio(), 0.9}, "StackRatio": {res.StackRatio(), 900.0 / 950}, "UnitRatio": {res.UnitRatio(), 0.95},
		"CPURatio": {res.CPURatio(), 0.9}, "StackCPURatio": {res.StackCPURatio(), 900.0 / 950}, "UnitCPURatio": {res.UnitCPURatio(), 0.95},
	} {
		if r[0] < r[1]-0.001 || r[0] > r[1]+0.001 {
			t.Errorf("%s = %v, want %.3f", name, r[0], r[1])
		}
	}
	// Each run's CPU is read around it, from its own server's units.
	// The warm-ups are not counted, so not read.
	pool := strings.Repeat(config.WorkerPattern+" ", 2)
	unit := strings.Repeat(BareUnit+" ", 2)
	bare := strings.Repeat(anchorUnit+" ", 2)
	if got, want := strings.Join(sched, " ")+" ", pool+unit+bare+unit+bare+pool+bare+pool+unit; got != want {
		t.Fatalf("CPU read from %q, want %q", got, want)
	}
	var page bytes.Buffer
	WriteStack(&page, &Results{Stack: res})
	containsAll(t, "the stack tables", page.String(),
		"| median | 900.0 | 950.0 | 1000.0 | **0.95×** | 0.95× | 0.90× |",
		"| median | 40.0 | 37.9 | 36.0 | **0.95×** | 0.95× | 0.90× |",
		"| 3 | 900.0 | 950.0 | 1000.0 | 0.95× | 0.95× | 0.90× |")

	// Results from before bare ran in the unit: one ratio, against bare.
	old := *res
	old.Unit, old.UnitCPU = nil, nil
	page.Reset()
	WriteStack(&page, &Results{Stack: &old})
	containsAll(t, "the stack tables without bare in the unit", page.String(), "| median | 900.0 | 1000.0 | **0.90×** |", "| median | 40.0 | 36.0 | **0.90×** |")
}

// Without a bare anchor there is nothing to compare with: it says why and
// runs nothing.
func TestStackSkipsWithoutBare(t *testing.T) {
	box := &sandbox.Driver{Name: "t", Command: func(ctx context.Context, args ...string) ([]byte, error) {
		t.Errorf("ran %q", args)
		return nil, nil
	}}
	anchors := DefaultAnchors(t.TempDir(), 2, func(string) (string, error) { return "", nil })
	plan := Plan{CPUs: 2, Anchors: &AnchorPlan{Anchors: anchors}, Stack: &StackPlan{Route: "/"}}
	res, err := (&Runner{Box: box}).stack(context.Background(), plan)
	if err != nil || !strings.Contains(res.Skipped, "bin/clusterapp-bare is missing") {
		t.Fatalf("stack = %+v, %v; want skipped for the missing binary", res, err)
	}
	var page bytes.Buffer
	WriteStack(&page, &Results{Stack: res})
	if !strings.Contains(page.String(), "Skipped: bin/clusterapp-bare is missing") {
		t.Fatalf("page: %s", page.String())
	}
}

// The rounds at once bind both servers to CPU 0, load the worker and bare in
// the unit from generators bound to the other CPU, both in every round
// after an uncounted one, read each server's CPU around its own run, and
// unbind the servers at the end. Bare in the unit gets the baseline's
// GOMAXPROCS, set, so that its runtime does not shrink to the one CPU.
func TestStackAtOnceSharesTheSeconds(t *testing.T) {
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var pins, onceLoads []string
	units := map[string]string{}
	cpu := map[string]uint64{}
	box := &sandbox.Driver{Name: "t", Src: repo, Command: func(ctx context.Context, args ...string) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		cmd := strings.Join(args, " ")
		switch {
		case strings.Contains(cmd, "schedstat"):
			// 18 ms of CPU per reading of the pool, 17 of bare in the
			// unit: 20 µs for each of the pool's 900 responses, 17.9 for
			// each of the unit's 950.
			pattern := args[len(args)-1]
			cpu[pattern] += map[bool]uint64{true: 18e6, false: 17e6}[pattern == config.WorkerPattern]
			return []byte(fmt.Sprintf("%d 5", cpu[pattern])), nil
		case strings.Contains(cmd, "taskset -a -p"):
			pins = append(pins, args[len(args)-2]+" "+args[len(args)-1])
		case strings.HasPrefix(cmd, "cp t ") && strings.Contains(cmd, " "+bareUnitDir+"/"):
			body, err := readCopied(args[2])
			units[filepath.Base(args[3])] = body
			return nil, err
		case strings.Contains(cmd, "systemctl list-units"):
			return []byte(unitListing(1)), nil
		case strings.Contains(cmd, "curl"):
			return []byte("200"), nil
		case strings.Contains(cmd, sandbox.LoadPath):
			bound := strings.Contains(cmd, "taskset -c 1 ")
			if strings.Contains(cmd, "127.0.0.1:18094/") {
				if bound {
					onceLoads = append(onceLoads, "unit")
				}
				return []byte(`{"ok":950,"responses":950,"requests":950,"elapsed_ns":1000000000}`), nil
			}
			if strings.Contains(cmd, "127.0.0.1:18090/") {
				return []byte(`{"ok":1000,"responses":1000,"requests":1000,"elapsed_ns":1000000000}`), nil
			}
			if bound {
				onceLoads = append(onceLoads, "pool")
			}
			return []byte(`{"ok":900,"responses":900,"requests":900,"elapsed_ns":1000000000}`), nil
		}
		return nil, nil
	}}
	anchors := DefaultAnchors(t.TempDir(), 2, func(string) (string, error) { return "", nil })
	anchors[0].Skip, anchors[0].prepare = "", nil
	plan := Plan{CPUs: 2, Configs: DefaultConfigurations(2), Anchors: &AnchorPlan{Anchors: anchors},
		Stack: &StackPlan{Route: "/", Rounds: 1, Concurrency: 8, Duration: time.Second, AtOnce: 2}}
	res, err := (&Runner{Box: box}).stack(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(pins, ", "), "0 "+config.WorkerPattern+", 0 "+BareUnit+", 0-1 "+config.WorkerPattern+", 0-1 "+BareUnit; got != want {
		t.Fatalf("bound %q, want both servers to CPU 0, then back to every CPU", got)
	}
	if len(onceLoads) != 6 || strings.Count(strings.Join(onceLoads, " "), "pool") != 3 {
		t.Fatalf("loads bound to CPU 1: %q, want the pool and bare in the unit in each of 3 rounds (1 uncounted)", onceLoads)
	}
	if !strings.Contains(units["gomaxprocs.conf"], "Environment=GOMAXPROCS=2\n") {
		t.Fatalf("bare's drop-in:\n%s\nwant GOMAXPROCS=2 set", units["gomaxprocs.conf"])
	}
	if len(res.OncePoolCPU) != 2 || len(res.OnceUnitCPU) != 2 {
		t.Fatalf("rounds at once: pool %v, unit %v; want 2 each", res.OncePoolCPU, res.OnceUnitCPU)
	}
	if r := res.OnceCPURatio(); r < 17.0/950/(18.0/900)-0.001 || r > 17.0/950/(18.0/900)+0.001 {
		t.Fatalf("OnceCPURatio = %v, want %.3f", r, 17.0/950/(18.0/900))
	}
	var page bytes.Buffer
	WriteStack(&page, &Results{Stack: res})
	containsAll(t, "the table at once", page.String(), "At once: both servers on CPU 0", "| median | 900.0 | 20.0 | 950.0 | 17.9 | **0.89×** |")
}
