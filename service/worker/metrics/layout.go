package metrics

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/internal/shm"
)

// Slots is the largest worker number with a slot of its own in the shared
// table (workers 1..Slots): config.MaxWorkers, one home for the bound.
const Slots = config.MaxWorkers

// ExitResults are the values of systemd's $SERVICE_RESULT (systemd.exec(5))
// counted by clusterapp_worker_exits_total; any other value counts as "other".
var ExitResults = []string{"success", "protocol", "timeout", "exit-code", "signal", "core-dump", "watchdog", "start-limit-hit", "resources", "oom-kill", "other"}

// RecycleReasons are why a worker recycled itself (drained and exited 0 for
// systemd to start a fresh process), clusterapp_worker_recycles_total's
// reason label: its request limit (CLUSTERAPP_MAX_REQUESTS), its memory
// (CLUSTERAPP_MAX_RSS, or a live heap over the heap limit), or a shared
// table that lost its file name.
var RecycleReasons = []string{"requests", "memory", "tables"}

// Bucket bounds, in seconds.
var (
	durationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	waitBuckets     = []float64{0, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}
	// deferBuckets span the accept gate's deferrals, which balance.MaxDefer
	// (20ms by default) bounds.
	deferBuckets = []float64{.0005, .001, .002, .005, .01, .02, .05}
)

// The words of a worker's slot that are not per route. Counters keep
// counting across the worker's restarts; gauges are reset when a process
// claims the slot.
const (
	wPID         = iota // gauge: the process that holds the slot
	wStartNs            // gauge: its start, Unix ns
	wStarts             // counter: processes that claimed the slot
	wReady              // gauge: 1 serving, 0 starting or draining
	wDesired            // gauge: CLUSTERAPP_WORKERS as this process read it
	wInFlight           // gauge
	wConnsOpen          // gauge
	wAccepted           // counter
	wRejected           // counter: requests net/http ended before the handler saw them
	wAdmitted           // counter
	wShed               // counter
	wLimited            // counter
	wUnavailable        // counter
	wHits               // counter
	wMisses             // counter
	wGate               // gauge: 0 not balancing, 1 gate off, 2 gate on
	wRateTable          // gauge: 0 no rate limit, else 1+index in rateTables
	wRSS                // gauge, bytes
	wCPUNs              // counter, ns of user+system CPU
	wFDs                // gauge
	wGoroutines         // gauge
	wGOMAXPROCS         // gauge
	wWatchdogNs         // gauge: the process's watchdog timeout, 0 when it has none
	wProbedNs           // gauge: shm.Clock ns of its last passing health probe
	wMoved              // counter: keep-alive connections ended to rebalance
	wExits              // counters, one per ExitResults, then one per RecycleReasons (recyclesOff)
)

// recyclesOff is the first of a slot's recycle counters, after its exits.
var recyclesOff = wExits + len(ExitResults)

// rateTables are the values of clusterapp_ratelimit_table's mode label.
var rateTables = []string{"shared", "local", "closed"}

// codeEntries is how many distinct status codes a route counts by code;
// more land in code="other".
const codeEntries = 12

// histogram is a histogram's place in a slot: a count per bucket (the last
// one +Inf, not cumulative) and the sum of observations in nanoseconds.
type histogram struct {
	off    int
	bounds []float64
}

func (h histogram) words() int { return len(h.bounds) + 2 }

// layout places every word of a slot; it depends only on the route labels.
type layout struct {
	routes   []string
	wait     histogram
	deferred histogram
	route    []routeBlock
	perSlot  int
	table    shm.Layout
}

type routeBlock struct {
	duration histogram
	codes    int // codeEntries pairs (code, count), then the "other" count
}

func newLayout(routes []string) *layout {
	l := &layout{routes: routes}
	off := recyclesOff + len(RecycleReasons)
	l.wait = histogram{off: off, bounds: waitBuckets}
	off += l.wait.words()
	l.deferred = histogram{off: off, bounds: deferBuckets}
	off += l.deferred.words()
	for range routes {
		b := routeBlock{duration: histogram{off: off, bounds: durationBuckets}}
		off += b.duration.words()
		b.codes = off
		off += 2*codeEntries + 1
		l.route = append(l.route, b)
	}
	l.perSlot = off
	l.table = shm.Layout{Kind: "metrics", Version: schemaVersion(routes), Size: Slots, Words: Slots*l.perSlot + poolWords}
	return l
}

// The pool's words, after the slots: the listen-queue sampler's state.
const (
	pSampledAt = iota // shm.Clock ns of the last sample, whoever took it
	pFullNs           // counter: ns the accept queue was seen full
	pQueues           // gauge: how many sockets' queues follow (at most maxQueues)
	pQueue            // maxQueues times queueWords: length, limit, address
	poolWords  = pQueue + maxQueues*queueWords
)

// schemaVersion is the layout version in the table's file name: a hash of
// everything that places words, so binaries that disagree on it (a rolling
// upgrade that adds a route) map different files instead of misreading one.
func schemaVersion(routes []string) int {
	h := fnv.New32a()
	fmt.Fprintf(h, "metrics layout 3|%d|%v|%v|%v|%v|%v|%d|%d|%d", wExits, ExitResults, RecycleReasons, waitBuckets, deferBuckets, durationBuckets, codeEntries, maxQueues, queueWords)
	h.Write([]byte(strings.Join(routes, "\x00"))) // in order: the order places the blocks
	return int(h.Sum32() & 0x7fffffff)
}

func (l *layout) routeIndex(route string) int {
	for i, r := range l.routes {
		if r == route {
			return i
		}
	}
	return -1
}
