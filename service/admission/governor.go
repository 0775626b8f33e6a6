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
// It wakes up every Tick (every Idle while the process is mostly idle) and
// looks at two things: how late its own wake-up was, and how much CPU time
// the process used in user mode (running Go code) since the previous one. A late wake-up alone may be the
// kernel giving the CPU to another process; heavy CPU use alone may be many
// short requests, between which the serving path gets its turn. Both at once
// mean that every P kept running something long enough to leave a runnable
// goroutine waiting: rejections, /healthz and the watchdog probe wait the
// same way. One such wake-up at the base level raises GOMAXPROCS to the
// serving level. There, lateness says nothing (the spare P serves on time),
// so what keeps it raised is the cause itself: the base Ps' worth of CPU in
// use and, when Slots is set, every admission slot taken by requests that
// hold it for Late or longer on average. After Hold without, it returns to
// the base (and comes back at the next late wake-up if the cause does).
//
// The cost is one timer and one getrusage per wake-up, and a stop-the-world of a few microseconds at each change; no
// request does any work for it.
type Governor struct {
	Procs Procs
	// Set applies a GOMAXPROCS value; nil means runtime.GOMAXPROCS.
	Set func(int) int
	// CPU returns the process's CPU time in user mode; nil means getrusage.
	CPU func() (time.Duration, error)
	// Now is the clock the lateness is read on; nil means time.Now.
	Now func() time.Time
	// Slots, when set, reports the admission slots' use (Limiter.Slots).
	Slots func() SlotUse
	// Changed, when set, is told of every change and why.
	Changed func(from, to int, why string)
	// Tick, Idle, Late and Hold default to DefaultTick, DefaultIdle,
	// DefaultLate and DefaultHold.
	Tick, Idle, Late, Hold time.Duration
}

// Defaults of a Governor's periods.
const (
	// DefaultTick is the wake-up period while the process is busy: a
	// computing request holds the serving path up for at most about this
	// long (plus Go's preemption) before the spare P arrives.
	DefaultTick = 10 * time.Millisecond
	// DefaultIdle is the wake-up period while the process uses less than a
	// tenth of its base Ps.
	DefaultIdle = 100 * time.Millisecond
	// DefaultLate is the lateness that counts as the serving path waiting.
	DefaultLate = 2 * time.Millisecond
	// DefaultHold is how long the base Ps must stay below busy before the
	// spare P goes. Each return to the base under CPU-bound load costs one
	// late wake-up before the raise, so it is rare.
	DefaultHold = 10 * time.Second
)

// busyShare of the base Ps' time in use counts as every base P busy.
const busyShare = 0.9

// idleShare of the base Ps' time or less lets the governor wake up less often.
const idleShare = 0.1

// SlotUse is the state of a worker's admission slots.
type SlotUse struct {
	Slots, InFlight int
	Released        uint64 // admitted requests finished so far
}

// sample is what one wake-up saw.
type sample struct {
	wall time.Duration // since the previous wake-up
	cpu  time.Duration // process CPU time used in wall
	late time.Duration // how late this wake-up was
	// held says every slot was taken at this wake-up by requests that held
	// their slot for Late or more on average since the previous one; true
	// when the slots are not known.
	held bool
}

// governorState is the Governor's memory between wake-ups.
type governorState struct {
	procs int           // the level in force
	calm  time.Duration // time at the serving level without busy base Ps
}

// step decides the level after sample s: the new level, and why it changed
// ("" when it did not).
func (g *Governor) step(st *governorState, s sample) (why string) {
	p := g.Procs
	busy := s.wall > 0 && float64(s.cpu) >= busyShare*float64(p.Base)*float64(s.wall)
	switch {
	case st.procs == p.Base && busy && s.late >= g.late():
		st.procs, st.calm = p.Serving, 0
		return fmt.Sprintf("every P computed for %v and a goroutine waited %v for one", s.wall.Round(time.Millisecond), s.late.Round(100*time.Microsecond))
	case st.procs == p.Serving && busy && s.held:
		st.calm = 0
	case st.procs == p.Serving:
		if st.calm += s.wall; st.calm >= g.hold() {
			st.procs, st.calm = p.Base, 0
			return fmt.Sprintf("no slot-holding computation kept the base Ps busy for %v", g.hold())
		}
	}
	return ""
}

// period is how long to sleep after sample s.
func (g *Governor) period(st *governorState, s sample) time.Duration {
	if st.procs == g.Procs.Base && s.wall > 0 && float64(s.cpu) <= idleShare*float64(g.Procs.Base)*float64(s.wall) {
		return or(g.Idle, DefaultIdle)
	}
	return or(g.Tick, DefaultTick)
}

// Run applies the base level and governs until ctx ends. With Base ==
// Serving it only applies the base. It returns ctx's error, or the CPU
// clock's when it cannot be read at all (the base level stays).
func (g *Governor) Run(ctx context.Context) error {
	set, cpuTime, now := g.Set, g.CPU, g.Now
	if set == nil {
		set = runtime.GOMAXPROCS
	}
	if cpuTime == nil {
		cpuTime = processCPU
	}
	if now == nil {
		now = time.Now
	}
	st := &governorState{procs: g.Procs.Base}
	if was := set(st.procs); was != st.procs && g.Changed != nil {
		g.Changed(was, st.procs, "the base level: as many Ps as admission slots")
	}
	if g.Procs.Serving == g.Procs.Base {
		return nil
	}
	lastCPU, err := cpuTime()
	if err != nil {
		return fmt.Errorf("GOMAXPROCS governor: process CPU time: %w", err)
	}
	var lastSlots SlotUse
	if g.Slots != nil {
		lastSlots = g.Slots()
	}
	last, wait := now(), or(g.Tick, DefaultTick)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		at := now()
		used, err := cpuTime()
		if err != nil {
			return fmt.Errorf("GOMAXPROCS governor: process CPU time: %w", err)
		}
		s := sample{wall: at.Sub(last), cpu: used - lastCPU, late: at.Sub(last) - wait, held: true}
		if g.Slots != nil {
			now := g.Slots()
			s.held = slotsHeld(lastSlots, now, s.wall, g.late())
			lastSlots = now
		}
		last, lastCPU = at, used
		from := st.procs
		if why := g.step(st, s); why != "" {
			set(st.procs)
			if g.Changed != nil {
				g.Changed(from, st.procs, why)
			}
		}
		wait = g.period(st, s)
		t.Reset(wait)
	}
}

// slotsHeld says whether every slot is taken now by requests holding them
// for at least hold on average over wall: fewer than Slots*wall/hold of them
// finished in the meantime.
func slotsHeld(before, now SlotUse, wall, hold time.Duration) bool {
	if now.Slots == 0 || now.InFlight < now.Slots {
		return false
	}
	finished := now.Released - before.Released
	return float64(finished)*float64(hold) < float64(now.Slots)*float64(wall)
}

func (g *Governor) late() time.Duration { return or(g.Late, DefaultLate) }
func (g *Governor) hold() time.Duration { return or(g.Hold, DefaultHold) }

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// processCPU is the user CPU time of every thread of this process. Time in
// the kernel is left out: a thread in accept4, read or close holds no P, so
// many short requests on new connections would otherwise look like Ps
// computing (at 2 workers on 2 CPUs they raised GOMAXPROCS under `/` load).
func processCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano()), nil
}
