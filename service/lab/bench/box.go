package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/loadgen"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// What the benchmark does to a box beyond package sandbox's Driver: a
// configuration applied, the generator at its priority, memory and
// GOMAXPROCS read.

// loadNice is the generator's nice value. It shares the box's CPUs with the
// workers it loads; at the workers' priority it is starved under CPU-bound
// load, and since open-loop latency runs from the intended send time, its own
// scheduling delay would be reported as the server's.
const loadNice = -10

// Errors that end a run: the benchmark reports numbers, but a run that could
// not be made is a failure, not a result.
var (
	// ErrNotReady: a configuration's workers did not all come up.
	ErrNotReady = sandbox.ErrNotReady
	// ErrNoResponses: a closed-loop run got no 2xx response at all.
	ErrNoResponses = errors.New("bench: nothing served")
)

// defaultReadyTimeout is Runner.ReadyTimeout's default.
const defaultReadyTimeout = 30 * time.Second

// apply makes c the running configuration: env file, worker drop-in, the
// suite restarted on fresh processes; it returns once all workers are
// active and a request was answered 200.
func (r *Runner) apply(ctx context.Context, c Configuration, workers int) error {
	if err := r.Box.WriteEnv(ctx, c.Env); err != nil {
		return err
	}
	if c.WorkerDropIn != "" {
		if err := r.Box.WriteFile(ctx, WorkerDropInPath, c.WorkerDropIn); err != nil {
			return err
		}
	} else if _, err := r.Box.Exec(ctx, time.Minute, "rm", "-f", WorkerDropInPath); err != nil {
		return fmt.Errorf("apply %q: %w", c.Name, err)
	}
	if err := r.Box.Restart(ctx); err != nil {
		return fmt.Errorf("apply %q: %w", c.Name, err)
	}
	timeout := r.ReadyTimeout
	if timeout <= 0 {
		timeout = defaultReadyTimeout
	}
	if err := r.Box.WaitReady(ctx, workers, timeout); err != nil {
		return fmt.Errorf("configuration %q: %w", c.Name, err)
	}
	return nil
}

// load runs the generator inside the box against the suite's path with
// the given flags, within budget.
func (r *Runner) load(ctx context.Context, path string, budget time.Duration, flags ...string) (*loadgen.Result, error) {
	return r.loadOn(ctx, "", path, budget, flags...)
}

// loadOn is load with the generator bound to the CPUs in cpus (a taskset
// list); "" lets it run anywhere.
func (r *Runner) loadOn(ctx context.Context, cpus, path string, budget time.Duration, flags ...string) (*loadgen.Result, error) {
	return r.loadURL(ctx, cpus, sandbox.URL+path, budget, flags...)
}

// loadURL runs the generator inside the box against url (on the box's
// loopback), bound to cpus as loadOn, at loadNice.
func (r *Runner) loadURL(ctx context.Context, cpus, url string, budget time.Duration, flags ...string) (*loadgen.Result, error) {
	return r.Box.Load(ctx, url, sandbox.LoadOptions{CPUs: cpus, Nice: loadNice, Budget: budget}, flags...)
}

// workers reports MainPID, NRestarts and memory of each of n workers.
func (r *Runner) workers(ctx context.Context, n int) ([]Worker, error) {
	var workers []Worker
	for _, unit := range sandbox.WorkerUnits(n) {
		out, err := r.Box.Exec(ctx, 10*time.Second, "systemctl", "show", "-p", "MainPID", "-p", "NRestarts", unit)
		if err != nil {
			return nil, err
		}
		w := Worker{Unit: unit}
		props := parseProperties(out)
		w.PID, _ = strconv.Atoi(props["MainPID"])
		w.Restarts, _ = strconv.Atoi(props["NRestarts"])
		if w.PID == 0 {
			return nil, fmt.Errorf("%w: %s has no main process", ErrNotReady, unit)
		}
		status, err := r.Box.Exec(ctx, 10*time.Second, "cat", fmt.Sprintf("/proc/%d/status", w.PID))
		if err != nil {
			return nil, err
		}
		w.RSS, w.PeakRSS = parseStatusMemory(status)
		workers = append(workers, w)
	}
	return workers, nil
}

// gomaxprocs asks the metrics listener what GOMAXPROCS the workers run
// with: one scrape holds every live worker; it retries a few times while
// fewer than n workers are live.
func (r *Runner) gomaxprocs(ctx context.Context, n int) (map[string]int, error) {
	var seen map[string]int
	for try := 0; try < 8 && len(seen) < n; try++ {
		out, err := r.Box.Exec(ctx, 10*time.Second, "curl", "-sS", "--max-time", "5", sandbox.MetricsURL)
		if err != nil {
			return nil, err
		}
		seen = parseGOMAXPROCS(out)
		if len(seen) < n {
			time.Sleep(250 * time.Millisecond)
		}
	}
	return seen, nil
}
