package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/ops/journal"
	"github.com/clusterapp/clusterapp/service/ops/units"
	"github.com/spf13/cobra"
)

// newLogsCommand is logs' command line; the flags are journalctl's.
func newLogsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "The workers' journal, merged, each line naming its worker",
		Long: `Print the workers' journal, merged in time order, each line naming its worker
(clusterapp-worker@N[PID]). Root or members of the systemd-journal or adm group
may read it; anyone else is told so rather than shown an empty log.`,
		Example: `  clusterapp logs -n 50
  clusterapp logs -f --worker 2
  clusterapp logs --since -10m`,
		Args: noArgs,
	}
	f := cmd.Flags()
	follow := f.BoolP("follow", "f", false, "follow: print new lines until interrupted")
	worker := f.Int("worker", 0, "only worker `N`")
	since := f.String("since", "", "only lines since `TIME` (journalctl --since: -10m, today, 2025-01-02 15:00)")
	lines := f.IntP("lines", "n", 100, "show the last `N` lines (0: all)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		// Unchecked, --worker 0 showed every worker and --worker 5000
		// an empty journal, as if the worker had said nothing.
		if cmd.Flags().Changed("worker") && (*worker < 1 || *worker > config.MaxWorkers) {
			return usagef(cmd, "--worker=%d: expected a worker number from 1 to %d", *worker, config.MaxWorkers)
		}
		if *lines < 0 {
			return usagef(cmd, "-n/--lines=%d: expected a whole number of lines, 0 for all", *lines)
		}
		// journalctl refuses a bad time only once it runs, after the
		// checks for systemd and the right to read the journal.
		if cmd.Flags().Changed("since") && journal.CheckSince(*since) != nil {
			return usagef(cmd, "--since=%q: expected a time journalctl accepts: %s", *since, journal.SinceForms)
		}
		opts := journal.Options{Since: *since, Lines: *lines, Follow: *follow}
		if *worker > 0 {
			opts.Units = []string{config.WorkerUnit(*worker)}
		}
		return runLogs(cmd.Context(), opts, cmd.OutOrStdout())
	}
	return cmd
}

// runLogs prints the workers' journal, merged, each line naming its worker.
func runLogs(ctx context.Context, opts journal.Options, stdout io.Writer) error {
	if err := units.SystemdRunning(); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	if err := units.CanReadJournal(); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	// Ctrl-C ends -f; it is the normal way out, not an error.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := journal.Copy(ctx, opts, stdout); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	return nil
}
