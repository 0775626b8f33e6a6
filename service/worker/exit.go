package worker

import (
	"fmt"
	"io"
	"os"

	"github.com/clusterapp/clusterapp/service/worker/logging"
	"github.com/clusterapp/clusterapp/service/worker/metrics"
	"github.com/sirupsen/logrus"
)

// RecordExit counts how worker name's process ended in the pool's metrics
// table (clusterapp_worker_exits_total). The worker unit runs it as
// ExecStopPost= (`clusterapp exited --instance %i`), where systemd sets
// $SERVICE_RESULT (systemd.exec(5)): "watchdog" when the watchdog killed
// the worker, which the worker itself cannot record. routes are the
// service's, as the worker ran them: they place the table.
func RecordExit(name string, routes Routes, stderr io.Writer) error {
	result, dir := os.Getenv("SERVICE_RESULT"), readEnv().runtimeDir
	if result == "" || dir == "" {
		return fmt.Errorf("exited: SERVICE_RESULT=%q RUNTIME_DIRECTORY=%q: expected both, as systemd sets them for ExecStopPost=", result, dir)
	}
	log := logging.New(logging.Options{Format: "text", Level: logrus.InfoLevel, Journal: logging.UnderJournal(), Out: stderr}).WithField(logging.WorkerKey, name)
	if err := metrics.RecordExit(dir, Labels(routes), name, result, log); err != nil {
		return fmt.Errorf("exited: %w", err)
	}
	return nil
}
