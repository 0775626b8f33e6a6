// Package status is the worker's STATUS= line, written and read side by
// side: the worker sends it to systemd (sd_notify), `systemctl status` shows
// it, and `clusterapp status` reads it back over D-Bus to show each worker's
// load. A change to the format is a change to both functions here, and the
// round-trip test holds them together.
//
// "In flight" has one meaning in the whole suite: requests inside a route's
// handler, admitted and not queued. It is what CLUSTERAPP_MAX_IN_FLIGHT caps
// and what clusterapp_http_requests_in_flight counts. Requests waiting for
// an admission slot are "queued".
package status

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
)

// Load is what a serving worker reports about itself.
type Load struct {
	Served      int64 // requests served since the process started
	InFlight    int64 // inside a route's handler now (admitted, not queued)
	Queued      int64 // waiting for an admission slot
	Connections int64 // client connections open
}

// Serving is the line of a serving worker.
func Serving(l Load) string {
	return fmt.Sprintf("serving: %d requests served, %d in flight, %d queued, %d connections open", l.Served, l.InFlight, l.Queued, l.Connections)
}

// Draining is the line of a draining worker: the same numbers, so an
// operator sees what it still finishes.
func Draining(l Load) string {
	return fmt.Sprintf("draining: %d requests served, %d in flight, %d queued, %d connections open", l.Served, l.InFlight, l.Queued, l.Connections)
}

// serving matches a Serving line. It is compiled on first use: only the
// operator tools parse these lines, and a worker would otherwise pay for the
// compilation at every start (0.4 ms of its package initialisation).
var serving = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^serving: (\d+) requests served, (\d+) in flight, (\d+) queued, (\d+) connections open$`)
})

// Parse reads a line Serving wrote. ok is false for any other text
// (starting, draining, backing off, another program's line), which callers
// show as it is.
func Parse(text string) (l Load, ok bool) {
	m := serving().FindStringSubmatch(text)
	if m == nil {
		return Load{}, false
	}
	n := make([]int64, 4)
	for i := range n {
		v, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil {
			return Load{}, false // more digits than an int64 holds
		}
		n[i] = v
	}
	return Load{Served: n[0], InFlight: n[1], Queued: n[2], Connections: n[3]}, true
}
