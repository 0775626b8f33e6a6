// Package liveness tells whether a running worker makes progress, from
// what an operator command can read without the worker's help: systemd's
// record of the worker's last watchdog ping (the unit's
// WatchdogTimestampMonotonic and WatchdogUSec properties) and the process
// state in /proc/PID/stat.
//
// systemd calls a frozen (SIGSTOP) or deadlocked worker active/running
// until its watchdog fires, WatchdogSec= after the last ping; status and
// doctor, reading only the unit's state, called it healthy until then. The
// worker pings only after a health probe through its handler stack passes
// (package watchdog), so a ping older than watchdog.LateAfter means the
// worker is not answering, whatever the cause. A process stopped by a
// signal or a debugger (state T or t) is named as such at once, before its
// ping is late.
package liveness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/ops/units"
	"github.com/clusterapp/clusterapp/service/worker/watchdog"
	"golang.org/x/sys/unix"
)

// States of a Verdict.
const (
	OK      = "ok"      // pinging on time, not stopped
	Stopped = "stopped" // stopped by a signal or a debugger
	Stalled = "stalled" // running, but no watchdog ping for watchdog.LateAfter
	Unknown = "-"       // not running, or systemd keeps no watchdog for it
)

// Facts are the readings Judge needs about one worker.
type Facts struct {
	Running bool          // active/running with a main process
	PID     int           // the main process
	Timeout time.Duration // WatchdogSec=, 0 when off
	// LastPing is the CLOCK_MONOTONIC time of the last ping systemd
	// received (or of READY=1, which starts the watchdog); 0 for none.
	LastPing time.Duration
	// LastPingAt is the same moment on the wall clock, to say since when.
	LastPingAt time.Time
	// ProcState is the state letter of /proc/PID/stat; 0 when unread.
	ProcState byte
	// Now is CLOCK_MONOTONIC at the reading; 0 when it could not be read.
	Now time.Duration
}

// Verdict is what Judge concludes.
type Verdict struct {
	State string `json:"state"` // OK, Stopped, Stalled or Unknown
	// PingAgeSec is the time since the last watchdog ping; nil when unknown.
	PingAgeSec *float64 `json:"ping_age_sec"`
	// Problem says what is wrong, and since when, in a sentence; empty when
	// State is OK or Unknown.
	Problem string `json:"problem,omitempty"`
	// KillInSec is how long until systemd's watchdog kills the worker, if
	// it does not ping again; nil when unknown.
	KillInSec *float64 `json:"kill_in_sec,omitempty"`
}

// Healthy reports whether the verdict is not a problem (OK or Unknown).
func (v Verdict) Healthy() bool { return v.State == OK || v.State == Unknown }

// FactsOf takes a worker's facts from its unit, with the clock and process
// state read by the caller.
func FactsOf(w units.Worker, now time.Duration, procState byte) Facts {
	return Facts{
		Running: w.ActiveState == "active" && w.SubState == "running" && w.PID > 0,
		PID:     w.PID, Timeout: w.Watchdog, LastPing: w.LastPingMono, LastPingAt: w.LastPing,
		ProcState: procState, Now: now,
	}
}

// Judge is the verdict on f.
func Judge(f Facts) Verdict {
	if !f.Running {
		return Verdict{State: Unknown}
	}
	v := Verdict{State: OK}
	var age time.Duration
	known := f.Timeout > 0 && f.LastPing > 0 && f.Now > 0
	if known {
		age = max(f.Now-f.LastPing, 0)
		a, k := age.Seconds(), max(f.Timeout-age, 0).Seconds()
		v.PingAgeSec, v.KillInSec = &a, &k
	}
	stopped := f.ProcState == 'T' || f.ProcState == 't'
	late := known && age > watchdog.LateAfter(f.Timeout)
	switch {
	case stopped && late:
		v.State = Stopped
		v.Problem = fmt.Sprintf("%s; %s; %s", noPing(f, age), stoppedBy(f.ProcState), killIn(f, age))
	case stopped && known:
		v.State = Stopped
		v.Problem = fmt.Sprintf("%s; last watchdog ping %s ago; %s", stoppedBy(f.ProcState), round(age), killIn(f, age))
	case stopped:
		v.State = Stopped
		v.Problem = stoppedBy(f.ProcState)
	case late:
		v.State = Stalled
		v.Problem = fmt.Sprintf("%s: its health probe does not pass (hung?); %s", noPing(f, age), killIn(f, age))
	}
	return v
}

func noPing(f Facts, age time.Duration) string {
	interval, _ := watchdog.Every(f.Timeout)
	since := ""
	if !f.LastPingAt.IsZero() {
		since = "since " + f.LastPingAt.Local().Format("15:04:05") + ", "
	}
	return fmt.Sprintf("no watchdog ping for %s (%sexpected every %s)", round(age), since, round(interval))
}

func stoppedBy(state byte) string {
	if state == 't' {
		return "stopped by a debugger (process state t, traced)"
	}
	return "stopped by a signal (process state T: SIGSTOP, SIGTSTP?)"
}

func killIn(f Facts, age time.Duration) string {
	if left := f.Timeout - age; left > 0 {
		return fmt.Sprintf("systemd's watchdog kills it in %s (WatchdogSec=%s)", round(left), f.Timeout)
	}
	return fmt.Sprintf("systemd's watchdog is due to kill it (WatchdogSec=%s)", f.Timeout)
}

func round(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

// Read judges w as it is now: it reads CLOCK_MONOTONIC and the process
// state from /proc. A reading that fails leaves its fact unknown.
func Read(w units.Worker) Verdict {
	now, _ := Now()
	state, _ := ProcState(w.PID)
	return Judge(FactsOf(w, now, state))
}

// Now returns CLOCK_MONOTONIC, the clock of systemd's *Monotonic
// timestamps; (0, err) when it cannot be read.
func Now() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("read CLOCK_MONOTONIC: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

// ProcState returns the state letter of /proc/PID/stat (R, S, D, T, t,
// Z, ...); (0, err) when the file cannot be read or parsed.
func ProcState(pid int) (byte, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("process state of pid %d: no such process", pid)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("process state: %w", err)
	}
	return ParseProcState(string(b))
}

// ParseProcState returns the state field of a /proc/PID/stat line. The
// command name before it is in parentheses and may hold spaces and
// parentheses itself, so the state is found after the last ')'.
func ParseProcState(stat string) (byte, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) || stat[i+1] != ' ' {
		return 0, fmt.Errorf("parse /proc/PID/stat: no state after the command name in %.60q", stat)
	}
	return stat[i+2], nil
}
