package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/loadgen"
)

// FaultPlan is issue 6's last target, measured under load: a frozen or a
// crash-looping worker costs the pool capacity, never connections. With one
// listening socket shared by every worker, the kernel queues a connection
// on the socket, not on a worker, and only a worker calling accept() takes
// it; per-worker SO_REUSEPORT sockets instead hash 1/N of new connections
// to a dead worker's queue. The load opens a new connection per request
// (-keepalive=false), so every request is a new connection to place.
type FaultPlan struct {
	Config      Configuration // the pool, several workers
	Route       string
	Concurrency int
	Duration    time.Duration
	Timeout     time.Duration
}

// FaultResult is the pool measured healthy, then with its last worker
// frozen, then with it crash-looping.
type FaultResult struct {
	Workers int
	Runs    []FaultRun
}

// FaultRun is one fault's load.
type FaultRun struct {
	Name   string
	Result *loadgen.Result
	// Restarts is the faulty worker's NRestarts during the load.
	Restarts int
}

// crashDropIn makes one worker exit 78 (bad configuration) at every start.
const crashDropIn = "[Service]\nEnvironment=CLUSTERAPP_FIB_MAX_N=bogus\n"

func (r *Runner) faults(ctx context.Context, plan Plan) (*FaultResult, error) {
	fp := plan.Faults
	workers, err := fp.Config.Workers(plan.CPUs)
	if err != nil {
		return nil, err
	}
	if workers < 2 {
		return nil, fmt.Errorf("faults: configuration %q runs %d worker; the scenario needs several", fp.Config.Name, workers)
	}
	r.logf(">> faults: %d workers, worker %d frozen then crash-looping", workers, workers)
	if err := r.apply(ctx, fp.Config, workers); err != nil {
		return nil, err
	}
	victim := config.WorkerUnit(workers)
	out := &FaultResult{Workers: workers}
	load := func(name string) error {
		before, err := r.Box.NRestarts(ctx, victim)
		if err != nil {
			return err
		}
		res, err := r.load(ctx, fp.Route, fp.Duration+fp.Timeout, "-c", fmt.Sprint(fp.Concurrency), "-d", fp.Duration.String(),
			"-keepalive=false", "-timeout", fp.Timeout.String())
		if err != nil {
			return err
		}
		after, err := r.Box.NRestarts(ctx, victim)
		if err != nil {
			return err
		}
		r.logf("   %s: %d requests, status %v, %d errors, by worker %v", name, res.Requests, res.StatusCodes, res.Errors(), res.ByHeader)
		out.Runs = append(out.Runs, FaultRun{Name: name, Result: res, Restarts: after - before})
		return nil
	}
	if err := load("all healthy"); err != nil {
		return nil, err
	}

	// Frozen: SIGSTOP, then long enough for its balance heartbeat to go
	// stale; SIGCONT afterwards, well within the watchdog's timeout.
	pid, err := r.Box.MainPID(ctx, victim)
	if err != nil {
		return nil, err
	}
	if pid == 0 {
		return nil, fmt.Errorf("%w: %s has no main process", ErrNotReady, victim)
	}
	if _, err := r.Box.Exec(ctx, 10*time.Second, "kill", "-STOP", strconv.Itoa(pid)); err != nil {
		return nil, err
	}
	time.Sleep(time.Second)
	loadErr := load(fmt.Sprintf("worker %d frozen (SIGSTOP)", workers))
	if _, err := r.Box.Exec(ctx, 10*time.Second, "kill", "-CONT", strconv.Itoa(pid)); err != nil && loadErr == nil {
		loadErr = err
	}
	if loadErr != nil {
		return nil, loadErr
	}

	// Crash-looping: a drop-in for that one instance makes it exit 78 at
	// every start; systemd restarts it at once, and the worker paces the
	// loop itself (package crashloop).
	crashPath := "/etc/systemd/system/" + victim + ".d/90-bench-crash.conf"
	if err := r.Box.WriteFile(ctx, crashPath, crashDropIn); err != nil {
		return nil, err
	}
	undo := func() error {
		for _, argv := range [][]string{{"rm", "-f", crashPath}, {"systemctl", "daemon-reload"}, {"systemctl", "restart", victim}} {
			if _, err := r.Box.Exec(ctx, time.Minute, argv...); err != nil {
				return err
			}
		}
		return nil
	}
	loadErr = r.crashLoop(ctx, victim, func() error { return load(fmt.Sprintf("worker %d crash-looping (exits 78 at every start)", workers)) })
	if err := undo(); err != nil && loadErr == nil {
		loadErr = err
	}
	return out, loadErr
}

// crashLoop restarts victim under its crashing drop-in, waits until it has
// failed three times, and runs load.
func (r *Runner) crashLoop(ctx context.Context, victim string, load func() error) error {
	for _, argv := range [][]string{{"systemctl", "daemon-reload"}, {"systemctl", "restart", "--no-block", victim}} {
		if _, err := r.Box.Exec(ctx, time.Minute, argv...); err != nil {
			return err
		}
	}
	start, err := r.Box.NRestarts(ctx, victim)
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		n, err := r.Box.NRestarts(ctx, victim)
		if err != nil {
			return err
		}
		if n-start >= 3 {
			return load()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("faults: %s did not crash-loop: %d restarts in 30s", victim, n-start)
		}
	}
}

func writeFaultsMethod(p *printer, res *Results) {
	fp, f := res.Plan.Faults, res.Faults
	p.printf("- Configuration \"%s\" (`%s`), %d workers; every CPU shared with the generator, as in the tables above.\n",
		fp.Config.Name, strings.ReplaceAll(strings.TrimSpace(fp.Config.Env), "\n", "` `"), f.Workers)
	p.printf("- Load: `clusterapp-load -c %d -keepalive=false -d %s -timeout %s` on `%s`: a new connection for every request.\n",
		fp.Concurrency, fp.Duration, fp.Timeout, fp.Route)
	p.printf("- Frozen: `kill -STOP` on the last worker's MainPID 1 s before the load (its balance heartbeat goes stale\n")
	p.printf("  after 500 ms), `kill -CONT` after it. Crash-looping: a drop-in for that one instance sets an invalid\n")
	p.printf("  `CLUSTERAPP_FIB_MAX_N`, so it exits 78 at every start; the load begins after its third restart.\n\n")
}

// WriteFaults writes the fault table: one row per run.
func WriteFaults(w io.Writer, res *Results) {
	p := asPrinter(w)
	f := res.Faults
	if len(f.Runs) == 0 {
		return
	}
	healthy := Goodput(f.Runs[0].Result)
	p.printf("| worker state | requests | 2xx | non-2xx | errors | p99 | 2xx by worker | 2xx req/s × all healthy | restarts during the load |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range f.Runs {
		r := run.Result
		p.printf("| %s | %d | %d | %d | %s | %s | %s | %s | %d |\n", run.Name, r.Requests, r.OK, r.Responses-r.OK, Errors(r),
			Millis(r.Latency.P99), byWorker(r, f.Workers), Ratio(Goodput(r), healthy), run.Restarts)
	}
}

// byWorker lists the 2xx responses of each worker, e.g. "1: 120, 2: 0".
func byWorker(r *loadgen.Result, workers int) string {
	parts := make([]string, workers)
	for i := range parts {
		parts[i] = fmt.Sprintf("%d: %d", i+1, r.ByHeader[strconv.Itoa(i+1)])
	}
	return strings.Join(parts, ", ")
}
