package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/clusterapp/clusterapp/service/app"
	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker"
	"github.com/spf13/cobra"
)

// runServe runs the seed service on a worker (package worker) until it
// drains.
func runServe(ctx context.Context, name string, stderr io.Writer) error {
	err := worker.Run(ctx, worker.Options{Name: name, Version: version, Routes: app.Routes, Stderr: stderr})
	if ce := (*worker.ConfigError)(nil); errors.As(err, &ce) {
		return configError{err: ce.Err, logged: ce.Logged}
	}
	return err
}

// newServeCommand is serve's command line: the worker's name, which the
// unit passes from its instance (--instance %i); pid-<PID> without it.
func newServeCommand(stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a worker (the default command)",
		Long: `Run one worker: serve HTTP on the listening sockets systemd passes (LISTEN_FDS),
or bind CLUSTERAPP_LISTEN itself without systemd. It notifies READY=1 once a health
probe through the handler stack succeeds, pings the watchdog while probes answer,
and drains without losing a request on SIGTERM. The units run the same worker as
/usr/libexec/clusterapp-worker, a binary without the operator's commands.

Settings are CLUSTERAPP_* environment variables, not flags: see 'clusterapp config'.
An invalid setting the worker applies exits 78 (EX_CONFIG) with one line saying why.`,
		Example: `  clusterapp serve --instance 1              # the worker clusterapp-worker@1.service runs
  CLUSTERAPP_LISTEN=127.0.0.1:9000 clusterapp # standalone, without systemd`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef(cmd, "unexpected argument %q: settings are CLUSTERAPP_* environment variables", args[0])
			}
			return nil
		},
	}
	name := cmd.Flags().String("instance", "", "the worker's `name`: X-Worker, logs, metrics; a number from 1 to 1024 takes part in balancing (default: pid-N, N the process ID)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !cmd.Flags().Changed("instance") {
			*name = worker.DefaultName()
		}
		if !config.ValidInstance(*name) {
			return usageError{msg: fmt.Sprintf("serve --instance %q: expected letters, digits, '.', '_', '-' or '@', at most 64 of them", *name)}
		}
		return runServe(cmd.Context(), *name, stderr)
	}
	return cmd
}
