package worker

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/internal/memlimit"
	"github.com/clusterapp/clusterapp/service/worker/logging"
	"github.com/sirupsen/logrus"
)

// A worker that leaks memory would grow until the kernel kills it at the
// unit's MemoryMax= (CLUSTERAPP_MEMORY_MAX): an OOM kill is a SIGKILL, and
// every request the worker holds, and every keep-alive connection, is lost
// with it; without a limit it grows until the machine swaps. PM2's answer,
// max_memory_restart, polls every 30 s. Here the worker watches its own
// resident memory (VmRSS, the process_resident_memory_bytes it exports)
// every rssCheckEvery and, once it has stayed over CLUSTERAPP_MAX_RSS for
// a second (rssOverChecks readings in a row), drains and exits 0 like a
// recycled worker: systemd (Restart=always) starts a fresh one, the socket
// keeps the connections that arrive meanwhile, and nothing in flight is
// lost.
//
// Garbage alone does not take it there: the Go heap limit (GOMEMLIMIT) is
// derived below CLUSTERAPP_MAX_RSS as it is below the cgroup's limit
// (setMemoryLimit), so the collector and the scavenger keep the heap under
// it and only memory the program holds on to passes it. Once the live heap
// (what the last collection kept) is itself over that limit, collecting
// cannot help: the collector would run without pause (up to half the CPU,
// the runtime's cap) while the resident size climbs to the limit, so the
// worker recycles at once, without waiting for more readings, and lifts
// the heap limit back to the cgroup's for its drain. That rule alone also
// watches a worker under CLUSTERAPP_MEMORY_MAX (or _HIGH) without
// CLUSTERAPP_MAX_RSS: its live heap past the limit derived from the
// cgroup's means an OOM kill ahead, after a stretch of the collector
// running without pause, and a drain now loses nothing. Not under a
// GOMEMLIMIT the operator set: how hard its collector may work is theirs
// to say.
//
// A worker over the limit from its start (a limit below what it needs to
// serve) would recycle in a tight loop: it waits until it has served
// rssSettle, and its journal line says what to do if that happens at every
// start. Workers that leak alike reach the limit together, so each waits
// its instance's pause first (staggerFor, as for the shared tables) and
// they leave one after another.

// rssCheckEvery is how often a worker reads its memory (/proc/self/statm
// and the runtime's live-heap count: BenchmarkReadMemory, about 20 µs).
const rssCheckEvery = 250 * time.Millisecond

// rssOverChecks is how many readings in a row must find the resident size
// over the limit, a second's worth: a passing peak (one large response) is
// not a reason to recycle.
const rssOverChecks = 4

// rssSettle is the least a worker serves before it recycles for memory.
const rssSettle = 10 * time.Second

// rssWatch is one worker's memory watch.
type rssWatch struct {
	limit   uint64                 // bytes; CLUSTERAPP_MAX_RSS resolved, 0 for none (the live-heap rule alone)
	setting string                 // CLUSTERAPP_MAX_RSS as written, for messages
	every   time.Duration          // rssCheckEvery
	settle  time.Duration          // rssSettle
	stagger time.Duration          // staggerFor(name)
	read    func() (memory, error) // readMemory
	relax   func()                 // lifts the heap limit for the drain; may be nil
	now     func() time.Time
	log     *logrus.Entry
}

// memory is one reading: the resident size, the live heap the last
// collection kept and the heap limit in effect (math.MaxInt64 for none).
type memory struct {
	rss, live, heapLimit uint64
}

// liveSample is the runtime's own count of the live heap.
const liveSample = "/gc/heap/live:bytes"

// readMemory reads this process's memory: the resident size (statm's
// resident pages, the count process_resident_memory_bytes reads from
// /proc/self/stat), the live heap and the limit.
func readMemory() (memory, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return memory{}, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return memory{}, fmt.Errorf("/proc/self/statm: %q: expected at least 2 fields", b)
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return memory{}, fmt.Errorf("/proc/self/statm: resident pages: %w", err)
	}
	s := []metrics.Sample{{Name: liveSample}}
	metrics.Read(s)
	m := memory{rss: pages * uint64(os.Getpagesize()), heapLimit: uint64(max(debug.SetMemoryLimit(-1), 0))}
	if s[0].Value.Kind() == metrics.KindUint64 {
		m.live = s[0].Value.Uint64()
	}
	return m, nil
}

// run reads the resident memory every w.every from start until it has been
// over the limit rssOverChecks times in a row and the worker has served
// w.settle, then waits w.stagger and sends why on out, once. A reading that
// fails is logged once and the next one is taken; it returns when ctx ends.
func (w rssWatch) run(ctx context.Context, start time.Time, out chan<- string) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	over, readFailed, early := 0, false, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m, err := w.read()
		if err != nil {
			if !readFailed {
				readFailed = true
				w.log.WithError(err).Warn("cannot read this worker's resident memory: CLUSTERAPP_MAX_RSS is not enforced until it can")
			}
			continue
		}
		rss := m.rss
		held := m.live > m.heapLimit // the collector cannot get under its limit
		switch {
		case held:
		case w.limit == 0 || rss <= w.limit:
			over = 0
			continue
		default:
			if over++; over < rssOverChecks {
				continue
			}
		}
		up := w.now().Sub(start)
		if up < w.settle {
			if !early {
				early = true
				w.log.WithFields(logrus.Fields{"rss_bytes": rss, "live_heap_bytes": m.live, "max_rss_bytes": w.limit, "uptime": up.Round(time.Millisecond)}).
					Warn(fmt.Sprintf("%s %s after start: this worker recycles once it has served %s (if that happens after every start, the limit is below what a worker needs: raise it)", w.over(m, held), up.Round(time.Millisecond), w.settle))
			}
			continue
		}
		why := w.over(m, held)
		if w.relax != nil {
			w.relax()
		}
		w.log.WithFields(logging.Event(logging.MsgRecycledMemory)).WithFields(logrus.Fields{"rss_bytes": rss, "live_heap_bytes": m.live, "max_rss_bytes": w.limit, "leaves_in": w.stagger}).Warn(why + ": recycling this worker before the memory grows further (a leak, if it happens again: see process_resident_memory_bytes)")
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.stagger):
		}
		out <- why
		return
	}
}

// over says which limit the reading m is over.
func (w rssWatch) over(m memory, held bool) string {
	switch {
	case !held:
		return fmt.Sprintf("resident memory %s over CLUSTERAPP_MAX_RSS=%s", mib(m.rss), w.setting)
	case w.setting != "":
		return fmt.Sprintf("live heap %s over the Go heap limit %s, below CLUSTERAPP_MAX_RSS=%s (resident %s)", mib(m.live), mib(m.heapLimit), w.setting, mib(m.rss))
	}
	return fmt.Sprintf("live heap %s over the Go heap limit %s, below the unit's memory limit (CLUSTERAPP_MEMORY_MAX, _HIGH; resident %s)", mib(m.live), mib(m.heapLimit), mib(m.rss))
}

// mib formats bytes as MiB with one decimal.
func mib(b uint64) string { return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20)) }

// relaxHeapLimit returns what lifts the heap limit setMemoryLimit derived
// to the cgroup's alone (no limit without one), for a worker that recycles
// for memory: its drain then runs without the collector pressing against a
// limit its live heap is over. nil when GOMEMLIMIT is the operator's.
func relaxHeapLimit(cfg config.Config, log *logrus.Entry) func() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	return func() {
		limit, ok, _ := memlimit.Derive(os.Getenv, cfg.MemoryLimitRatio, 0)
		if !ok {
			limit = math.MaxInt64
		}
		debug.SetMemoryLimit(limit)
		log.WithField("gomemlimit_bytes", limit).Debug("Go memory limit lifted to the cgroup's for the drain")
	}
}

// memoryWatched is what rssWatch watches: the resident size
// CLUSTERAPP_MAX_RSS sets (0 for none), and whether the heap limit is one
// setMemoryLimit derived (from it or from the cgroup's limit), which the
// live-heap rule holds the live heap against.
func (w *worker) memoryWatched() (uint64, bool) {
	limit := w.cfg.MaxRSSBytes(config.PhysicalMemory())
	_, derived, _ := memlimit.Derive(os.Getenv, w.cfg.MemoryLimitRatio, int64(min(limit, math.MaxInt64)))
	return limit, derived
}
