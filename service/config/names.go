package config

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// The names the suite's parts share, each spelled here once: the generator
// writes them, the operator commands and the sandbox drivers address them,
// the journal filters on them.
const (
	// SocketUnit owns the service's listening sockets.
	SocketUnit = "clusterapp.socket"
	// MetricsSocketUnit owns the metrics listener (CLUSTERAPP_METRICS_LISTEN).
	MetricsSocketUnit = "clusterapp-metrics.socket"
	// MetricsServiceUnit is the metrics exporter that socket activates.
	MetricsServiceUnit = "clusterapp-metrics.service"
	// TargetUnit wants one worker unit per worker (the generator's drop-in).
	TargetUnit = "clusterapp.target"
	// FirstTarget is ordered after worker 1; workers 2..N want it and
	// start after it (the generator's drop-in), so a cold start brings
	// worker 1 up first (systemd/clusterapp-first.target says how).
	FirstTarget = "clusterapp-first.target"
	// WorkerTemplate is the worker units' template; worker N is WorkerUnit(N).
	WorkerTemplate = "clusterapp-worker@.service"
	// WorkerPattern matches every worker unit (systemctl, journalctl -u).
	WorkerPattern = "clusterapp-worker@*.service"
	// WorkerBinary is what the worker units run (ExecStart=, ExecStopPost=):
	// cmd/clusterapp-worker, the worker without the operator's commands.
	WorkerBinary = "/usr/libexec/clusterapp-worker"

	// EnvFile is where the operator's settings live: a conffile the package
	// ships short and never rewrites, so upgrades never stop at a prompt.
	EnvFile = "/etc/clusterapp/clusterapp.env"
	// ScaleFile is what `clusterapp scale` writes (CLUSTERAPP_WORKERS), read
	// after EnvFile by the units (a second EnvironmentFile=) and the
	// generator, so scaling never edits the operator's file.
	ScaleFile = "/etc/clusterapp/scale.env"

	// RuntimeDir is the worker units' common RuntimeDirectory=: the
	// pool's shared tables (balance, rate limit, metrics, crash-loop
	// counts). A worker reads it from $RUNTIME_DIRECTORY, as systemd sets
	// it; the operator commands read the tables here.
	RuntimeDir = "/run/clusterapp"

	// MaxWorkers is the largest CLUSTERAPP_WORKERS (and `clusterapp scale
	// N`) accepted, and the number of worker slots in every table the
	// workers share (balance, metrics): worker N has slot N-1.
	MaxWorkers = 1024
)

// workerPrefix is a worker unit's name up to its instance.
var workerPrefix = strings.TrimSuffix(WorkerTemplate, ".service")

// WorkerUnit names worker n's unit.
func WorkerUnit(n int) string { return fmt.Sprintf("%s%d.service", workerPrefix, n) }

// WorkerNumber returns the number of a worker unit's instance; ok is false
// for any other unit name.
func WorkerNumber(unit string) (n int, ok bool) {
	s, ok := strings.CutPrefix(unit, workerPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(s, ".service"))
	return n, err == nil && n >= 0
}

// ScaleFileFor is the scale file beside envFile (ScaleFile for EnvFile).
func ScaleFileFor(envFile string) string {
	return filepath.Join(filepath.Dir(envFile), filepath.Base(ScaleFile))
}

// IsWorkerUnit reports whether unit is an instance of WorkerTemplate,
// numbered or not.
func IsWorkerUnit(unit string) bool {
	return strings.HasPrefix(unit, workerPrefix) && unit != WorkerTemplate
}
