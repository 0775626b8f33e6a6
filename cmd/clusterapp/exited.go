package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/clusterapp/clusterapp/service/app"
	"github.com/clusterapp/clusterapp/service/logging"
	"github.com/clusterapp/clusterapp/service/metrics"
	"github.com/sirupsen/logrus"
)

// runExited counts how a worker's process ended in the pool's metrics
// table. The worker unit runs it as ExecStopPost=, where systemd sets
// $SERVICE_RESULT (systemd.exec(5)): "watchdog" when the watchdog killed
// the worker, which the worker itself cannot record.
func runExited(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("exited", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	instance := fs.String("instance", "", "the worker `number` (the unit's %i)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *instance == "" {
		return usageError{"exited: usage: clusterapp exited --instance N (run by the worker unit's ExecStopPost=, with $SERVICE_RESULT set)"}
	}
	result, dir := os.Getenv("SERVICE_RESULT"), os.Getenv("RUNTIME_DIRECTORY")
	if result == "" || dir == "" {
		return fmt.Errorf("exited: SERVICE_RESULT=%q RUNTIME_DIRECTORY=%q: expected both, as systemd sets them for ExecStopPost=", result, dir)
	}
	log := logging.New(logging.Options{Format: "text", Level: logrus.InfoLevel, Journal: logging.UnderJournal(), Out: stderr}).WithField("worker", *instance)
	if err := metrics.RecordExit(dir, app.Routes, *instance, result, log); err != nil {
		return fmt.Errorf("exited: %w", err)
	}
	return nil
}
