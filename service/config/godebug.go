package config

import (
	"strconv"
	"strings"
)

// MonitorTrace is the GODEBUG setting the worker unit starts workers with
// (Environment=GODEBUG=...): schedtrace at its longest period, 2^31-1 ms
// (24.8 days).
//
// The Go runtime's monitor thread (sysmon) goes into a deep sleep when
// every P is idle, and the next system call wakes it and puts it back on
// its shortest tick, 20 µs, until it has found nothing to do for a
// millisecond (golang/go#18236). A worker runs one P and idles between
// bursts of requests, so it lives in that cycle: with a new connection per
// request, sysmon's wake-ups and 20 µs ticks took a fifth of each worker's
// CPU. With any schedtrace period set, sysmon never sleeps deeply; it backs
// off to a 10 ms tick and stays there while there is nothing to retake or
// preempt. At rest that is 100 wake-ups a second per worker, but a worker
// at rest is not quiet either (its metrics sampler ticks every 100 ms, and
// sysmon's deep sleep ends at the next timer anyway): a pool of 2 at rest
// woke 266-293 threads a second with the setting, 316-334 without
// (TestWorkerRuntimeMonitorStaysAwake's logs).
//
// The period is the longest the runtime accepts, so the trace itself is not
// printed until the machine has been up 24.8 days (the runtime's clock
// counts from boot), and then once when a worker starts and every 24.8
// days after.
const MonitorTrace = "schedtrace=2147483647"

// MonitorAwake reports whether godebug (a GODEBUG value) keeps sysmon out
// of its deep sleep: a schedtrace period above 0. Like the runtime at
// start, it reads the settings left to right, a later one replacing an
// earlier one, and skips a value that is not a 32-bit number.
func MonitorAwake(godebug string) bool {
	period := int64(0)
	for _, field := range strings.Split(godebug, ",") {
		key, value, ok := strings.Cut(field, "=")
		if !ok || key != "schedtrace" {
			continue
		}
		if n, err := strconv.ParseInt(value, 10, 32); err == nil {
			period = n
		}
	}
	return period > 0
}

// MonitorAdvice is what the worker logs, and `clusterapp config --check`
// prints, when a GODEBUG replaces the unit's without keeping MonitorTrace.
const MonitorAdvice = "the Go runtime's monitor thread then sleeps whenever a worker idles and ticks every 20 µs after it wakes, " +
	"which costs a pool a fifth of its CPU under new connections: the worker unit sets GODEBUG=" + MonitorTrace +
	", and a GODEBUG in the environment file replaces it; add " + MonitorTrace + " to that one (docs/operations.md)"
