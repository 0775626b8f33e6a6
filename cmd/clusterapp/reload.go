package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/ops/journal"
	"github.com/clusterapp/clusterapp/service/ops/rollout"
	"github.com/clusterapp/clusterapp/service/ops/units"
	"github.com/spf13/cobra"
)

// journalLinesOnFailure is how much of a failed worker's journal reload shows.
const journalLinesOnFailure = 10

// newReloadCommand is the rolling restart's command line.
func newReloadCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reload",
		Short: "Rolling restart, each worker gated on its successor's READY=1",
		Long: `Restart the running workers K at a time (default 1). Each restart is a systemd job
that completes only when the new process has sent READY=1, so the port never closes
and no request fails. It stops at the first worker that does not come back, names
it, shows its unit state and the end of its journal, and leaves the workers not yet
restarted on their old process. It also brings the pool to the count clusterapp.target
wants (after an edit of CLUSTERAPP_WORKERS and a daemon-reload): first a wanted worker
not active is restarted, and last one no longer wanted is drained and stopped.
While another reload or a scale runs, it waits for it to finish, saying so.
A job someone else holds on a worker it is about to act on (systemctl restart
or stop, which take no lock) is waited for first, saying so; when one cancels
its own job, it names it, waits for it and tries once more.
Ctrl-C or SIGTERM stops it after the restarts in progress, naming the workers
left on their old process; a second one leaves those restarts to systemd.
'systemctl reload clusterapp' runs it. Needs root.`,
		Example: `  clusterapp reload
  clusterapp reload --max-unavailable 2 --timeout 30s`,
		Args: noArgs,
	}
	maxUnavailable := cmd.Flags().Int("max-unavailable", 1, "how many workers may restart at once")
	timeout := cmd.Flags().Duration("timeout", 2*time.Minute, "give up on a worker whose restart takes longer")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *maxUnavailable < 1 {
			return usagef(cmd, "--max-unavailable=%d: expected a whole number of workers, at least 1", *maxUnavailable)
		}
		if err := positiveDuration(cmd, "timeout", *timeout); err != nil {
			return err
		}
		return runReload(cmd.Context(), *maxUnavailable, *timeout, cmd.OutOrStdout())
	}
	return cmd
}

// runReload restarts the running workers a few at a time, each gated on the
// new process's READY=1, and stops at the first failure; around that it
// brings the pool to the count the target wants.
func runReload(ctx context.Context, maxUnavailable int, timeout time.Duration, stdout io.Writer) error {
	// Everything below is planned from the pool as it is now: another
	// reload or a scale must not change it meanwhile.
	ctx, c, end, err := beginPoolChange(ctx, "reload", stdout)
	if err != nil {
		return err
	}
	defer end()
	// The rolling restart reports from several goroutines.
	stdout = &syncWriter{w: stdout}
	jobs := &poolJobs{c: c, out: stdout, interrupted: ctx}
	running, err := runningWorkers(ctx, c)
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	if len(running) == 0 {
		return fmt.Errorf("reload: %w: start the pool with systemctl start %s", rollout.ErrNothingToDo, config.TargetUnit)
	}
	// The pool's size first: after an edit of CLUSTERAPP_WORKERS and a
	// daemon-reload the target wants other workers than run. A wanted
	// worker that is not active (a new one, or one waiting in its back-off
	// before exiting, with a file the operator has since fixed) is
	// restarted before the others are touched, which ends its wait; the
	// running ones are then restarted in turn, and those no longer wanted
	// drained and stopped last.
	qctx, cancel := queryContext(ctx)
	wanted, err := c.Wanted(qctx)
	cancel()
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	n := len(wanted)
	start := time.Now()
	if err := startMissing(ctx, c, n, timeout, jobs.Restart, false, stdout); err != nil {
		// A worker that does not come back here (a crash loop the file
		// still causes) is explained as one in the rolling restart is.
		var job *units.JobError
		if errors.As(err, &job) {
			failure := &rollout.Failure{Unit: job.Unit, Err: err, NotRestarted: units.WorkerNames(running)}
			explainFailure(ctx, c, failure, stdout)
			err = failure
		}
		return fmt.Errorf("reload: %w", err)
	}
	var keep []units.Worker
	for _, w := range running {
		if w.Number <= n {
			keep = append(keep, w)
		}
	}
	if len(keep) > 0 {
		fmt.Fprintf(stdout, "reloading %d workers, at most %d at a time\n", len(keep), maxUnavailable)
		var mu sync.Mutex // Done runs on the rollout's goroutines
		err = rollout.Run(ctx, units.WorkerNames(keep), jobs, rollout.Options{
			MaxUnavailable: maxUnavailable, Timeout: timeout,
			Done: func(unit string, took time.Duration) {
				pid := "?"
				qctx, cancel := queryContext(ctx)
				defer cancel()
				if w, err := c.Worker(qctx, unit); err == nil {
					pid = fmt.Sprint(w.PID)
				}
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintf(stdout, "  %s: pid %d -> %s, ready in %v\n", unit, oldPID(keep, unit), pid, took.Round(time.Millisecond))
			},
		})
		var failure *rollout.Failure
		if errors.As(err, &failure) {
			explainFailure(ctx, c, failure, stdout)
			return fmt.Errorf("reload: %w", err)
		}
		var interrupted *rollout.Interrupted
		if errors.As(err, &interrupted) {
			fmt.Fprintf(stdout, "stopped after the restarts in progress (%v)\n  still on the old process: %s\n", interrupted.Err, strings.Join(interrupted.NotRestarted, ", "))
			return fmt.Errorf("reload: %w", err)
		}
		if err != nil {
			return fmt.Errorf("reload: %w", err)
		}
	}
	if err := stopSurplus(ctx, c, n, timeout, jobs.Stop, stdout); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	// A worker restarted early on may have been stopped since by hand.
	if err := awaitPool(ctx, c, n, timeout, stdout); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "reloaded %d workers in %v; the pool runs %d\n", len(keep), time.Since(start).Round(time.Millisecond), n)
	return err
}

func runningWorkers(ctx context.Context, c *units.Client) ([]units.Worker, error) {
	ctx, cancel := queryContext(ctx)
	defer cancel()
	ws, err := c.Workers(ctx)
	var running []units.Worker
	for _, w := range ws {
		if w.Active() {
			running = append(running, w)
		}
	}
	return running, err
}

func oldPID(ws []units.Worker, unit string) int {
	for _, w := range ws {
		if w.Unit == unit {
			return w.PID
		}
	}
	return 0
}

// explainFailure prints why a worker did not come back: the unit's state
// and result, and the end of its journal.
func explainFailure(ctx context.Context, c *units.Client, f *rollout.Failure, w io.Writer) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	fmt.Fprintf(w, "stopped at %s: %v\n", f.Unit, f.Err)
	if u, err := c.Worker(ctx, f.Unit); err == nil {
		fmt.Fprintf(w, "  unit: %s/%s, result %s, restarts %d\n", u.ActiveState, u.SubState, u.Result, u.Restarts)
	}
	if len(f.NotRestarted) > 0 {
		fmt.Fprintf(w, "  still on the old process: %s\n", strings.Join(f.NotRestarted, ", "))
	}
	lines, err := journal.Tail(ctx, f.Unit, journalLinesOnFailure)
	if err != nil {
		fmt.Fprintf(w, "  (journal unavailable: %v)\n", err)
		return
	}
	fmt.Fprintf(w, "  last journal lines:\n")
	for _, l := range lines {
		fmt.Fprintf(w, "    %s\n", l)
	}
}
