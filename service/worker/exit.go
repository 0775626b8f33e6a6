package worker

import (
	"fmt"
	"os"

	"github.com/clusterapp/clusterapp/service/worker/metrics"
)

// RecordExit counts how worker name's process ended in the pool's metrics
// table (clusterapp_worker_exits_total). The worker unit runs it as
// ExecStopPost= (`clusterapp exited --instance %i`), where systemd sets
// $SERVICE_RESULT (systemd.exec(5)): "watchdog" when the watchdog killed
// the worker, which the worker itself cannot record. routes are the
// service's, as the worker ran them: they place the table. The unit runs it
// with full privileges (ExecStopPost=+), so its exec skips the unit's
// sandbox set-up and the restart that follows is not held up by it; it only
// adds to the table the workers built.
func RecordExit(name string, routes Routes) error {
	result, dir := os.Getenv("SERVICE_RESULT"), readEnv().runtimeDir
	if result == "" || dir == "" {
		return fmt.Errorf("exited: SERVICE_RESULT=%q RUNTIME_DIRECTORY=%q: expected both, as systemd sets them for ExecStopPost=", result, dir)
	}
	if err := metrics.RecordExit(dir, Labels(routes), name, result); err != nil {
		return fmt.Errorf("exited: %w", err)
	}
	return nil
}
