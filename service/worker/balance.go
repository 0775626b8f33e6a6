package worker

import (
	"math/bits"
	"runtime"
	"strconv"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/balance"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// newBalancer opens the shared balance table (balance.v4.1024.table in the
// units' common RuntimeDirectory) when balancing can work: it is on, the
// workers share a runtime directory, and the worker's name is a number. Otherwise it returns nil (accept as the kernel decides)
// and says why. It never returns an error: balancing is an optimisation, and
// a table that cannot be opened (directory missing, read-only, full) is a
// warning, not a reason to stop serving. It is not retried: the accept gate
// is wired into the server once, at start; the next start of the worker
// (restart, recycling, reload) tries again. The table stays mapped until the
// process exits.
func newBalancer(cfg config.Config, env env, name string, log *logrus.Entry) *balance.Balancer {
	if !cfg.Balance {
		return nil
	}
	dir := env.runtimeDir
	n, err := strconv.Atoi(name)
	switch {
	case dir == "":
		log.Info("balancing off: no RUNTIME_DIRECTORY shared with the other workers (standalone)")
		return nil
	case err != nil || n < 1 || n > balance.Slots:
		log.Warnf("balancing off: the worker's name must be a number from 1 to %d", balance.Slots)
		return nil
	}
	// One primary per CPU of the pool: workers past them step back under
	// new-connection load while the primaries keep up (package balance).
	b, _, err := balance.Open(dir, balance.Options{Self: n - 1, MaxDefer: cfg.BalanceMaxDefer, Primaries: runtime.NumCPU(), CPUs: cpuMask(), MoveWait: cfg.AdmissionWait / 2}, log)
	if err != nil {
		log.WithError(err).Warn("balancing off until this worker restarts: the shared balance table cannot be opened; the kernel spreads connections")
		return nil
	}
	return b
}

// cpuMask is the set of CPUs this process may run on, bit i for CPU i
// (balance.Options.CPUs); 0 when it cannot be read or holds a CPU past 63.
func cpuMask() uint64 {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return 0
	}
	var m uint64
	for c := range 64 {
		if set.IsSet(c) {
			m |= 1 << c
		}
	}
	if bits.OnesCount64(m) != set.Count() {
		return 0
	}
	return m
}
