package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/config/envedit"
	"github.com/clusterapp/clusterapp/service/ops/rollout"
	"github.com/clusterapp/clusterapp/service/ops/units"
	"github.com/spf13/cobra"
)

// newScaleCommand is scale's command line: the worker count.
func newScaleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scale N",
		Short: "Set the number of workers, persistently and live",
		Long: `Set CLUSTERAPP_WORKERS=N in ` + config.ScaleFile + ` (read after the operator's
` + config.EnvFile + `, which scaling never edits), regenerate the units
(daemon-reload), then start only the missing workers and drain only the surplus
ones, and wait until every worker of the new count serves (READY=1), one systemd
was starting already too; a worker that fails meanwhile, or is not ready within
--timeout, is named with the end of its journal, and scale exits 1. A job someone
else holds on a worker (systemctl restart or stop) is waited for first, saying
so. While a reload or another scale runs, it waits for it to finish, saying
so. Ctrl-C or SIGTERM stops it after the start or drain in progress. Needs root.`,
		Example: `  clusterapp scale 4
  clusterapp scale 1 --timeout 30s`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef(cmd, "expected one argument, the worker count, got %d", len(args))
			}
			return nil
		},
	}
	timeout := cmd.Flags().Duration("timeout", 2*time.Minute, "give up on a worker that takes longer to start or drain")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		n, err := strconv.Atoi(args[0])
		if err != nil || n < 1 || n > config.MaxWorkers {
			return usagef(cmd, "%q is not a worker count: expected a whole number from 1 to %d", args[0], config.MaxWorkers)
		}
		// Before runScale: it writes the scale file and reloads systemd
		// before the timeout is first used.
		if err := positiveDuration(cmd, "timeout", *timeout); err != nil {
			return err
		}
		return runScale(cmd.Context(), n, *timeout, cmd.OutOrStdout())
	}
	return cmd
}

// runScale sets the worker count persistently (the scale file, then the
// generator through daemon-reload) and live: it starts only the missing
// instances and stops (drains) only the surplus ones.
func runScale(ctx context.Context, n int, timeout time.Duration, stdout io.Writer) error {
	// A reload running meanwhile would restart, and so start again, the
	// workers this drains; a second scale would start or drain others.
	ctx, c, end, err := beginPoolChange(ctx, "scale", stdout)
	if err != nil {
		return err
	}
	defer end()
	if err := writeScaleFile(config.ScaleFile, n); err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	fmt.Fprintf(stdout, "CLUSTERAPP_WORKERS=%d written to %s\n", n, config.ScaleFile)
	if err := applyScale(ctx, c, n, timeout, stdout); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("scale: %w; CLUSTERAPP_WORKERS=%d is written: clusterapp reload finishes the change", err, n)
		}
		return fmt.Errorf("scale: %w", err)
	}
	return nil
}

// scaleHeader starts the scale file when scale creates it.
const scaleHeader = `# Written by ` + "`clusterapp scale N`" + `: the worker count, read after ` + config.EnvFile + `
# by the workers (a second EnvironmentFile=) and clusterapp-generator, so its value wins.
# Scaling never edits the operator's file. Remove this file to go back to that file's value.
`

// writeScaleFile sets CLUSTERAPP_WORKERS=n in the scale file, creating it
// with a header saying what it is. A symbolic link there is written
// through, a dangling one too (envedit.Target): O_EXCL alone would not
// follow it, and the file it names would be created without the header.
func writeScaleFile(path string, n int) error {
	path, err := envedit.Target(path)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		_, err = f.WriteString(scaleHeader)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return envedit.SetFile(path, "CLUSTERAPP_WORKERS", strconv.Itoa(n))
}

func applyScale(ctx context.Context, c *units.Client, n int, timeout time.Duration, stdout io.Writer) error {
	// Not cut short by an interruption: the units then agree with the
	// file just written.
	qctx, cancel := queryContext(ctx)
	defer cancel()
	if err := c.DaemonReload(qctx); err != nil {
		return err
	}
	wanted, err := c.Wanted(qctx)
	if err != nil {
		return err
	}
	if len(wanted) != n {
		return fmt.Errorf("after daemon-reload %s wants %d workers, not %d: is the generator installed (/usr/lib/systemd/system-generators/clusterapp-generator)?", config.TargetUnit, len(wanted), n)
	}
	if up, err := poolRunning(qctx, c); err != nil || !up {
		_, werr := fmt.Fprintf(stdout, "the pool is not running; %d workers will start with it (systemctl start %s)\n", n, config.TargetUnit)
		return firstErr(err, werr)
	}
	jobs := &poolJobs{c: c, out: stdout, interrupted: ctx}
	if err := startMissing(ctx, c, n, timeout, jobs.Start, true, stdout); err != nil {
		return err
	}
	if err := stopSurplus(ctx, c, n, timeout, jobs.Stop, stdout); err != nil {
		return err
	}
	if err := awaitPool(ctx, c, n, timeout, stdout); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "scaled to %d workers\n", n)
	return err
}

// awaitPool waits until workers 1..n all serve (awaitServing), and
// explains one that does not as reload explains a worker that did not
// come back: its unit state and the end of its journal.
func awaitPool(ctx context.Context, c *units.Client, n int, timeout time.Duration, stdout io.Writer) error {
	workers := make([]string, n)
	for i := range workers {
		workers[i] = config.WorkerUnit(i + 1)
	}
	err := awaitServing(ctx, c, workers, timeout, readyPoll, stdout)
	var ns *notServing
	if errors.As(err, &ns) {
		explainFailure(ctx, c, &rollout.Failure{Unit: ns.Unit, Err: ns.Err}, stdout)
	}
	return err
}

// poolRunning reports whether the pool is up: its target active, or any
// worker. Not the target alone: systemd orders a target after the units it
// wants, so while one worker's start job waits (a crash loop from a cold
// start) the target is inactive, with the other workers serving.
func poolRunning(ctx context.Context, c *units.Client) (bool, error) {
	if up, err := c.TargetActive(ctx); err != nil || up {
		return up, err
	}
	running, err := runningWorkers(ctx, c)
	return len(running) > 0, err
}

// startMissing starts (with start) each of workers 1..n that is not
// active, waiting for each to be ready; stopSurplus drains and stops
// (with stop) every worker numbered above n. Run in that order, capacity
// never dips below both counts. With leaveStarting, a worker systemd is
// starting already (activating or deactivating: a start in progress, or a
// crash loop's restarts) is left to systemd, and said so: a start job on
// one in a crash loop failed, or waited until the timeout, and the workers
// after it were not started. scale waits for it afterwards (awaitPool).
func startMissing(ctx context.Context, c *units.Client, n int, timeout time.Duration, start func(context.Context, string) error, leaveStarting bool, stdout io.Writer) error {
	qctx, cancel := queryContext(ctx)
	defer cancel()
	ws, err := c.Workers(qctx)
	if err != nil {
		return err
	}
	state := map[int]units.Worker{}
	for _, w := range ws {
		state[w.Number] = w
	}
	for i := 1; i <= n; i++ {
		w, known := state[i]
		switch {
		case known && w.Active():
		case known && leaveStarting && w.ActiveState != "inactive" && w.ActiveState != "failed":
			// Deactivating too: a crash loop passes through its
			// ExecStopPost= between two starts, and a start job then
			// fails at once.
			fmt.Fprintf(stdout, "  %s is being started by systemd already (%s/%s, restarts %d): left to it, and waited for once the others are started\n", w.Unit, w.ActiveState, w.SubState, w.Restarts)
		default:
			if err := timedJob(ctx, timeout, "started", config.WorkerUnit(i), start, stdout); err != nil {
				return err
			}
		}
	}
	return nil
}

// The surplus is every worker above n that is not stopped, not only the
// active ones: one in a crash loop (activating, auto-restart) was left to
// restart for good, and to serve once it could.
func stopSurplus(ctx context.Context, c *units.Client, n int, timeout time.Duration, stop func(context.Context, string) error, stdout io.Writer) error {
	qctx, cancel := queryContext(ctx)
	defer cancel()
	ws, err := c.Workers(qctx)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w.Number > n && w.ActiveState != "inactive" && w.ActiveState != "failed" {
			if err := timedJob(ctx, timeout, "drained and stopped", w.Unit, stop, stdout); err != nil {
				return err
			}
		}
	}
	return nil
}

// timedJob runs one job, bounded by timeout, and says how long it took.
// Once ctx is interrupted it runs none, naming the unit left as it was; a
// job already running is waited for (jobContext).
func timedJob(ctx context.Context, timeout time.Duration, done, unit string, job func(context.Context, string) error, stdout io.Writer) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w; %s not %s", context.Cause(ctx), unit, done)
	}
	ctx, cancel := jobContext(ctx, timeout)
	defer cancel()
	start := time.Now()
	if err := job(ctx, unit); err != nil {
		if errors.Is(err, errLeft) {
			return nil // the job said why
		}
		return err
	}
	_, err := fmt.Fprintf(stdout, "  %s %s in %v\n", done, unit, time.Since(start).Round(time.Millisecond))
	return err
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
