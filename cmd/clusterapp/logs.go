package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/clusterapp/clusterapp/service/journal"
	"github.com/clusterapp/clusterapp/service/units"
)

// runLogs prints the workers' journal, merged, each line naming its worker.
func runLogs(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	follow := fs.Bool("f", false, "follow: print new lines until interrupted")
	worker := fs.Int("worker", 0, "only worker `N`")
	since := fs.String("since", "", "only lines since `TIME` (journalctl --since: -10m, today, 2025-01-02 15:00)")
	lines := fs.Int("n", 100, "show the last `N` lines (0: all)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError{"logs: usage: clusterapp logs [-f] [--worker N] [--since TIME] [-n N]"}
	}
	if *worker < 0 || *lines < 0 {
		return usageError{"logs: --worker and -n expect a whole number"}
	}
	if err := units.SystemdRunning(); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	if err := units.CanReadJournal(); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	opts := journal.Options{Since: *since, Lines: *lines, Follow: *follow}
	if *worker > 0 {
		opts.Units = []string{units.WorkerUnit(*worker)}
	}
	// Ctrl-C ends -f; it is the normal way out, not an error.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := journal.Copy(ctx, opts, stdout); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	return nil
}
