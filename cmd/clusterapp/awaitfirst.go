package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/ops/units"
	"github.com/spf13/cobra"
)

// newAwaitFirstCommand is await-first's command line. Hidden from help:
// only the generator's drop-in for workers 2..N runs it, as
// ExecStartPre=-+ (package units, "Worker 1 comes up first").
func newAwaitFirstCommand(stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "await-first",
		Short:  "Wait, up to 1s, while worker 1 starts (run by workers 2..N's ExecStartPre=)",
		Hidden: true,
		Args:   noArgs,
	}
	instance := cmd.Flags().String("instance", "", "the worker `number` (the unit's %i)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *instance == "" {
			return usagef(cmd, "--instance is required (run by the generator's ExecStartPre= of workers 2..N)")
		}
		awaitFirst(cmd.Context(), *instance, stderr)
		return nil
	}
	return cmd
}

// awaitFirst waits while worker 1 starts, unless instance is worker 1. It
// never fails the start it runs in: a problem is said on stderr (the
// journal), and the worker starts.
func awaitFirst(ctx context.Context, instance string, stderr io.Writer) {
	if instance == "1" {
		return
	}
	first := config.WorkerUnit(1)
	// A stop of this worker ends the wait at once.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*units.FirstLimit)
	defer cancel()
	c, err := units.Dial(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "clusterapp: worker %s starts without waiting for worker 1: %v\n", instance, err)
		return
	}
	defer c.Close()
	a, err := c.Activation(ctx, first)
	if err != nil {
		fmt.Fprintf(stderr, "clusterapp: worker %s starts without waiting for worker 1: %v\n", instance, err)
		return
	}
	state := func(ctx context.Context) (string, error) { return c.ActiveState(ctx, first) }
	why, waited, err := units.AwaitFirst(ctx, a, state, units.Monotonic, units.FirstLimit)
	switch {
	case err != nil && ctx.Err() == nil:
		fmt.Fprintf(stderr, "clusterapp: worker %s starts without waiting for worker 1 (after %s): %v\n", instance, waited.Round(1e6), err)
	case strings.HasPrefix(why, "starting for longer") && waited > 0:
		fmt.Fprintf(stderr, "clusterapp: worker %s waited %s for worker 1, which is %s; starting without it\n", instance, waited.Round(1e6), why)
	}
}
