package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
	"github.com/clusterapp/clusterapp/service/worker/crashloop"
)

// StartPlan times the two moments an operator waits for the pool, with the
// clocks inside the box (the shell's, and systemd's own journal
// timestamps), never by polling the box while it happens (polling takes
// the CPUs the start needs: a kill measured while the box was polled read
// 190-270 ms against 113-130 ms):
//   - a cold start: every unit stopped, then `systemctl start` of both
//     sockets and a GET of `/` from the same shell, timed to its 200's
//     status line; the first worker's "Starting" and "Started" (READY=1)
//     lines on the same clock;
//   - a replacement: `kill -9` of worker 1, from systemd's "Main process
//     exited" line to the new process's "Started" line, each kill after the
//     worker has served longer than crashloop.StableAfter (a lone crash, no
//     back-off).
//
// The cold starts are timed last in the run, after the load, and, with
// EarlyStarts, first too, in the box just booted: a machine's boot is the
// one, 13 minutes of load the other, and the two read 84-100 and 111-141 ms
// in separate boxes on 2026-12-05, when the machine's speed also moved by
// the hour (docs/benchmarks.md, notes). Only one run's two readings share
// the machine's moment.
type StartPlan struct {
	Config Configuration // the pool (N workers at the defaults)
	Starts int           // cold starts last in the run; default 1
	// EarlyStarts are cold starts first in the run, before any load; 0:
	// none. The target judges Starts.
	EarlyStarts int
	Kills       int // kills of worker 1; default 1
	// KillAfter is how long worker 1 serves before each kill (default
	// crashloop.StableAfter and a second); ReadAfter how long the box is
	// left to itself after the kill before anything reads it (default 2 s).
	KillAfter, ReadAfter time.Duration
}

// StartResult is the cold starts and the replacements.
type StartResult struct {
	Workers int
	Starts  []StartRun
	// EarlyStarts were timed first in the run, in the box just booted.
	EarlyStarts []StartRun `json:",omitempty"`
	// Kills: from "Main process exited" to the replacement's READY=1.
	Kills []time.Duration
}

// StartRun is one cold start, each time from `systemctl start`.
type StartRun struct {
	FirstOK  time.Duration // a client already running has the status line of a 200
	Starting time.Duration // worker 1 is "Starting" (the first connection reached systemd)
	Ready    time.Duration // worker 1 sent READY=1 ("Started")
}

// errJournal says the journal lacked a line a timing needs.
var errJournal = errors.New("bench: the journal lacks the line")

// coldStartScript stops everything, then prints "result <HTTP code> <ns
// before systemctl start> <ns at the status line>" (Exec returns stderr
// too, where systemctl warns that a stopped worker can still be
// activated). It runs in bash, and the client is bash itself: it connects
// through /dev/tcp, writes the request and reads the status line, and
// $EPOCHREALTIME reads the clock, so nothing between the two readings
// starts a process but systemctl. Run with curl and date, the same start
// read 172-182 ms against 131-139 ms (3 alternating starts each): curl's
// and date's own start-up, not the service's. The sockets keep systemd's
// default start limit (5 starts in 10 s), which the fifth start in a row
// hit: reset-failed clears it.
var coldStartScript = `systemctl stop ` + config.TargetUnit + ` '` + config.WorkerPattern + `' ` + config.SocketUnit + ` ` + config.MetricsSocketUnit + ` 2>/dev/null
systemctl reset-failed ` + config.SocketUnit + ` ` + config.MetricsSocketUnit + ` 2>/dev/null
sleep 1
export LC_ALL=C
t0=$EPOCHREALTIME
systemctl start ` + config.SocketUnit + ` ` + config.MetricsSocketUnit + `
exec 3<>/dev/tcp/` + serviceHost + `/` + servicePort + ` || exit 1
printf 'GET / HTTP/1.1\r\nHost: ` + serviceHost + `\r\nConnection: close\r\n\r\n' >&3
IFS= read -r -t 10 status <&3
t1=$EPOCHREALTIME
exec 3<&-
set -- $status
echo "result ${2:-none} ${t0/./}000 ${t1/./}000"`

// serviceHost and servicePort are sandbox.URL's, for bash's /dev/tcp.
var serviceHost, servicePort = func() (string, string) {
	u, err := url.Parse(sandbox.URL)
	if err != nil {
		panic(err) // a constant
	}
	return u.Hostname(), u.Port()
}()

// killScript kills the unit $1's main process and prints "result <ns
// before the kill>"; it does not wait for the replacement (the caller
// sleeps, then reads the journal).
const killScript = `pid=$(systemctl show -P MainPID "$1")
[ "$pid" -gt 0 ] 2>/dev/null || { echo "no main process" >&2; exit 1; }
t0=$(date +%s%N)
kill -9 "$pid"
echo "result $t0"`

func (r *Runner) startup(ctx context.Context, plan Plan) (*StartResult, error) {
	sp := plan.Start
	workers, err := sp.Config.Workers(plan.CPUs)
	if err != nil {
		return nil, err
	}
	r.logf(">> start and replacement: %d workers, %d cold starts, %d kills of worker 1", workers, max(sp.Starts, 1), max(sp.Kills, 1))
	if err := r.apply(ctx, sp.Config, workers); err != nil {
		return nil, err
	}
	res := &StartResult{Workers: workers}
	unit := config.WorkerUnit(1)
	if res.Starts, err = r.coldStarts(ctx, max(sp.Starts, 1), workers); err != nil {
		return nil, err
	}
	for range max(sp.Kills, 1) {
		// Past StableAfter, so the worker's crash-loop pacing sees a lone
		// crash and restarts it at once.
		if err := sleep(ctx, sp.killAfter()); err != nil {
			return nil, err
		}
		out, err := r.Box.Exec(ctx, time.Minute, "sh", "-c", killScript, "kill", unit)
		if err != nil {
			return nil, fmt.Errorf("kill %s: %w", unit, err)
		}
		f := resultFields(out)
		if len(f) != 1 {
			return nil, fmt.Errorf("kill %s: unexpected output %q", unit, out)
		}
		t0, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("kill %s: unexpected output %q", unit, out)
		}
		if err := sleep(ctx, orDefault(sp.ReadAfter, 2*time.Second)); err != nil {
			return nil, err
		}
		if err := r.Box.WaitReady(ctx, workers, defaultReadyTimeout); err != nil {
			return nil, fmt.Errorf("after killing %s: %w", unit, err)
		}
		lines, err := r.journalSince(ctx, unit, t0)
		if err != nil {
			return nil, err
		}
		exited, err := lineAfter(lines, "Main process exited", t0)
		if err != nil {
			return nil, fmt.Errorf("kill %s: %w", unit, err)
		}
		ready, err := lineAfter(lines, "Started "+unit, exited)
		if err != nil {
			return nil, fmt.Errorf("kill %s: %w", unit, err)
		}
		res.Kills = append(res.Kills, time.Duration(ready-exited))
		r.logf("   kill -9 of %s: READY=1 %v after the exit", unit, Millis(time.Duration(ready-exited)))
	}
	return res, nil
}

// earlyStarts times plan.Start.EarlyStarts cold starts of its pool, for Run
// to call first, before any load; nil without any.
func (r *Runner) earlyStarts(ctx context.Context, plan Plan) ([]StartRun, error) {
	sp := plan.Start
	if sp == nil || sp.EarlyStarts < 1 {
		return nil, nil
	}
	workers, err := sp.Config.Workers(plan.CPUs)
	if err != nil {
		return nil, err
	}
	r.logf(">> cold starts first in the run, the box just booted: %d workers, %d cold starts", workers, sp.EarlyStarts)
	if err := r.apply(ctx, sp.Config, workers); err != nil {
		return nil, err
	}
	return r.coldStarts(ctx, sp.EarlyStarts, workers)
}

// coldStarts times n cold starts of the pool of workers applied.
func (r *Runner) coldStarts(ctx context.Context, n, workers int) ([]StartRun, error) {
	unit := config.WorkerUnit(1)
	var runs []StartRun
	for range n {
		out, err := r.Box.Exec(ctx, time.Minute, "bash", "-c", coldStartScript)
		if err != nil {
			return nil, fmt.Errorf("cold start: %w", err)
		}
		f := resultFields(out)
		if len(f) != 3 || f[0] != "200" {
			return nil, fmt.Errorf("%w: cold start: GET / gave %q", ErrNoResponses, out)
		}
		t0, err1 := strconv.ParseInt(f[1], 10, 64)
		t1, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("cold start: unexpected output %q", out)
		}
		if err := r.Box.WaitReady(ctx, workers, defaultReadyTimeout); err != nil {
			return nil, fmt.Errorf("cold start: %w", err)
		}
		lines, err := r.journalSince(ctx, unit, t0)
		if err != nil {
			return nil, err
		}
		starting, err1 := lineAfter(lines, "Starting "+unit, t0)
		ready, err2 := lineAfter(lines, "Started "+unit, t0)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("cold start: %w", err)
		}
		run := StartRun{FirstOK: time.Duration(t1 - t0), Starting: time.Duration(starting - t0), Ready: time.Duration(ready - t0)}
		runs = append(runs, run)
		r.logf("   cold start: first 200 after %v (worker 1 starting at %v, READY=1 at %v)", Millis(run.FirstOK), Millis(run.Starting), Millis(run.Ready))
	}
	return runs, nil
}

// resultFields returns the fields after "result" on a script's last
// result line (nil without one).
func resultFields(out string) []string {
	var fields []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "result" {
			fields = f[1:]
		}
	}
	return fields
}

// journalSince returns unit's journal lines from ns (Unix nanoseconds) on,
// each with its realtime timestamp: "<seconds>.<micros> <host> <text>".
func (r *Runner) journalSince(ctx context.Context, unit string, ns int64) (string, error) {
	since := fmt.Sprintf("@%d.%06d", ns/1e9, ns%1e9/1e3)
	out, err := r.Box.Exec(ctx, 30*time.Second, "journalctl", "-q", "--no-pager", "-o", "short-unix", "-u", unit, "--since", since)
	if err != nil {
		return "", fmt.Errorf("journal of %s: %w", unit, err)
	}
	return out, nil
}

// lineAfter returns the timestamp (Unix nanoseconds) of the first journal
// line at or after ns that contains text.
func lineAfter(journal, text string, ns int64) (int64, error) {
	for _, line := range strings.Split(journal, "\n") {
		stamp, rest, ok := strings.Cut(line, " ")
		if !ok || !strings.Contains(rest, text) {
			continue
		}
		secs, frac, _ := strings.Cut(stamp, ".")
		s, err1 := strconv.ParseInt(secs, 10, 64)
		us, err2 := strconv.ParseInt((frac + "000000")[:6], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if t := s*1e9 + us*1e3; t >= ns-1e3 { // the journal keeps microseconds
			return t, nil
		}
	}
	return 0, fmt.Errorf("%w %q", errJournal, text)
}

// killAfter is KillAfter or its default.
func (sp *StartPlan) killAfter() time.Duration {
	return orDefault(sp.KillAfter, crashloop.StableAfter+time.Second)
}

// orDefault is d, or def when d is not positive.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// WriteStart writes the cold starts and the replacements, with their
// medians against issue 12's targets.
func WriteStart(w io.Writer, res *Results) {
	p := asPrinter(w)
	s := res.Start
	if len(s.EarlyStarts) > 0 {
		p.printf("Cold starts first in the run, in the box just booted, before any load (as at a machine's boot; not judged):\n\n")
		writeColdStarts(p, s.EarlyStarts)
		p.printf("Cold starts last in the run, after the load (issue 12's target judges these):\n\n")
	}
	writeColdStarts(p, s.Starts)
	p.printf("| kill -9 of worker 1 | exit to READY=1 |\n|---|---|\n")
	var kills []float64
	for i, k := range s.Kills {
		p.printf("| %d | %s |\n", i+1, Millis(k))
		kills = append(kills, float64(k))
	}
	p.printf("| median | **%s** |\n", Millis(time.Duration(median(kills))))
}

// writeColdStarts is a table of cold starts and their medians.
func writeColdStarts(p *printer, runs []StartRun) {
	p.printf("| cold start | first 200 | worker 1 \"Starting\" | worker 1 READY=1 |\n|---|---|---|---|\n")
	var first, starting, ready []float64
	for i, run := range runs {
		p.printf("| %d | %s | %s | %s |\n", i+1, Millis(run.FirstOK), Millis(run.Starting), Millis(run.Ready))
		first, starting, ready = append(first, float64(run.FirstOK)), append(starting, float64(run.Starting)), append(ready, float64(run.Ready))
	}
	p.printf("| median | **%s** | %s | %s |\n\n", Millis(time.Duration(median(first))), Millis(time.Duration(median(starting))), Millis(time.Duration(median(ready))))
}
