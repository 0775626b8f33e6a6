package bench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// The stack comparison applies the one-process configuration, starts the
// bare anchor beside it and loads one, then the other, round after round;
// the ratio is of the medians, and the anchor is stopped at the end. Each
// side is warmed up once, uncounted, and the order alternates by round.
func TestStackAlternatesWithBare(t *testing.T) {
	var applied, loads, sched []string
	var started, stopped bool
	var cpuNs uint64
	box := &sandbox.Driver{Name: "t", Command: func(ctx context.Context, args ...string) ([]byte, error) {
		cmd := strings.Join(args, " ")
		switch {
		case strings.Contains(cmd, "schedstat"):
			// 36 ms of CPU between two readings: 40 µs for each of the
			// pool's 900 responses, 36 µs for each of bare's 1000.
			sched = append(sched, args[len(args)-1])
			cpuNs += 36e6
			return []byte(fmt.Sprintf("%d 5", cpuNs)), nil
		case strings.HasPrefix(cmd, "cp t ") && strings.HasSuffix(cmd, " "+config.EnvFile):
			body, err := readCopied(args[2])
			applied = append(applied, body)
			return nil, err
		case strings.Contains(cmd, "systemd-run") && strings.Contains(cmd, "clusterapp-bare"):
			// The runtime set alike on both sides: the worker unit's GODEBUG.
			started = strings.Contains(cmd, "--setenv="+StackGODEBUG+" ")
		case strings.Contains(cmd, "systemctl stop "+anchorUnit):
			stopped = true
		case strings.Contains(cmd, "systemctl list-units"):
			return []byte(unitListing(1)), nil
		case strings.Contains(cmd, "curl"):
			return []byte("200"), nil
		case strings.Contains(cmd, sandbox.LoadPath):
			if strings.Contains(cmd, "127.0.0.1:18090/") {
				loads = append(loads, "bare")
				return []byte(`{"ok":1000,"responses":1000,"requests":1000,"elapsed_ns":1000000000}`), nil
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
	if got := strings.Join(loads, " "); got != "pool bare"+" pool bare bare pool pool bare" {
		t.Fatalf("loads in the order %q, want them alternating", got)
	}
	if !started || !stopped {
		t.Fatalf("bare anchor started with %s: %v, stopped %v", StackGODEBUG, started, stopped)
	}
	if r := res.Ratio(); r < 0.899 || r > 0.901 {
		t.Fatalf("ratio %v, want 0.9 (900 over 1000 req/s)", r)
	}
	// Each run's CPU is read around it, from its own server's units.
	// The warm-ups are not counted, so not read.
	poolFirst := config.WorkerPattern + " " + config.WorkerPattern + " " + anchorUnit + " " + anchorUnit + " "
	bareFirst := anchorUnit + " " + anchorUnit + " " + config.WorkerPattern + " " + config.WorkerPattern + " "
	want := poolFirst + bareFirst + poolFirst
	if got := strings.Join(sched, " ") + " "; got != want {
		t.Fatalf("CPU read from %q, want %q", got, want)
	}
	if r := res.CPURatio(); r < 0.899 || r > 0.901 {
		t.Fatalf("CPU ratio %v, want 0.9 (36 µs per response over 40)", r)
	}
	var page bytes.Buffer
	WriteStack(&page, &Results{Stack: res})
	containsAll(t, "the stack table", page.String(), "| median | 900.0 | 1000.0 | **0.90×** | 40.0 | 36.0 | **0.90×** |", "| 3 | 900.0 | 1000.0 | 0.90× | 40.0 | 36.0 | 0.90× |")
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
