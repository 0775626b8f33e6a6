package admission

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestPlanProcs(t *testing.T) {
	for _, c := range []struct {
		name           string
		current, slots int
		explicit       bool
		want           Procs
	}{
		{"standalone: as many slots as Ps, one more while they compute", 2, 2, false, Procs{Base: 2, Serving: 3}},
		{"pool of 2 on 2 CPUs: one slot, one P, two while it computes", 2, 1, false, Procs{Base: 1, Serving: 2}},
		{"pool of 8 on 2 CPUs (one slot each)", 2, 1, false, Procs{Base: 1, Serving: 2}},
		{"one CPU (affinity or quota), one slot", 1, 1, false, Procs{Base: 1, Serving: 2}},
		{"admission as good as off: Go's choice, one more, not 65537", 2, 65536, false, Procs{Base: 2, Serving: 3}},
		{"operator's value is kept, with a warning", 1, 1, true, Procs{Base: 1, Serving: 1, TooFew: true}},
		{"operator's value with a spare P", 4, 2, true, Procs{Base: 4, Serving: 4}},
	} {
		if got := PlanProcs(c.current, c.slots, c.explicit); got != c.want {
			t.Errorf("%s: PlanProcs(%d, %d, %v) = %+v; want %+v", c.name, c.current, c.slots, c.explicit, got, c.want)
		}
	}
}

// The governor's decisions, one wake-up at a time: it raises only when the
// process used its base Ps' worth of CPU and its wake-up came late, stays
// raised while the base Ps stay busy, and returns after Hold without.
func TestGovernorStep(t *testing.T) {
	ms := time.Millisecond
	g := &Governor{Procs: Procs{Base: 1, Serving: 2}, Hold: 100 * ms}
	st := &governorState{procs: 1}
	steps := []struct {
		name  string
		s     sample
		procs int
	}{
		{"idle", sample{wall: 10 * ms, cpu: 0, late: 0}, 1},
		{"late, but the CPU went to another process", sample{wall: 18 * ms, cpu: 6 * ms, late: 8 * ms}, 1},
		{"busy with short requests, on time", sample{wall: 10 * ms, cpu: 10 * ms, late: 100 * time.Microsecond}, 1},
		{"busy and late: the serving path waited", sample{wall: 17 * ms, cpu: 17 * ms, late: 7 * ms}, 2},
		{"still computing: stays", sample{wall: 10 * ms, cpu: 19 * ms, held: true}, 2},
		{"calm 60 ms", sample{wall: 60 * ms, cpu: 10 * ms, held: true}, 2},
		{"busy again: the calm starts over", sample{wall: 10 * ms, cpu: 10 * ms, held: true}, 2},
		{"busy with short requests: calm 60 ms", sample{wall: 60 * ms, cpu: 60 * ms, held: false}, 2},
		{"calm 120 ms in all: back to the base", sample{wall: 60 * ms, cpu: 10 * ms, held: true}, 1},
	}
	for _, s := range steps {
		why := g.step(st, s.s)
		if st.procs != s.procs {
			t.Fatalf("%s: level %d, want %d", s.name, st.procs, s.procs)
		}
		if changed := why != ""; changed != (s.name == "busy and late: the serving path waited" || strings.HasPrefix(s.name, "calm 120")) {
			t.Errorf("%s: why = %q", s.name, why)
		}
	}
	// Two base Ps: one busy P of two is not "every P".
	g2 := &Governor{Procs: Procs{Base: 2, Serving: 3}}
	st2 := &governorState{procs: 2}
	if g2.step(st2, sample{wall: 20 * ms, cpu: 20 * ms, late: 10 * ms}); st2.procs != 2 {
		t.Errorf("one of two Ps busy raised the level to %d", st2.procs)
	}
	if g2.step(st2, sample{wall: 20 * ms, cpu: 40 * ms, late: 10 * ms}); st2.procs != 3 {
		t.Errorf("both Ps busy and late: level %d, want 3", st2.procs)
	}
}

// Slots count as held when every one is taken and fewer requests finished
// than fit in the interval at the Late threshold each.
func TestSlotsHeld(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name       string
		before     SlotUse
		now        SlotUse
		wall, hold time.Duration
		want       bool
	}{
		{"one slot, a 7 ms request per 10 ms", SlotUse{1, 1, 100}, SlotUse{1, 1, 101}, 10 * ms, 2 * ms, true},
		{"one slot, 200 short requests in 10 ms", SlotUse{1, 1, 100}, SlotUse{1, 1, 300}, 10 * ms, 2 * ms, false},
		{"a slot free", SlotUse{2, 2, 0}, SlotUse{2, 1, 0}, 10 * ms, 2 * ms, false},
		{"two slots, 8 finished in 10 ms (2.5 ms each)", SlotUse{2, 2, 0}, SlotUse{2, 2, 8}, 10 * ms, 2 * ms, true},
		{"two slots, 12 finished in 10 ms", SlotUse{2, 2, 0}, SlotUse{2, 2, 12}, 10 * ms, 2 * ms, false},
		{"no slots known", SlotUse{}, SlotUse{}, 10 * ms, 2 * ms, false},
	} {
		if got := slotsHeld(c.before, c.now, c.wall, c.hold); got != c.want {
			t.Errorf("%s: slotsHeld = %v, want %v", c.name, got, c.want)
		}
	}
}

// Run applies the base level at once, raises through Set when its clock
// shows a late, busy wake-up, says why, and returns when its context ends.
func TestGovernorRun(t *testing.T) {
	var applied []int
	var cpu time.Duration
	clock := time.Unix(0, 0)
	changed := make(chan string, 4)
	g := &Governor{
		Procs: Procs{Base: 1, Serving: 2},
		Set: func(n int) int {
			was := 2
			if len(applied) > 0 {
				was = applied[len(applied)-1]
			}
			applied = append(applied, n)
			return was
		},
		// Each wake-up: 15 ms of wall time for a 1 ms tick (14 ms late), all
		// of it on the CPU.
		Now: func() time.Time { clock = clock.Add(15 * time.Millisecond); return clock },
		CPU: func() (time.Duration, error) { cpu += 15 * time.Millisecond; return cpu, nil },
		Changed: func(from, to int, why string) {
			changed <- why
		},
		Tick: time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	first, raised := <-changed, <-changed
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if len(applied) < 2 || applied[0] != 1 || applied[1] != 2 {
		t.Fatalf("GOMAXPROCS set to %v, want 1 then 2", applied)
	}
	if !strings.Contains(first, "base") || !strings.Contains(raised, "waited") {
		t.Errorf("reasons %q, %q", first, raised)
	}
}

// With nothing to adjust (the operator's GOMAXPROCS), Run applies it and
// returns at once.
func TestGovernorFixed(t *testing.T) {
	var applied []int
	g := &Governor{Procs: Procs{Base: 3, Serving: 3}, Set: func(n int) int { applied = append(applied, n); return n }}
	if err := g.Run(context.Background()); err != nil || len(applied) != 1 || applied[0] != 3 {
		t.Fatalf("Run = %v, applied %v; want nil, [3]", err, applied)
	}
}
