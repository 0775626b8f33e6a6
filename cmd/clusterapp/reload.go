package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/clusterapp/clusterapp/service/journal"
	"github.com/clusterapp/clusterapp/service/rollout"
	"github.com/clusterapp/clusterapp/service/units"
)

// journalLinesOnFailure is how much of a failed worker's journal reload shows.
const journalLinesOnFailure = 10

// runReload restarts the running workers a few at a time, each gated on the
// new process's READY=1, and stops at the first failure.
func runReload(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	maxUnavailable := fs.Int("max-unavailable", 1, "how many workers may restart at once")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up on a worker whose restart takes longer")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError{"reload: usage: clusterapp reload [--max-unavailable K] [--timeout D]"}
	}
	if *maxUnavailable < 1 || *timeout <= 0 {
		return usageError{fmt.Sprintf("reload: --max-unavailable=%d --timeout=%v: expected at least 1 worker and a positive duration", *maxUnavailable, *timeout)}
	}
	c, err := dialUnits(ctx, "reload")
	if err != nil {
		return err
	}
	defer c.Close()
	running, err := runningWorkers(ctx, c)
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	if len(running) == 0 {
		return fmt.Errorf("reload: %w: start the pool with systemctl start %s", rollout.ErrNothingToDo, units.Target)
	}
	start := time.Now()
	fmt.Fprintf(stdout, "reloading %d workers, at most %d at a time\n", len(running), *maxUnavailable)
	var mu sync.Mutex // Done runs on the rollout's goroutines
	err = rollout.Run(ctx, units.WorkerNames(running), c, rollout.Options{
		MaxUnavailable: *maxUnavailable, Timeout: *timeout,
		Done: func(unit string, took time.Duration) {
			pid := "?"
			if w, err := c.Worker(ctx, unit); err == nil {
				pid = fmt.Sprint(w.PID)
			}
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(stdout, "  %s: pid %d -> %s, ready in %v\n", unit, oldPID(running, unit), pid, took.Round(time.Millisecond))
		},
	})
	var failure *rollout.Failure
	if errors.As(err, &failure) {
		explainFailure(ctx, c, failure, stdout)
		return fmt.Errorf("reload: %w", err)
	}
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "reloaded %d workers in %v\n", len(running), time.Since(start).Round(time.Millisecond))
	return err
}

func runningWorkers(ctx context.Context, c *units.Client) ([]units.Worker, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
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
