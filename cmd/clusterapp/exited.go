package main

import (
	"io"

	"github.com/clusterapp/clusterapp/service/app"
	"github.com/clusterapp/clusterapp/service/worker"
	"github.com/spf13/cobra"
)

// newExitedCommand is exited's command line. Hidden from help: only the
// worker unit runs it.
func newExitedCommand(stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "exited",
		Short:  "Count how worker N's process ended and pace a start loop (run by the worker unit's ExecStopPost=)",
		Hidden: true,
		Args:   noArgs,
	}
	instance := cmd.Flags().String("instance", "", "the worker `number` (the unit's %i)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *instance == "" {
			return usagef(cmd, "--instance is required (run by the worker unit's ExecStopPost=, with $SERVICE_RESULT set)")
		}
		return worker.RecordExit(cmd.Context(), *instance, app.Routes, stderr)
	}
	return cmd
}
