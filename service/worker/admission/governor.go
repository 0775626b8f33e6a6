package admission

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Governor moves GOMAXPROCS between a Procs policy's two levels.
//
// It wakes up every Tick (every Idle while no request runs) and looks at two
// things: how late its own wake-up was, and how the admission slots were
// used since the previous one. A late wake-up alone may be the kernel giving
// the CPU to another process, or a burst of short requests; admitted
// requests holding their slots for Late or longer on average alone may be
// waiting on I/O, with the Ps free. Both at once mean the serving path
// waited behind long requests: rejections, /healthz and the watchdog probe
// wait the same way. One such wake-up at the base level raises GOMAXPROCS
// to the serving level. There, lateness says nothing (the spare P serves on
// time), so what keeps it raised is the cause itself: every slot taken by
// requests that hold it for Late or longer on average. After Hold without,
// it returns to the base (and comes back at the next late wake-up if the
// cause does). It also returns after a Window (a second) in which such
// requests filled the slots less than half of the time they were all taken:
// the spare P makes each request cost more CPU (threads and caches shared
// with the other workers, each GC's stop of the world waiting for one more
// thread), so requests just under Late looked long now and then once it
// was on, and kept it on for good. At 2 workers on 2 CPUs under /slow (an
// allocation of 800 KB and about 1 ms of work), 1 sample in 10 at the
// serving level ran 2 ms or more of CPU per finished request, and the pool
// served /slow 1.3x faster with the spare P gone a second after it came
// (docs/benchmarks.md, "The spare P that kept itself on"). Under
// /fib?n=30 (3-4 ms each) nearly every sample looks long, and it stays.
//
// Both are read against the time the process actually ran (the CPU time of
// all its threads, user and system), because a process the kernel keeps
// off the CPU, the machine being busy with other processes, finishes few
// requests and wakes up late without any request computing. Judged on the
// wall clock, its short requests looked long (as if its slots had been
// held the whole period), and on a pool of short requests the spare P came
// on within seconds and stayed (docs/benchmarks.md, "The governor on a busy
// machine"). So:
//   - a request is long when the process ran Late or more for each admitted
//     request that finished (requests per CPU millisecond, not per
//     millisecond: for a P computing a request the two are the same);
//   - a late wake-up counts only when the process ran at least as long as
//     the wake-up was late: the goroutine waited while the process's own Ps
//     ran, not for the kernel to give the process a CPU. Without it,
//     workers of a pool of 8 on 2 CPUs on new-connection load were raised
//     by periods of 12-50 ms in which each ran 2-3 ms (woken by every
//     connection on the shared socket, most accepted by other workers),
//     finished one request and woke 4-40 ms late. A worker computing one
//     request now and then (a wake-up 4.6 ms late in a period of 14.6 ms in
//     which it ran 5.6 ms) still gets the spare P, so a spike finds it there.
//     Requiring the process to have run half the period, or two such
//     wake-ups in a row, was tried: neither raised it before a spike, whose
//     rejections and /healthz then waited 100-180 ms at p99 behind the
//     first computations, against 6-25 ms.
//
// While nothing runs it sleeps Idle, and the first request admitted ends
// that sleep (Started): the signal readies its goroutine next on that P,
// and that look is judged from the admission on (how late it came, what
// the process ran, what finished). At the base level with one slot, a
// request that computes keeps it off the P until the request ends, the
// very wait a rejection or /healthz has, so a spike that finds the worker
// idle gets the spare P once its first request is done. Before, the first
// look came up to Idle into the spike, and at one P a look due on the timer
// could queue behind the connections' goroutines for up to a second
// (docs/benchmarks.md, "A spike that finds the worker idle"). Raising when
// requests find every slot taken does not work there: at one P and one
// slot, the request holding the slot also holds the P, and it ends before
// another request reaches admission.
//
// At the base level, while its looks see requests run but none long, it
// sleeps Quiet instead of Tick and has the Limiter signal the end of a
// request that held its slot Late or longer (Long); that signal ends the
// quiet period, and the next look comes Late after it, by when a following
// long request has had a P long enough to show whether the serving path
// waits. Ticking every 10 ms while short requests ran cost a pool of 8
// workers on 2 CPUs under new-connection load about 7% of its thread
// wake-ups: 1.27 per request against 1.18 with the quiet period; a pool of
// 2 read alike both ways (docs/benchmarks.md, "The governor's quiet
// period"). A computation that starts in a quiet period and runs on
// without ending waits for the next look, up to Quiet later, for the spare
// P; one that ends brings the look at once.
//
// Process CPU time was tried instead of the slots and dropped: threads in
// system calls hold no P, so on new-connection load the kernel time of
// accept4 and close made short requests look like computing Ps, and user
// time alone missed a pinned worker in a spike, whose rejections took a
// large share of its CPU while its admitted requests waited
// (docs/benchmarks.md, "The pool at every worker count: GOMAXPROCS, and the
// shared accept"). Next to the slots and the lateness it only takes raises
// away.
//
// The cost is one timer and a few atomic loads per wake-up, and a
// stop-the-world of a few microseconds at each change. A request pays one
// load (the length of Started's channel), and the first admitted after an
// idle look sends the signal: a clock read and a CPU-time read. The hold
// that ends a quiet period is measured on the clock reads every admitted
// request makes anyway (Limiter.release).
type Governor struct {
	Procs Procs
	// Slots reports the admission slots' use (Limiter.Slots); required.
	Slots func() SlotUse
	// Set applies a GOMAXPROCS value; nil means runtime.GOMAXPROCS.
	Set func(int) int
	// Now is the clock the lateness is read on; nil means time.Now.
	Now func() time.Time
	// CPU returns the CPU time the process has used so far, or a negative
	// value when it cannot be read (requests are then judged on the wall
	// clock); nil means CLOCK_PROCESS_CPUTIME_ID.
	CPU func() time.Duration
	// Started, when set, carries a request's admission (Limiter.Started):
	// it ends an idle period, and that look is judged from the admission
	// on: how late it came, what the process ran, what finished.
	Started <-chan Admission
	// Long and WatchLong, when both are set, tell of a request that
	// released its slot after holding it WatchLong's hold or longer
	// (Limiter.Long, Limiter.WatchLong). At the base level, while its looks
	// see only short requests, the Governor sleeps Quiet instead of Tick,
	// watching for the end of such a request.
	Long      <-chan struct{}
	WatchLong func(hold time.Duration)
	// Changed, when set, is told of every change and why.
	Changed func(from, to int, why string)
	// NoSpare, when set, says why the serving level must not be used now,
	// "" when it may. While it gives a reason the Governor stays at the
	// base level, looking every Quiet without watching for long requests
	// (nothing would come of them), and from the serving level it returns
	// to the base. It is asked when a raise is due and at the serving
	// level, at most once every SpareEvery; its answer is kept meanwhile
	// (a pool worker's reads the pool's size from its files).
	NoSpare func() string
	// Tick, Idle, Quiet, Late, Hold and Window default to DefaultTick,
	// DefaultIdle, DefaultQuiet, DefaultLate, DefaultHold and
	// DefaultWindow.
	Tick, Idle, Quiet, Late, Hold, Window time.Duration
}

// Defaults of a Governor's periods.
const (
	// DefaultTick is the wake-up period while requests run: a computing
	// request holds the serving path up for at most about this long (plus
	// Go's preemption) before the spare P arrives.
	DefaultTick = 10 * time.Millisecond
	// DefaultIdle is the wake-up period while no request runs.
	DefaultIdle = 100 * time.Millisecond
	// DefaultQuiet is the wake-up period at the base level while requests
	// run but none held its slot Late or longer. The end of a long request
	// (Long) cuts it short; a computation that runs longer than this without
	// ending is seen at the next wake-up.
	DefaultQuiet = 50 * time.Millisecond
	// DefaultLate is the lateness that counts as the serving path waiting,
	// and the average slot hold that counts as a long request.
	DefaultLate = 2 * time.Millisecond
	// DefaultHold is how long the slots must stop being held by long
	// requests before the spare P goes. Each return to the base under
	// CPU-bound load costs one late wake-up before the raise, so it is rare.
	DefaultHold = 10 * time.Second
	// DefaultWindow is the span over which the serving level checks that
	// long requests still fill the slots most of the time they are all
	// taken.
	DefaultWindow = time.Second
)

// SpareEvery is how long an answer of Governor.NoSpare is kept.
const SpareEvery = time.Second

// Admission is when a request was admitted: the wall clock (time.Now) and
// the process's CPU time (negative when unknown).
type Admission struct {
	At  time.Time
	CPU time.Duration
}

// SlotUse is the state of a worker's admission slots.
type SlotUse struct {
	Slots, InFlight int
	Released        uint64 // admitted requests finished so far
}

// sample is what one wake-up saw.
type sample struct {
	wall time.Duration // since the previous wake-up
	late time.Duration // how late this wake-up was
	// long: requests ran, and the process ran Late or more (CPU time) for
	// each of those that finished (fewer than ran/Late of them finished;
	// Slots*wall/Late when its CPU time is unknown).
	long bool
	// full: every slot is taken now.
	full bool
	// idle: no request ran or finished.
	idle bool
	// woken: the sample runs from a request's admission, which ended an
	// idle period; late is then the whole sample.
	woken bool
	// finished and ran: the admitted requests that finished, and the
	// process's CPU time (Slots times the wall time when unknown).
	finished uint64
	ran      time.Duration
}

// observe turns two readings of the slots wall apart, during which the
// process ran for ran (CPU time of all its threads; negative when unknown),
// into a sample's slot fields.
func observe(before, now SlotUse, wall, ran, late time.Duration) sample {
	finished := now.Released - before.Released
	s := sample{wall: wall, full: now.Slots > 0 && now.InFlight >= now.Slots, idle: finished == 0 && now.InFlight == 0}
	if ran < 0 { // as if every slot computed the whole time
		ran = time.Duration(max(now.Slots, 1)) * wall
	}
	s.long = !s.idle && float64(finished)*float64(late) < float64(ran)
	s.finished, s.ran = finished, ran
	return s
}

// governorState is the Governor's memory between wake-ups.
type governorState struct {
	procs int           // the level in force
	calm  time.Duration // time at the serving level without long requests in every slot
	// noSpare is NoSpare's last answer, asked spareAge ago (asked false:
	// never yet).
	noSpare  string
	spareAge time.Duration
	asked    bool
	// At the serving level, over the current window: its length, the time
	// every slot was taken, and the part of that with long requests.
	window, full, long time.Duration
}

// fewLong adds sample s to the serving level's window and, once the window
// is Window long, reports whether long requests filled the slots less
// than half of the time they were all taken in it. A window in which the
// slots were never all taken reports false (Hold's calm judges those). A
// window that keeps the serving level starts over; one that ends it stays
// for step's log line, and the next raise starts a new one.
func (g *Governor) fewLong(st *governorState, s sample) bool {
	st.window += s.wall
	if s.full {
		st.full += s.wall
		if s.long {
			st.long += s.wall
		}
	}
	if st.window < or(g.Window, DefaultWindow) {
		return false
	}
	few := st.full > 0 && 2*st.long < st.full
	if !few {
		st.window, st.full, st.long = 0, 0, 0
	}
	return few
}

// spareRefused returns why the serving level may not be used now ("" when
// it may), asking NoSpare when its last answer is SpareEvery old.
func (g *Governor) spareRefused(st *governorState) string {
	if g.NoSpare == nil {
		return ""
	}
	if !st.asked || st.spareAge >= SpareEvery {
		st.noSpare, st.spareAge, st.asked = g.NoSpare(), 0, true
	}
	return st.noSpare
}

// step decides the level after sample s; it returns why the level changed
// ("" when it did not).
func (g *Governor) step(st *governorState, s sample) (why string) {
	p := g.Procs
	// waited: the serving path waited for a P behind long requests, the
	// process running at least as long as the wake-up was late (within a
	// period that also holds the sleep); woken by an admission, the whole
	// sample is the wait, and the process must have run half of it.
	need := s.late
	if s.woken {
		need = s.late / 2
	}
	waited := s.long && s.late >= g.late() && s.ran >= need
	st.spareAge += s.wall
	switch {
	case st.procs == p.Base && waited && g.spareRefused(st) == "":
		st.procs, st.calm = p.Serving, 0
		st.window, st.full, st.long = 0, 0, 0
		return fmt.Sprintf("requests held their slots %v or more on average (the last %d in %v of CPU time, %v of wall time) and a goroutine waited %v for a P",
			g.late(), s.finished, s.ran.Round(100*time.Microsecond), s.wall.Round(100*time.Microsecond), s.late.Round(100*time.Microsecond))
	case st.procs == p.Serving && g.spareRefused(st) != "":
		st.procs, st.calm = p.Base, 0
		return st.noSpare
	case st.procs == p.Serving && g.fewLong(st, s):
		why := fmt.Sprintf("requests holding their slots %v or more filled them %.0f%% of the %v they were all taken in the last %v",
			g.late(), 100*float64(st.long)/float64(st.full), st.full.Round(time.Millisecond), st.window.Round(time.Millisecond))
		st.procs, st.calm = p.Base, 0
		return why
	case st.procs == p.Serving && s.long && s.full:
		st.calm = 0
	case st.procs == p.Serving:
		if st.calm += s.wall; st.calm >= g.hold() {
			st.procs, st.calm = p.Base, 0
			return fmt.Sprintf("no long requests in every slot for %v", g.hold())
		}
	}
	return ""
}

// A period is what the Governor sleeps on until its next look.
type period int

const (
	ticking period = iota // Tick, or until a look is due
	idle                  // Idle, or until an admission (Started)
	quiet                 // Quiet, or until a long request ends (Long)
)

// period is how long to sleep after sample s, and what else ends the sleep.
func (g *Governor) period(st *governorState, s sample) (time.Duration, period) {
	switch {
	case st.procs != g.Procs.Base:
		return or(g.Tick, DefaultTick), ticking // counting the calm
	case s.idle:
		return or(g.Idle, DefaultIdle), idle
	case st.asked && st.noSpare != "":
		return or(g.Quiet, DefaultQuiet), ticking // no level to raise to: look seldom
	case !s.long && g.Long != nil && g.WatchLong != nil:
		return or(g.Quiet, DefaultQuiet), quiet
	}
	return or(g.Tick, DefaultTick), ticking
}

// Run applies the base level and governs until ctx ends. With Base ==
// Serving, or without Slots, it only applies the base. It returns ctx's
// error.
func (g *Governor) Run(ctx context.Context) error {
	set, now, cpu := g.Set, g.Now, g.CPU
	if set == nil {
		set = runtime.GOMAXPROCS
	}
	if now == nil {
		now = time.Now
	}
	if cpu == nil {
		cpu = processCPU
	}
	st := &governorState{procs: g.Procs.Base}
	if was := set(st.procs); was != st.procs && g.Changed != nil {
		g.Changed(was, st.procs, "the base level: as many Ps as admission slots")
	}
	if g.Procs.Serving == g.Procs.Base || g.Slots == nil {
		return nil
	}
	lastSlots, last, lastCPU, wait := g.Slots(), now(), cpu(), or(g.Tick, DefaultTick)
	t := time.NewTimer(wait)
	defer t.Stop()
	var started <-chan Admission // listened to during an idle period only
	var long <-chan struct{}     // listened to during a quiet period only
	defer g.watch(false)
	for {
		// The sample runs from the previous look, and the wake-up is due a
		// wait after it; or, woken by an admission, both run from the
		// admission (a signal older than the previous look is stale); or,
		// woken by the end of a long request, it is on time.
		since, sinceCPU, due, woken, ended := last, lastCPU, last.Add(wait), false, false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case a := <-started:
			t.Stop()
			if due = last; !a.At.Before(last) {
				since, sinceCPU, due, woken = a.At, a.CPU, a.At, true
			}
		case <-long:
			t.Stop()
			ended = true
		}
		at, slots, used := now(), g.Slots(), cpu()
		if ended {
			due = at
		}
		ran := time.Duration(-1)
		if used >= 0 && sinceCPU >= 0 {
			ran = used - sinceCPU
		}
		s := observe(lastSlots, slots, at.Sub(since), ran, g.late())
		s.late, s.woken = at.Sub(due), woken
		last, lastSlots, lastCPU = at, slots, used
		from := st.procs
		if why := g.step(st, s); why != "" {
			set(st.procs)
			if g.Changed != nil {
				g.Changed(from, st.procs, why)
			}
		}
		var next period
		if wait, next = g.period(st, s); ended {
			// A long request just ended: look again soon, and judge from
			// there whether the next ones wait for a P.
			wait, next = g.late(), ticking
		}
		started, long = nil, nil
		switch next {
		case idle:
			started = g.Started
		case quiet:
			long = g.Long
		}
		g.watch(next == quiet)
		t.Reset(wait)
	}
}

// watch turns the limiter's signal of long requests on or off. A signal
// left from an earlier quiet period is dropped when a new one begins.
func (g *Governor) watch(on bool) {
	if g.Long == nil || g.WatchLong == nil {
		return
	}
	if !on {
		g.WatchLong(0)
		return
	}
	select {
	case <-g.Long:
	default:
	}
	g.WatchLong(g.late())
}

// processCPU is the CPU time of every thread of the process so far, or -1
// when it cannot be read.
func processCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return -1
	}
	return time.Duration(ts.Nano())
}

func (g *Governor) late() time.Duration { return or(g.Late, DefaultLate) }
func (g *Governor) hold() time.Duration { return or(g.Hold, DefaultHold) }

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
