package admission

import (
	"context"
	"strings"
	"sync/atomic"
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

// The governor's decisions, one wake-up at a time: it raises only when long
// requests held the slots and its wake-up came late, stays raised while long
// requests fill every slot, and returns after Hold without.
func TestGovernorStep(t *testing.T) {
	ms := time.Millisecond
	g := &Governor{Procs: Procs{Base: 1, Serving: 2}, Hold: 100 * ms}
	st := &governorState{procs: 1}
	steps := []struct {
		name    string
		s       sample
		procs   int
		changed bool
	}{
		{"idle", sample{wall: 10 * ms, idle: true}, 1, false},
		{"late, but short requests (or the CPU went elsewhere)", sample{wall: 18 * ms, late: 8 * ms}, 1, false},
		{"long requests, on time (waiting on I/O, Ps free)", sample{wall: 10 * ms, long: true, full: true}, 1, false},
		{"long requests, 40 ms late, but the process ran 3 ms of 50: it waited for a CPU, not for a P", sample{wall: 50 * ms, late: 40 * ms, long: true, full: true, ran: 3 * ms}, 1, false},
		{"the same with 2.6 ms run, 3.8 ms late", sample{wall: 13800 * time.Microsecond, late: 3800 * time.Microsecond, long: true, full: true, ran: 2600 * time.Microsecond}, 1, false},
		{"one long request in a light load: 4.6 ms late while it ran 5.6 ms", sample{wall: 14600 * time.Microsecond, late: 4600 * time.Microsecond, long: true, ran: 5600 * time.Microsecond}, 2, true},
		{"still long requests in every slot: stays", sample{wall: 10 * ms, long: true, full: true}, 2, false},
		{"a slot free: calm 60 ms", sample{wall: 60 * ms, long: true}, 2, false},
		{"full again: the calm starts over", sample{wall: 10 * ms, long: true, full: true}, 2, false},
		{"short requests in every slot: calm 60 ms", sample{wall: 60 * ms, full: true}, 2, false},
		{"calm 120 ms in all: back to the base", sample{wall: 60 * ms, idle: true}, 1, true},
		{"long requests and late: the serving path waited", sample{wall: 17 * ms, late: 7 * ms, long: true, full: true, ran: 15 * ms}, 2, true},
	}
	for _, s := range steps {
		why := g.step(st, s.s)
		if st.procs != s.procs || (why != "") != s.changed {
			t.Fatalf("%s: level %d (why %q), want %d (changed %v)", s.name, st.procs, why, s.procs, s.changed)
		}
	}
}

// At the serving level, a window in which long requests filled the slots
// less than half of the time they were all taken returns it to the base at
// the window's end; long requests most of that time keep it, and so does a
// window in which the slots were never all taken (Hold's calm judges it).
func TestGovernorStepFewLong(t *testing.T) {
	ms := time.Millisecond
	g := &Governor{Procs: Procs{Base: 1, Serving: 2}, Window: 100 * ms}
	waited := sample{wall: 17 * ms, late: 7 * ms, long: true, full: true, ran: 15 * ms}
	short := sample{wall: 10 * ms, full: true, finished: 8, ran: 9 * ms}
	long := sample{wall: 10 * ms, long: true, full: true, finished: 2, ran: 10 * ms}
	raise := func(st *governorState) {
		t.Helper()
		if why := g.step(st, waited); why == "" || st.procs != 2 {
			t.Fatalf("level %d after a wait behind long requests, want the serving level", st.procs)
		}
	}

	st := &governorState{procs: 1}
	raise(st)
	for i := range 9 { // 90 ms: 1 sample in 10 long, as /slow read
		s := short
		if i == 4 {
			s = long
		}
		if why := g.step(st, s); why != "" || st.procs != 2 {
			t.Fatalf("sample %d: level %d (why %q), want the serving level until the window ends", i, st.procs, why)
		}
	}
	why := g.step(st, short)
	if st.procs != 1 || !strings.Contains(why, "filled them 10% of the 100ms they were all taken in the last 100ms") {
		t.Fatalf("level %d (why %q) at the end of a window with long requests 10%% of it, want the base and the share said", st.procs, why)
	}
	raise(st) // the next raise starts a window of its own
	for i := range 9 {
		if why := g.step(st, long); why != "" || st.procs != 2 {
			t.Fatalf("sample %d after raising again: level %d (why %q), want the serving level: the last window ended with the drop", i, st.procs, why)
		}
	}

	st = &governorState{procs: 1}
	raise(st)
	for i := range 30 { // three windows, long requests 6 samples in 10
		s := long
		if i%10 >= 6 {
			s = short
		}
		if why := g.step(st, s); why != "" || st.procs != 2 {
			t.Fatalf("sample %d: level %d (why %q), want the serving level: long requests most of the time", i, st.procs, why)
		}
	}

	st = &governorState{procs: 1}
	raise(st)
	slotFree := sample{wall: 10 * ms, finished: 8, ran: 9 * ms}
	for i := range 15 { // 150 ms, never every slot taken: no window verdict
		if why := g.step(st, slotFree); why != "" || st.procs != 2 {
			t.Fatalf("sample %d: level %d (why %q), want the serving level until Hold's calm", i, st.procs, why)
		}
	}
}

// With NoSpare giving a reason, a raise that is due does not happen, and a
// serving level in force returns to the base; NoSpare is asked at most once
// every SpareEvery, and a raise follows once it stops giving one.
func TestGovernorStepNoSpare(t *testing.T) {
	ms := time.Millisecond
	why, asked := "more workers than CPUs", 0
	g := &Governor{Procs: Procs{Base: 1, Serving: 2}, NoSpare: func() string { asked++; return why }}
	st := &governorState{procs: 1}
	waited := sample{wall: 17 * ms, late: 7 * ms, long: true, full: true, ran: 15 * ms}
	for i := range 50 { // 850 ms of looks, each due a raise
		if got := g.step(st, waited); got != "" || st.procs != 1 {
			t.Fatalf("look %d: level %d (why %q), want the base: NoSpare says %q", i, st.procs, got, why)
		}
	}
	if asked != 1 {
		t.Fatalf("NoSpare asked %d times in 850 ms of looks, want once", asked)
	}
	why = ""
	for range 9 { // the answer is kept until it is SpareEvery old
		g.step(st, waited)
	}
	if st.procs != 1 || asked != 1 {
		t.Fatalf("level %d after %d asks, want the base until the answer is SpareEvery old", st.procs, asked)
	}
	if got := g.step(st, waited); got == "" || st.procs != 2 || asked != 2 {
		t.Fatalf("level %d (why %q) after %d asks, want the serving level once NoSpare is asked again and says yes", st.procs, got, asked)
	}
	why = "more workers than CPUs now"
	for i := 0; ; i++ {
		got := g.step(st, waited)
		if st.procs == 1 {
			if got != why || i < 55 || asked != 3 {
				t.Fatalf("back to the base after %d looks and %d asks (why %q), want after SpareEvery, asked once more, why %q", i, asked, got, why)
			}
			break
		}
		if i > 70 {
			t.Fatalf("still at the serving level after %d looks: NoSpare says %q", i, why)
		}
	}
}

// Woken by an admission, the sample runs from it: the wake-up's lateness is
// the whole sample, and the process must have run half of it for the wait
// to be its own Ps computing, not the kernel running other processes.
func TestGovernorStepWoken(t *testing.T) {
	ms := time.Millisecond
	g := &Governor{Procs: Procs{Base: 1, Serving: 2}}
	for _, c := range []struct {
		name   string
		s      sample
		raised bool
	}{
		{"a request computed 6 ms before the governor got the P", sample{wall: 6 * ms, late: 6 * ms, ran: 6 * ms, long: true, woken: true}, true},
		{"5 ms late, the process ran 2.6 ms of it", sample{wall: 5 * ms, late: 5 * ms, ran: 2600 * time.Microsecond, long: true, woken: true}, true},
		{"5.2 ms late, the process ran 1 ms of it: other processes had the CPU", sample{wall: 5200 * time.Microsecond, late: 5200 * time.Microsecond, ran: ms, long: true, woken: true}, false},
		{"1 ms late: on time", sample{wall: ms, late: ms, ran: ms, long: true, woken: true}, false},
		{"6 ms late, short requests finished", sample{wall: 6 * ms, late: 6 * ms, ran: 6 * ms, woken: true}, false},
		{"the same lateness and CPU time after a Tick: the period held the sleep, so it must have run 5.2 ms", sample{wall: 15200 * time.Microsecond, late: 5200 * time.Microsecond, ran: 3 * ms, long: true}, false},
	} {
		st := &governorState{procs: 1}
		why := g.step(st, c.s)
		if raised := st.procs == 2; raised != c.raised {
			t.Errorf("%s: raised %v (why %q), want %v", c.name, raised, why, c.raised)
		}
	}
}

// A wake-up's slot fields: long when the requests that finished held their
// slot Late or more of the process's running time on average (its CPU
// time; Slots times the wall time when that is unknown), full when every
// slot is taken, idle when nothing ran.
func TestObserve(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name             string
		before, now      SlotUse
		wall, ran        time.Duration
		long, full, idle bool
	}{
		{"one slot, a 7 ms request per 10 ms", SlotUse{1, 1, 100}, SlotUse{1, 1, 101}, 10 * ms, 10 * ms, true, true, false},
		{"the computing request just finished, slot free", SlotUse{1, 1, 100}, SlotUse{1, 0, 101}, 17 * ms, 16 * ms, true, false, false},
		{"one slot, 200 short requests in 10 ms", SlotUse{1, 1, 100}, SlotUse{1, 1, 300}, 10 * ms, 10 * ms, false, true, false},
		{"two slots, 8 finished in 10 ms (2.5 ms each)", SlotUse{2, 2, 0}, SlotUse{2, 2, 8}, 10 * ms, 20 * ms, true, true, false},
		{"two slots, 12 finished in 10 ms", SlotUse{2, 2, 0}, SlotUse{2, 2, 12}, 10 * ms, 20 * ms, false, true, false},
		{"nothing ran", SlotUse{2, 0, 5}, SlotUse{2, 0, 5}, 100 * ms, 0, false, false, true},
		{"off the CPU: 4 short requests in 28 ms, in which the process ran 2 ms", SlotUse{1, 1, 100}, SlotUse{1, 0, 104}, 28 * ms, 2 * ms, false, false, false},
		{"off the CPU: 20 in 52 ms, 3 ms of it running", SlotUse{1, 1, 100}, SlotUse{1, 1, 120}, 52 * ms, 3 * ms, false, true, false},
		{"a computing request the kernel shares a CPU with another", SlotUse{1, 1, 100}, SlotUse{1, 1, 100}, 20 * ms, 9 * ms, true, true, false},
		{"CPU time unknown: two slots, 8 finished in 10 ms", SlotUse{2, 2, 0}, SlotUse{2, 2, 8}, 10 * ms, -1, true, true, false},
		{"CPU time unknown: two slots, 12 finished in 10 ms", SlotUse{2, 2, 0}, SlotUse{2, 2, 12}, 10 * ms, -1, false, true, false},
	} {
		s := observe(c.before, c.now, c.wall, c.ran, 2*ms)
		if s.long != c.long || s.full != c.full || s.idle != c.idle {
			t.Errorf("%s: long %v full %v idle %v; want %v %v %v", c.name, s.long, s.full, s.idle, c.long, c.full, c.idle)
		}
	}
}

// Run applies the base level at once, raises through Set when its clock
// shows a late wake-up while long requests hold the slot, says why, and
// returns when its context ends.
func TestGovernorRun(t *testing.T) {
	var applied []int
	clock := time.Unix(0, 0)
	released := uint64(0)
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
		// Each wake-up: 15 ms of wall time for a 1 ms tick (14 ms late),
		// one request of the one slot finished, the next one running.
		Now: func() time.Time { clock = clock.Add(15 * time.Millisecond); return clock },
		Slots: func() SlotUse {
			released++
			return SlotUse{Slots: 1, InFlight: 1, Released: released}
		},
		// The process computed the whole time.
		CPU:     func() time.Duration { return clock.Sub(time.Unix(0, 0)) },
		Changed: func(from, to int, why string) { changed <- why },
		Tick:    time.Millisecond,
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

// Asleep for an idle period (here an hour), Run wakes up when a request is
// admitted (Started) and reads its lateness from the admission's time: 9 ms
// late while the process computed 10 ms and the request held the slot, the
// serving path waited, and the level is raised at this first look.
func TestGovernorRunWakesOnAdmission(t *testing.T) {
	var elapsed atomic.Int64 // the fake clock: 10 ms per reading
	var calls atomic.Int32
	started := make(chan Admission, 1)
	changed := make(chan string, 4)
	g := &Governor{
		Procs: Procs{Base: 1, Serving: 2},
		Set:   func(n int) int { return n },
		Now:   func() time.Time { return time.Unix(0, elapsed.Add(int64(10*time.Millisecond))) },
		// Nothing runs at the start (10 ms) and at the first wake-up (20
		// ms); then one request holds the slot.
		Slots: func() SlotUse {
			if calls.Add(1) <= 2 {
				return SlotUse{Slots: 1}
			}
			return SlotUse{Slots: 1, InFlight: 1}
		},
		CPU:     func() time.Duration { return time.Duration(elapsed.Load()) }, // computing the whole time
		Started: started,
		Changed: func(from, to int, why string) { changed <- why },
		Tick:    time.Millisecond,
		Idle:    time.Hour,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = g.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); calls.Load() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Run looked at the slots %d time(s) in 10 s, want 2 (the start and the first Tick)", calls.Load())
		}
	}
	// Admitted 1 ms after the idle look; Run looks at 30 ms.
	started <- Admission{At: time.Unix(0, int64(21*time.Millisecond)), CPU: 21 * time.Millisecond}
	select {
	case why := <-changed:
		if !strings.Contains(why, "waited 9ms for a P") {
			t.Fatalf("raised because %q; want a goroutine that waited 9ms for a P", why)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("not raised 10 s after a request was admitted (%d looks at the slots): the idle period was not cut short", calls.Load())
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

// The same wake-ups as TestGovernorRun, but the process's CPU time moves by
// 1 ms of each 15 (the kernel ran other processes): one request per 1 ms of
// running is short, and Run never raises the level.
func TestGovernorRunOffTheCPU(t *testing.T) {
	clock := time.Unix(0, 0)
	released, wakeups := uint64(0), 0
	var applied []int
	var cpu time.Duration
	g := &Governor{
		Procs: Procs{Base: 1, Serving: 2},
		Set:   func(n int) int { applied = append(applied, n); return n },
		Now:   func() time.Time { clock = clock.Add(15 * time.Millisecond); return clock },
		Slots: func() SlotUse {
			released++
			wakeups++
			return SlotUse{Slots: 1, InFlight: 1, Released: released}
		},
		CPU:  func() time.Duration { cpu += time.Millisecond; return cpu },
		Tick: time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := g.Run(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Run = %v, want context.DeadlineExceeded", err)
	}
	if wakeups < 10 || len(applied) != 1 || applied[0] != 1 {
		t.Fatalf("after %d wake-ups GOMAXPROCS set to %v, want only the base [1]", wakeups, applied)
	}
}

// processCPU reads the process's CPU clock: a busy loop moves it (however
// long the kernel keeps the loop waiting), and it never goes back.
func TestProcessCPU(t *testing.T) {
	before := processCPU()
	if before < 0 {
		t.Skip("CLOCK_PROCESS_CPUTIME_ID unreadable here")
	}
	x, now := 0, before
	for deadline := time.Now().Add(10 * time.Second); now-before < 5*time.Millisecond && time.Now().Before(deadline); {
		for i := 0; i < 1e5; i++ {
			x++
		}
		moved := processCPU()
		if moved < now {
			t.Fatalf("the CPU clock went back from %v to %v", now, moved)
		}
		now = moved
	}
	if now-before < 5*time.Millisecond {
		t.Fatalf("the CPU clock moved %v in 10 s of a busy loop (%d turns)", now-before, x)
	}
}

// What ends each sleep: an admission while nothing runs (idle), the end of
// a long request while only short ones run at the base level (quiet, when
// the limiter can tell of it), the tick otherwise.
func TestGovernorPeriod(t *testing.T) {
	ms := time.Millisecond
	long := make(chan struct{})
	watching := &Governor{Procs: Procs{Base: 1, Serving: 2}, Long: long, WatchLong: func(time.Duration) {}}
	blind := &Governor{Procs: Procs{Base: 1, Serving: 2}}
	for _, c := range []struct {
		name  string
		g     *Governor
		procs int
		s     sample
		wait  time.Duration
		p     period
	}{
		{"nothing ran", watching, 1, sample{wall: 10 * ms, idle: true}, DefaultIdle, idle},
		{"short requests", watching, 1, sample{wall: 10 * ms, finished: 90, ran: ms}, DefaultQuiet, quiet},
		{"short requests, no signal of long ones", blind, 1, sample{wall: 10 * ms, finished: 90, ran: ms}, DefaultTick, ticking},
		{"long requests", watching, 1, sample{wall: 10 * ms, long: true}, DefaultTick, ticking},
		{"raised: counting the calm", watching, 2, sample{wall: 10 * ms, finished: 90, ran: ms}, DefaultTick, ticking},
		{"raised, nothing ran: counting the calm", watching, 2, sample{wall: 10 * ms, idle: true}, DefaultTick, ticking},
		{"long requests, no spare P allowed", watching, 1, sample{wall: 10 * ms, long: true}, DefaultQuiet, ticking},
		{"nothing ran, no spare P allowed", watching, 1, sample{wall: 10 * ms, idle: true}, DefaultIdle, idle},
	} {
		st := &governorState{procs: c.procs}
		if strings.Contains(c.name, "no spare P") {
			st.asked, st.noSpare = true, "more workers than CPUs"
		}
		wait, p := c.g.period(st, c.s)
		if wait != c.wait || p != c.p {
			t.Errorf("%s: sleeps %v in period %d, want %v in period %d", c.name, wait, p, c.wait, c.p)
		}
	}
}

// Seeing only short requests, Run sleeps its quiet period (here an hour)
// with the limiter watching for long ones. The end of one wakes it; that
// look is on time, and the next comes Late after it: 13 ms late while the
// process computed and one request held the slot, the serving path waited,
// and the level is raised.
func TestGovernorRunQuietUntilALongRequestEnds(t *testing.T) {
	var elapsed atomic.Int64 // the fake clock: 15 ms per reading
	var looks atomic.Int32
	var watched atomic.Int64
	long := make(chan struct{}, 1)
	changed := make(chan string, 4)
	g := &Governor{
		Procs: Procs{Base: 1, Serving: 2},
		Set:   func(n int) int { return n },
		Now:   func() time.Time { return time.Unix(0, elapsed.Add(int64(15*time.Millisecond))) },
		// The start, then 100 short requests, then one long one per look.
		Slots: func() SlotUse {
			switch n := looks.Add(1); n {
			case 1:
				return SlotUse{Slots: 1, InFlight: 1}
			default:
				return SlotUse{Slots: 1, InFlight: 1, Released: 100 + uint64(n) - 2}
			}
		},
		CPU:       func() time.Duration { return time.Duration(elapsed.Load()) }, // computing the whole time
		Long:      long,
		WatchLong: func(hold time.Duration) { watched.Store(int64(hold)) },
		Changed:   func(from, to int, why string) { changed <- why },
		Tick:      time.Millisecond,
		Quiet:     time.Hour,
		Late:      2 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = g.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); watched.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not watching for long requests 10 s after the start (%d looks at the slots)", looks.Load())
		}
	}
	if hold := time.Duration(watched.Load()); hold != 2*time.Millisecond {
		t.Fatalf("watching for requests held %v, want Late (2ms)", hold)
	}
	time.Sleep(50 * time.Millisecond)
	if n := looks.Load(); n != 2 {
		t.Fatalf("%d looks at the slots during the quiet period, want 2 (the start and the first Tick)", n)
	}
	long <- struct{}{}
	select {
	case why := <-changed:
		if !strings.Contains(why, "waited 13ms for a P") {
			t.Fatalf("raised because %q; want a goroutine that waited 13ms for a P", why)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("not raised 10 s after a long request ended (%d looks at the slots)", looks.Load())
	}
	if looks.Load() != 4 {
		t.Errorf("raised at look %d, want the second after the signal (4)", looks.Load())
	}
	for deadline := time.Now().Add(10 * time.Second); watched.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("still watching for long requests 10 s after the level was raised")
		}
	}
}
