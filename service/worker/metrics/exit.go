package metrics

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/clusterapp/clusterapp/service/worker/internal/shm"
)

// RecordExit counts one end of worker number's process under result
// (systemd's $SERVICE_RESULT, as the unit's ExecStopPost= passes it) in the
// pool's table in dir. A worker cannot count its own death by the watchdog's
// SIGABRT; systemd knows why the process ended and tells the command it runs
// after it. It only adds to a table a worker built (shm.OpenExisting): the
// command runs as root, and a file it built would be unusable by the workers.
func RecordExit(dir string, routes []string, worker, result string) error {
	i := len(ExitResults) - 1 // other
	for j, name := range ExitResults {
		if name == result {
			i = j
		}
	}
	return addToSlot(dir, routes, worker, wExits+i)
}

// RecordStart counts one start of worker number's process in the pool's
// table in dir without claiming its slot, for a process that stops before
// it serves and so never claims it: a worker refusing its configuration,
// or (counted by ExecStopPost=) a process that ended before the worker's
// code ran. Then clusterapp_worker_starts_total counts a crash loop of
// either kind, and the shipped ClusterappWorkerRestarting alert sees it.
// Like RecordExit, it only adds to a table a worker built.
func RecordStart(dir string, routes []string, worker string) error {
	return addToSlot(dir, routes, worker, wStarts)
}

// addToSlot adds one to the word of worker number's slot in the pool's
// table in dir.
func addToSlot(dir string, routes []string, worker string, word int) error {
	n, err := strconv.Atoi(worker)
	if err != nil || n < 1 || n > Slots {
		return fmt.Errorf("worker %q: expected a worker number from 1 to %d", worker, Slots)
	}
	lay := newLayout(routes)
	r, err := shm.OpenExisting(dir, lay.table)
	if err != nil {
		return fmt.Errorf("metrics table: %w", err)
	}
	defer r.Close()
	atomic.AddUint64(&r.Words()[(n-1)*lay.perSlot+word], 1)
	return nil
}

// View maps the pool's table in dir read-only, for an operator command:
// Workers then lists the live workers. fs.ErrNotExist when no worker has
// built the table.
func View(dir string, routes []string) (*Metrics, error) {
	m := &Metrics{lay: newLayout(routes), self: -1, shared: true}
	m.clock, _ = shm.MonotonicClock() // Workers judges heartbeats by it; on error it counts from now
	r, err := shm.OpenReadOnly(dir, m.lay.table)
	if err != nil {
		return nil, err
	}
	m.region, m.words = r, r.Words()
	return m, nil
}
