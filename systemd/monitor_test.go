package systemd_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// The worker unit keeps the Go runtime's monitor thread awake
// (config.MonitorTrace): a worker idles between connections, and with
// sysmon's deep sleep every idle spell ends in a wake-up and a run of 20 µs
// ticks. An operator sees the setting in the worker's environment, and the
// thread wake-ups per one-request connection of a pool of 2 drop to well
// under what the same pool costs with GODEBUG=schedtrace=0 in the
// environment file, which also gets the worker's warning in the journal.
func TestWorkerRuntimeMonitorStaysAwake(t *testing.T) {
	const workers, conns = 2, 2000
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	b.Start(workers)
	for i := 1; i <= workers; i++ {
		environ := b.Must("sh", "-c", "tr '\\0' '\\n' < /proc/"+strconv.Itoa(b.MainPID(config.WorkerUnit(i)))+"/environ")
		if !strings.Contains(environ, "\nGODEBUG="+config.MonitorTrace+"\n") && !strings.HasPrefix(environ, "GODEBUG="+config.MonitorTrace+"\n") {
			t.Fatalf("worker %d runs without GODEBUG=%s; its environment:\n%s", i, config.MonitorTrace, environ)
		}
	}
	awake, _ := connWakeups(t, b, workers, conns, 4) // idle wake-ups included: the setting pays its own

	b.WriteEnv("CLUSTERAPP_WORKERS=2\nGODEBUG=schedtrace=0\n")
	since := strings.TrimSpace(b.Must("date", "+%s"))
	b.Must("systemctl", "restart", "clusterapp.target")
	b.Eventually(30*time.Second, "workers active again", func() bool { return b.AllActive(b.WorkerUnits(workers)...) })
	asleep, _ := connWakeups(t, b, workers, conns, 4)
	t.Logf("thread wake-ups per one-request connection, pool of %d: %.2f with the unit's GODEBUG, %.2f with schedtrace=0", workers, awake, asleep)
	if awake > asleep*0.6 {
		t.Fatalf("with sysmon kept awake the pool took %.2f thread wake-ups per connection, against %.2f with its deep sleep: want at most 60%%", awake, asleep)
	}
	journal := b.Must("journalctl", "--since", "@"+since, "--no-pager", "-o", "cat", "-u", config.WorkerUnit(1))
	if !strings.Contains(journal, "add "+config.MonitorTrace) {
		t.Fatalf("worker 1 started without the setting and did not say so:\n%s", journal)
	}
}
