package main

import (
	"fmt"
	"io"
	"os"

	"github.com/clusterapp/clusterapp/service/app"
	"github.com/clusterapp/clusterapp/service/logging"
	"github.com/clusterapp/clusterapp/service/metrics"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
)

// newExitedCommand is exited's command line. Hidden from help: only the
// worker unit runs it.
func newExitedCommand(stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "exited",
		Short:  "Count how worker N's process ended (run by the worker unit's ExecStopPost=)",
		Hidden: true,
		Args:   noArgs,
	}
	instance := cmd.Flags().String("instance", "", "the worker `number` (the unit's %i)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *instance == "" {
			return usagef(cmd, "--instance is required (run by the worker unit's ExecStopPost=, with $SERVICE_RESULT set)")
		}
		return runExited(*instance, stderr)
	}
	return cmd
}

// runExited counts how a worker's process ended in the pool's metrics
// table. The worker unit runs it as ExecStopPost=, where systemd sets
// $SERVICE_RESULT (systemd.exec(5)): "watchdog" when the watchdog killed
// the worker, which the worker itself cannot record.
func runExited(instance string, stderr io.Writer) error {
	result, dir := os.Getenv("SERVICE_RESULT"), os.Getenv("RUNTIME_DIRECTORY")
	if result == "" || dir == "" {
		return fmt.Errorf("exited: SERVICE_RESULT=%q RUNTIME_DIRECTORY=%q: expected both, as systemd sets them for ExecStopPost=", result, dir)
	}
	log := logging.New(logging.Options{Format: "text", Level: logrus.InfoLevel, Journal: logging.UnderJournal(), Out: stderr}).WithField("worker", instance)
	if err := metrics.RecordExit(dir, app.Routes, instance, result, log); err != nil {
		return fmt.Errorf("exited: %w", err)
	}
	return nil
}
