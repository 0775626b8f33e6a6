package metrics

import (
	"errors"
	"io/fs"
	"net/http"
	"sync"

	"github.com/clusterapp/clusterapp/service/worker/internal/shm"
	"github.com/sirupsen/logrus"
)

// ExporterOptions configure NewExporter.
type ExporterOptions struct {
	// Dir is the runtime directory holding the pool's table.
	Dir string
	// Routes are the workers' route labels: they place the table's words,
	// and its file name carries their hash, so an exporter built with other
	// routes finds no table rather than misreading one.
	Routes []string
	// Version is the build's version, for clusterapp_build_info.
	Version string
	// DesiredNow reads the pool size configured now (Options.DesiredNow).
	DesiredNow func() (int, bool)
	Log        *logrus.Entry
}

// Exporter serves the pool's numbers from a process that is not a worker
// (clusterapp-metrics.service, which the metrics socket activates): it maps
// the pool's table read-only and reads every live slot at each scrape, as a
// worker answering a scrape does, so the series are the same. It holds no
// service socket: the accept queues are the ones the workers last sampled
// (every 100ms) and published in the table.
//
// Serving scrapes apart from the workers keeps the metrics socket off a
// worker's start: a socket in a unit's Sockets= is set up and passed at every
// start of the unit, and on the 2-CPU guest a cold pool answered 2.5 ms
// sooner without it, 12 rounds of 12 (make bench-start). It also answers
// while the whole pool is down (a scrape then shows no live worker), where
// a scrape used to start the pool and wait for a worker to come up.
//
// The table appears when the first worker builds it; until then a scrape
// shows an empty pool. A table replaced under the exporter (its name now
// names another file: an operator removed it, and the workers restarted to
// rejoin the new one) is followed at the next scrape.
type Exporter struct {
	opts ExporterOptions
	// mu guards m: scrapes read the mapping under a read lock, and a
	// replaced table is unmapped only under the write lock (a read of an
	// unmapped table is a SIGSEGV).
	mu    sync.RWMutex
	m     *Metrics
	h     http.Handler
	empty http.Handler
}

// NewExporter returns an exporter of the table in opts.Dir. It opens nothing
// yet: the first scrape does.
func NewExporter(opts ExporterOptions) *Exporter {
	e := &Exporter{opts: opts}
	lay := newLayout(opts.Routes)
	empty := &Metrics{lay: lay, self: -1, shared: true, region: shm.Local(lay.table.Words)}
	empty.words = empty.region.Words()
	empty.clock, _ = shm.MonotonicClock() // judges no heartbeat: the table is empty
	e.empty = e.configure(empty).Handler()
	return e
}

// ServeHTTP answers a scrape with the pool's numbers.
func (e *Exporter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.refresh()
	e.mu.RLock()
	defer e.mu.RUnlock()
	h := e.h
	if h == nil {
		h = e.empty
	}
	h.ServeHTTP(w, r)
}

// refresh maps the table when none is mapped yet, or when the one mapped
// lost its name.
func (e *Exporter) refresh() {
	e.mu.RLock()
	current := e.m != nil
	if current {
		why, err := e.m.Detached()
		current = err != nil || why == "" // cannot tell: keep reading it
		if !current {
			e.opts.Log.WithField("table", e.m.lay.table.FileName()).Info("metrics table " + why + ": mapping the one the workers use now")
		}
	}
	e.mu.RUnlock()
	if current {
		return
	}
	m, err := View(e.opts.Dir, e.opts.Routes)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		e.opts.Log.WithError(err).Warn("cannot read the pool's metrics table: this scrape shows no worker")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m != nil {
		_ = e.m.Close() // read-only: nothing to flush
		e.m, e.h = nil, nil
	}
	if err == nil {
		e.m = e.configure(m)
		e.h = e.m.Handler()
	}
}

// configure gives a viewing Metrics what a scrape reports besides the table.
func (e *Exporter) configure(m *Metrics) *Metrics {
	m.opts = Options{Version: e.opts.Version, Routes: e.opts.Routes, DesiredNow: e.opts.DesiredNow, Log: e.opts.Log}
	return m
}

// Close unmaps the table.
func (e *Exporter) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		return nil
	}
	err := e.m.Close()
	e.m, e.h = nil, nil
	return err
}
