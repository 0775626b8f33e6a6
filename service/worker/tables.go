package worker

import (
	"context"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
)

// A worker maps the pool's shared tables (rate limit, balance, metrics) from
// the units' runtime directory once, at start, and keeps the mapping. If a
// table's file loses its name while the worker runs (an operator's
// `rm /run/clusterapp/*`, or a file rebuilt after it was damaged), every
// worker started afterwards builds or maps a new file while this one keeps
// the old: the pool splits in two, each half with its own rate-limit budgets
// (a client gets one in each), its own balance and its own scrapes, for as
// long as this worker runs. So a socket-activated worker checks its tables
// every tablesCheckEvery and, once one has lost its name, drains and exits
// like a recycled worker; systemd starts it again (Restart=always) on the
// directory's current files. Mapping a new table in place instead would
// need every reader of the old one to let go first, which nothing can know.
//
// The workers of a pool notice together, so each waits a pause of its own
// first (tablesStagger per instance number): they leave one after another
// and the socket always has workers accepting.

// tablesCheckEvery is how often a worker checks its tables' names (two
// stat calls each time).
const tablesCheckEvery = 5 * time.Second

// tablesStagger is the pause per instance number before a worker whose
// table lost its name leaves; instance N waits (N-1) times this, modulo a
// minute.
const tablesStagger = 500 * time.Millisecond

// detacher is a shared table that can tell it lost its name.
type detacher interface {
	Detached() (string, error)
}

// staggerFor is the pause of the worker named name before it leaves.
func staggerFor(name string) time.Duration {
	n, err := strconv.Atoi(name)
	if err != nil || n < 1 {
		return 0
	}
	return time.Duration((n-1)%120) * tablesStagger
}

// watchTables checks tables every `every` until one has lost its name, then
// waits `stagger` and sends why on out, once; it returns when ctx ends. A
// table that cannot be checked (a stat error other than "no such file") is
// logged once and checked again later.
func watchTables(ctx context.Context, tables []detacher, every, stagger time.Duration, log *logrus.Entry, out chan<- string) {
	t := time.NewTicker(every)
	defer t.Stop()
	logged := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, tb := range tables {
			why, err := tb.Detached()
			if err != nil {
				if !logged[err.Error()] {
					logged[err.Error()] = true
					log.WithError(err).Warn("cannot check a shared table's file")
				}
				continue
			}
			if why == "" {
				continue
			}
			log.WithField("table", why).WithField("leaves_in", stagger).Warn("a shared table lost its file name (" + why + "): the workers started since use another file, so this worker restarts to share with them")
			select {
			case <-ctx.Done():
				return
			case <-time.After(stagger):
			}
			out <- why
			return
		}
	}
}

// sharedTables are the tables this worker maps from the runtime directory.
func (w *worker) sharedTables() []detacher {
	tables := []detacher{w.metrics}
	if w.bal != nil {
		tables = append(tables, w.bal)
	}
	if w.prot.limiter != nil {
		tables = append(tables, w.prot.limiter)
	}
	return tables
}
