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
//   - a cold start: every unit stopped, then `systemctl start` of the
//     service socket and a GET of `/` from the same shell, timed to its 200's
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
//
// With Bare, each cold start of the pool is followed by one of bare
// net/http (the plan's bare anchor) socket-activated in units derived from
// the shipped ones (BareUnits: the same hardening, the same socket
// settings), timed by the same script: the outside anchor for the start,
// read at the same moment as the pool's, since the machine's speed moves a
// start by a fifth from one hour to the next.
type StartPlan struct {
	Config Configuration // the pool (N workers at the defaults)
	Starts int           // cold starts last in the run; default 1
	// EarlyStarts are cold starts first in the run, before any load; 0:
	// none. The target judges Starts.
	EarlyStarts int
	// Bare: a cold start of bare net/http in the worker's unit after each
	// of the pool's, early and last; skipped, with the reason, when the
	// plan has no bare anchor.
	Bare  bool
	Kills int // kills of worker 1; default 1
	// KillAfter is how long worker 1 serves before each kill (default
	// crashloop.StableAfter and a second); ReadAfter how long the box is
	// left to itself after the kill before anything reads it (default 2 s).
	KillAfter, ReadAfter time.Duration
}

// StartResult is the cold starts and the replacements.
type StartResult struct {
	Workers int
	Starts  []StartRun
	// EarlyStarts were timed first in the run, in the box just booted,
	// EarlyBareStarts with them as BareStarts are with Starts.
	EarlyStarts     []StartRun `json:",omitempty"`
	EarlyBareStarts []StartRun `json:",omitempty"`
	// BareStarts: bare net/http in the worker's unit, BareStarts[i] just
	// after Starts[i] (FirstOK, and Starting from its unit's first line;
	// it sends no READY=1).
	// BareSkipped says why there are none when the plan asked for them.
	BareStarts  []StartRun `json:",omitempty"`
	BareSkipped string     `json:",omitempty"`
	// Kills: from "Main process exited" to the replacement's READY=1.
	Kills []time.Duration
}

// StartRun is one cold start, each time from `systemctl start`.
type StartRun struct {
	FirstOK time.Duration // a client already running has the status line of a 200
	// Listening: `systemctl start` returned, the sockets listen (systemd
	// binds each IP socket in a process it forks for it). The client
	// connects next; "Starting" is systemd taking that connection up.
	Listening time.Duration `json:",omitempty"`
	Starting  time.Duration // worker 1 is "Starting" (the first connection reached systemd)
	Ready     time.Duration // worker 1 sent READY=1 ("Started")
}

// errJournal says the journal lacked a line a timing needs.
var errJournal = errors.New("bench: the journal lacks the line")

// coldStartScript stops the units in stop, then prints "result <HTTP
// code> <ns before systemctl start> <ns at the status line> <ns when
// systemctl start returned>" for a GET of `/` on host:port after
// `systemctl start` of the units in start (Exec
// returns stderr too, where systemctl warns that a stopped worker can
// still be activated). It runs in bash, and the client is bash itself: it
// connects through /dev/tcp, writes the request and reads the status line,
// and $EPOCHREALTIME reads the clock, so nothing between the two readings
// starts a process but systemctl. Run with curl and date, the same start
// read 172-182 ms against 131-139 ms (3 alternating starts each): curl's
// and date's own start-up, not the service's. The sockets keep systemd's
// default start limit (5 starts in 10 s), which the fifth start in a row
// hit: reset-failed clears it (unit names only: the list may hold a
// pattern, which is quoted).
func coldStartScript(stop, start []string, host, port string) string {
	return `systemctl stop ` + quoteUnits(stop) + ` 2>/dev/null
systemctl reset-failed ` + joinUnits(start) + ` 2>/dev/null
sleep 1
export LC_ALL=C
t0=$EPOCHREALTIME
systemctl start ` + joinUnits(start) + `
tl=$EPOCHREALTIME
exec 3<>/dev/tcp/` + host + `/` + port + ` || exit 1
printf 'GET / HTTP/1.1\r\nHost: ` + host + `\r\nConnection: close\r\n\r\n' >&3
IFS= read -r -t 10 status <&3
t1=$EPOCHREALTIME
exec 3<&-
set -- $status
echo "result ${2:-none} ${t0/./}000 ${t1/./}000 ${tl/./}000"`
}

// quoteUnits is units for a shell command line, each quoted (a pattern
// such as clusterapp-worker@* must reach systemctl unexpanded).
func quoteUnits(units []string) string {
	quoted := make([]string, len(units))
	for i, u := range units {
		quoted[i] = "'" + u + "'"
	}
	return strings.Join(quoted, " ")
}

// joinUnits is unit names (no pattern) for a command line.
func joinUnits(units []string) string { return strings.Join(units, " ") }

// starter is what a cold start starts: the pool, or bare in the worker's
// unit.
type starter struct {
	name   string // for the log
	script string // coldStartScript's
	unit   string // whose journal times the start: "Starting", and "Started" when ready
	// ready: unit is Type=notify, its "Started" line is READY=1. Otherwise
	// a unit may go from inactive to active without a "Starting" line
	// (Type=simple is active once forked), and "Started" stands for it.
	ready bool
}

// poolStopped are the pool's units a cold start stops first (a pattern
// among them); ColdStartUnits what it starts and times, the service socket,
// as issue 12's target reads ("from `systemctl start clusterapp.socket` to
// the first 200"); coldStartAfter what it starts once that is timed, the
// metrics socket, which no worker waits for (its exporter is a unit of its
// own), so that every later measurement finds both shipped sockets up.
var (
	poolStopped    = []string{config.TargetUnit, config.WorkerPattern, config.SocketUnit, config.MetricsSocketUnit}
	ColdStartUnits = []string{config.SocketUnit}
	coldStartAfter = "\nsystemctl start " + config.MetricsSocketUnit + " || true"
)

// poolStarter starts the suite's sockets (the pool is socket-activated);
// bareStarter bare's socket (BareUnits).
var (
	poolStarter = starter{
		name:   "cold start",
		script: coldStartScript(poolStopped, ColdStartUnits, serviceHost, servicePort) + coldStartAfter,
		unit:   config.WorkerUnit(1), ready: true,
	}
	bareStarter = starter{
		name: "bare net/http in the worker's unit",
		// Stopped once timed: an idle process still wakes (the unit's
		// GODEBUG keeps its runtime's monitor ticking) during the pool's
		// next start.
		script: coldStartScript([]string{BareSocketUnit, BareUnit}, []string{BareSocketUnit}, "127.0.0.1", strconv.Itoa(bareUnitPort)) +
			"\nsystemctl stop " + BareSocketUnit + " " + BareUnit + " || true",
		unit: BareUnit,
	}
)

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
	if res.Starts, res.BareStarts, res.BareSkipped, err = r.coldStarts(ctx, plan, max(sp.Starts, 1), workers); err != nil {
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

// earlyStarts times plan.Start.EarlyStarts cold starts of its pool, and
// bare's with plan.Start.Bare, for Run to call first, before any load;
// nothing without any.
func (r *Runner) earlyStarts(ctx context.Context, plan Plan) (pool, bare []StartRun, err error) {
	sp := plan.Start
	if sp == nil || sp.EarlyStarts < 1 {
		return nil, nil, nil
	}
	workers, err := sp.Config.Workers(plan.CPUs)
	if err != nil {
		return nil, nil, err
	}
	r.logf(">> cold starts first in the run, the box just booted: %d workers, %d cold starts", workers, sp.EarlyStarts)
	if err := r.apply(ctx, sp.Config, workers); err != nil {
		return nil, nil, err
	}
	pool, bare, _, err = r.coldStarts(ctx, plan, sp.EarlyStarts, workers)
	return pool, bare, err
}

// coldStarts times n cold starts of the pool of workers applied, each
// followed, with plan.Start.Bare, by one of bare net/http in units derived
// from the worker's (startBareUnit), installed for these starts only;
// skipped says why there are none of bare's when the plan has no bare
// anchor.
func (r *Runner) coldStarts(ctx context.Context, plan Plan, n, workers int) (pool, bare []StartRun, skipped string, err error) {
	withBare, stop, skipped, err := r.bareStarts(ctx, plan)
	if err != nil {
		return nil, nil, "", err
	}
	defer stop()
	for range n {
		run, err := r.coldStart(ctx, poolStarter, workers)
		if err != nil {
			return nil, nil, "", err
		}
		pool = append(pool, run)
		if withBare {
			if run, err = r.coldStart(ctx, bareStarter, 0); err != nil {
				return nil, nil, "", err
			}
			bare = append(bare, run)
		}
	}
	return pool, bare, skipped, nil
}

// bareStarts installs bare's units for bareStarter when the plan asks for
// bare's starts and has the anchor; skipped says why not otherwise. stop
// removes them (a no-op without them).
func (r *Runner) bareStarts(ctx context.Context, plan Plan) (ok bool, stop func(), skipped string, err error) {
	stop = func() {}
	if plan.Start == nil || !plan.Start.Bare {
		return false, stop, "", nil
	}
	a, skipped := bareAnchor(plan)
	if skipped != "" {
		r.logf("   bare net/http in the worker's unit: skipped: %s", skipped)
		return false, stop, skipped, nil
	}
	if a.prepare != nil {
		if err := a.prepare(ctx, r.Box); err != nil {
			return false, stop, "", fmt.Errorf("cold start of bare: %w", err)
		}
	}
	if stop, err = r.startBareUnit(ctx, a.Argv[0], plan.CPUs); err != nil {
		return false, func() {}, "", fmt.Errorf("cold start of bare: %w", err)
	}
	return true, stop, "", nil
}

// coldStart times one start of s; the pool's waits until its workers are
// all ready, so that the next start begins from a settled box.
func (r *Runner) coldStart(ctx context.Context, s starter, workers int) (StartRun, error) {
	out, err := r.Box.Exec(ctx, time.Minute, "bash", "-c", s.script)
	if err != nil {
		return StartRun{}, fmt.Errorf("%s: %w", s.name, err)
	}
	f := resultFields(out)
	if len(f) != 4 || f[0] != "200" {
		return StartRun{}, fmt.Errorf("%w: %s: GET / gave %q", ErrNoResponses, s.name, out)
	}
	t0, err1 := strconv.ParseInt(f[1], 10, 64)
	t1, err2 := strconv.ParseInt(f[2], 10, 64)
	tl, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return StartRun{}, fmt.Errorf("%s: unexpected output %q", s.name, out)
	}
	if s.ready {
		if err := r.Box.WaitReady(ctx, workers, defaultReadyTimeout); err != nil {
			return StartRun{}, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	lines, err := r.journalSince(ctx, s.unit, t0)
	if err != nil {
		return StartRun{}, err
	}
	run := StartRun{FirstOK: time.Duration(t1 - t0), Listening: time.Duration(tl - t0)}
	starting, err := lineAfter(lines, "Starting "+s.unit, t0)
	if err != nil && !s.ready {
		starting, err = lineAfter(lines, "Started "+s.unit, t0)
	}
	if err != nil {
		return StartRun{}, fmt.Errorf("%s: %w", s.name, err)
	}
	run.Starting = time.Duration(starting - t0)
	if !s.ready {
		r.logf("   %s: first 200 after %v (listening at %v, starting at %v)", s.name, Millis(run.FirstOK), Millis(run.Listening), Millis(run.Starting))
		return run, nil
	}
	ready, err := lineAfter(lines, "Started "+s.unit, t0)
	if err != nil {
		return StartRun{}, fmt.Errorf("%s: %w", s.name, err)
	}
	run.Ready = time.Duration(ready - t0)
	r.logf("   %s: first 200 after %v (sockets listening at %v, worker 1 starting at %v, READY=1 at %v)", s.name, Millis(run.FirstOK), Millis(run.Listening), Millis(run.Starting), Millis(run.Ready))
	return run, nil
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
		writeColdStarts(p, s.EarlyStarts, s.EarlyBareStarts)
		p.printf("Cold starts last in the run, after the load (issue 12's target judges these):\n\n")
	}
	writeColdStarts(p, s.Starts, s.BareStarts)
	if s.BareSkipped != "" {
		p.printf("Bare net/http in the worker's unit: skipped: %s.\n\n", s.BareSkipped)
	}
	p.printf("| kill -9 of worker 1 | exit to READY=1 |\n|---|---|\n")
	var kills []float64
	for i, k := range s.Kills {
		p.printf("| %d | %s |\n", i+1, Millis(k))
		kills = append(kills, float64(k))
	}
	p.printf("| median | **%s** |\n", Millis(time.Duration(median(kills))))
}

// writeColdStarts is a table of cold starts and their medians; with bare
// (bare[i] started just after runs[i]), bare's beside them, and the median
// of the pairs' differences.
func writeColdStarts(p *printer, runs, bare []StartRun) {
	if len(bare) != len(runs) {
		bare = nil // a page of older results, or a run cut short
	}
	head, rule := `| cold start | first 200 | sockets listening | worker 1 "Starting" | worker 1 READY=1 |`, "|---|---|---|---|---|"
	if bare != nil {
		head, rule = head+` bare net/http in the worker's unit, next: first 200 | its socket listening | its "Starting" or "Started" |`, rule+"---|---|---|"
	}
	p.printf("%s\n%s\n", head, rule)
	var first, listening, starting, ready, bareFirst, bareListening, bareStarting, diff []float64
	for i, run := range runs {
		p.printf("| %d | %s | %s | %s | %s |", i+1, Millis(run.FirstOK), Millis(run.Listening), Millis(run.Starting), Millis(run.Ready))
		first, starting, ready = append(first, float64(run.FirstOK)), append(starting, float64(run.Starting)), append(ready, float64(run.Ready))
		listening = append(listening, float64(run.Listening))
		if bare != nil {
			b := bare[i]
			p.printf(" %s | %s | %s |", Millis(b.FirstOK), Millis(b.Listening), Millis(b.Starting))
			bareFirst, bareStarting = append(bareFirst, float64(b.FirstOK)), append(bareStarting, float64(b.Starting))
			bareListening = append(bareListening, float64(b.Listening))
			diff = append(diff, float64(run.FirstOK-b.FirstOK))
		}
		p.printf("\n")
	}
	p.printf("| median | **%s** | %s | %s | %s |", Millis(time.Duration(median(first))), Millis(time.Duration(median(listening))), Millis(time.Duration(median(starting))), Millis(time.Duration(median(ready))))
	if bare == nil {
		p.printf("\n\n")
		return
	}
	p.printf(" %s | %s | %s |\n\n", Millis(time.Duration(median(bareFirst))), Millis(time.Duration(median(bareListening))), Millis(time.Duration(median(bareStarting))))
	d := time.Duration(median(diff))
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	p.printf("The pool's first 200 less bare's started next, median of the %d pairs: %s%s.\n\n", len(diff), sign, Millis(d))
}
