package systemd_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// A worker 1 that cannot start holds up no other worker. Worker 1 gets a
// setting only it reads as invalid, so it fails in its configuration
// back-off (waiting before it exits, 250 ms doubling); then worker 2 is
// killed. With worker 1 ordered before the others (Before=, the previous
// generator), worker 2's restart job waited behind worker 1's start jobs,
// one after the other, for good: measured, still not back after 44 s.
func TestWorkerOneFailingHoldsUpNoOtherWorker(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	b.Start(2)
	one, two := config.WorkerUnit(1), config.WorkerUnit(2)
	b.WriteFile("/etc/systemd/system/"+one+".d/90-broken.conf", "[Service]\nEnvironment=CLUSTERAPP_LOG_LEVEL=bogus\n")
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "restart", "--no-block", one)
	// From the third failure on, each back-off is a second or more.
	b.Eventually(20*time.Second, one+" failing in a loop", func() bool {
		n, _ := strconv.Atoi(b.Show(one, "NRestarts"))
		return n >= 3
	})
	old := b.MainPID(two)
	b.Must("kill", "-9", strconv.Itoa(old))
	took := b.Eventually(15*time.Second, two+" replaced while "+one+" backs off", func() bool {
		pid := b.MainPID(two)
		return pid != 0 && pid != old && b.AllActive(two)
	})
	t.Logf("%s serving again %v after its kill (polled), while %s fails", two, took.Round(time.Millisecond), one)
	if out := b.Must("journalctl", "--no-pager", "-o", "cat", "-u", two); strings.Contains(out, "for worker 1") {
		t.Errorf("%s waited for the failing worker 1:\n%s", two, out)
	}
	if b.AllActive(one) {
		t.Fatalf("%s is active: the test did not break it", one)
	}
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 2") {
		t.Fatalf("the pool does not serve with worker 2 back: %q, %v", out, err)
	}
}

// On a cold start the worker the first connection starts comes up first,
// and a worker 1 that hangs before READY=1 holds up the others for a
// second at most. Worker 1 is made slow to start with an ExecStartPre= of
// its own: 0.4 s, then 3 s. Read on systemd's clock, from the journal.
func TestColdStartBringsWorkerOneUpFirst(t *testing.T) {
	const n = 4
	b := sandbox.New(t, sandbox.Options{Env: fmt.Sprintf("CLUSTERAPP_WORKERS=%d\n", n)})
	slow := "/etc/systemd/system/" + config.WorkerUnit(1) + ".d/90-slow.conf"

	// Slow: the others wait, and come up after it (the generator's
	// ExecStartPre= on workers 2..N), so their hardened spawns do not
	// share the CPUs with worker 1's before it answers (docs/benchmarks.md,
	// "Worker 1 up first").
	b.WriteFile(slow, "[Service]\nExecStartPre=/bin/sleep 0.4\n")
	b.Must("systemctl", "daemon-reload")
	b.Start(n)
	first := readyAt(t, b, 1, time.Time{})
	for i := 2; i <= n; i++ {
		if at := ranAt(t, b, i, time.Time{}); at.Before(first) {
			t.Errorf("%s ran at %s, before %s was ready (%s): it did not wait", config.WorkerUnit(i), at.Format(stamp), config.WorkerUnit(1), first.Format(stamp))
		}
	}

	// Hung: the others wait a second, then start without it.
	b.WriteFile(slow, "[Service]\nExecStartPre=/bin/sleep 3\n")
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "stop", config.TargetUnit, config.WorkerPattern, config.SocketUnit, config.MetricsSocketUnit)
	since := time.Now()
	b.Start(n)
	first = readyAt(t, b, 1, since)
	for i := 2; i <= n; i++ {
		if at := readyAt(t, b, i, since); !at.Before(first.Add(-time.Second)) {
			t.Errorf("%s ready at %s, %s ready at %s: the others waited for the hung worker 1", config.WorkerUnit(i), at.Format(stamp), config.WorkerUnit(1), first.Format(stamp))
		}
		if out := b.Must("journalctl", "--no-pager", "-o", "cat", "-u", config.WorkerUnit(i), "--since", "@"+strconv.FormatInt(since.Unix()-1, 10)); !strings.Contains(out, "for worker 1, which is starting for longer than 1s; starting without it") {
			t.Errorf("%s does not say why it started without worker 1:\n%s", config.WorkerUnit(i), out)
		}
	}
	if t.Failed() {
		t.Log(b.Must("journalctl", "--no-pager", "-o", "short-precise", "-u", "clusterapp-worker@*"))
	}
}

const stamp = "15:04:05.000000"

// readyAt is when worker i last sent READY=1 after since (systemd's
// "Started" line).
func readyAt(t *testing.T, b *sandbox.Box, i int, since time.Time) time.Time {
	return journalAt(t, b, i, since, "Started "+config.WorkerUnit(i), true)
}

// ranAt is when worker i's main process said its first line after since.
func ranAt(t *testing.T, b *sandbox.Box, i int, since time.Time) time.Time {
	return journalAt(t, b, i, since, "level=info", false)
}

// journalAt is the time of the first (or last) line of worker i's journal
// after since that holds what, waiting a while for journald to have it.
func journalAt(t *testing.T, b *sandbox.Box, i int, since time.Time, what string, last bool) time.Time {
	t.Helper()
	args := []string{"journalctl", "--no-pager", "-o", "short-unix", "-u", config.WorkerUnit(i)}
	if !since.IsZero() {
		args = append(args, "--since", "@"+strconv.FormatInt(since.Unix()-1, 10))
	}
	var at time.Time
	var out string
	for try := 0; try < 50 && at.IsZero(); try++ {
		if try > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		out = b.Must(args...)
		for _, line := range strings.Split(out, "\n") {
			stampText, _, _ := strings.Cut(line, " ")
			sec, err := strconv.ParseFloat(stampText, 64)
			if when := time.Unix(0, int64(sec*1e9)); err == nil && strings.Contains(line, what) && !when.Before(since) {
				at = when
				if !last {
					break
				}
			}
		}
	}
	if at.IsZero() {
		t.Fatalf("no line of %s holds %q:\n%s", config.WorkerUnit(i), what, out)
	}
	return at
}
