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
// killed. With worker 1 ordered before the others (Before=, the generator
// before 2026-12-03), worker 2's restart job waited behind worker 1's start
// jobs, one after the other, for good: measured, still not back after
// 44 s. Now the order runs through clusterapp-first.target, which is
// active since the pool started, so worker 2's restart has nothing to wait
// for.
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
	// Waiting for the failing worker 1 would show as a job of the
	// first-up target, which times out after a second.
	if out := b.Must("journalctl", "--no-pager", "-o", "cat", "-u", config.FirstTarget); strings.Contains(out, "timed out") {
		t.Errorf("%s waited for the failing worker 1:\n%s", two, out)
	}
	if got := b.Show(config.FirstTarget, "ActiveState"); got != "active" {
		t.Errorf("%s is %s while worker 2 runs: the next restart of worker 2 would wait for worker 1", config.FirstTarget, got)
	}
	if b.AllActive(one) {
		t.Fatalf("%s is active: the test did not break it", one)
	}
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 2") {
		t.Fatalf("the pool does not serve with worker 2 back: %q, %v", out, err)
	}
}

// On a cold start the worker the first connection starts comes up first,
// every cold start (the order re-arms once the pool has stopped), and a
// worker 1 that hangs before READY=1 holds up the others for a second at
// most. Worker 1 is made slow to start with an ExecStartPre= of its own:
// 0.4 s twice, then 3 s. Read on systemd's clock, from the journal.
func TestColdStartBringsWorkerOneUpFirst(t *testing.T) {
	const n = 4
	b := sandbox.New(t, sandbox.Options{Env: fmt.Sprintf("CLUSTERAPP_WORKERS=%d\n", n)})
	slow := "/etc/systemd/system/" + config.WorkerUnit(1) + ".d/90-slow.conf"
	stopAll := func() time.Time {
		b.Must("systemctl", "stop", config.TargetUnit, config.WorkerPattern, config.SocketUnit, config.MetricsSocketUnit)
		// The first-up target stops by itself once workers 2..N are gone
		// (StopWhenUnneeded=), so the next cold start orders them again.
		b.Eventually(5*time.Second, config.FirstTarget+" stopped with the pool", func() bool {
			return b.Show(config.FirstTarget, "ActiveState") == "inactive"
		})
		return time.Now()
	}

	// Slow: the others wait, and come up after it (they start after
	// clusterapp-first.target, ordered after worker 1), so their hardened
	// spawns do not share the CPUs with worker 1's before it answers
	// (docs/benchmarks.md, "Worker 1 up first, by a target").
	b.WriteFile(slow, "[Service]\nExecStartPre=/bin/sleep 0.4\n")
	b.Must("systemctl", "daemon-reload")
	var since time.Time
	for round := 1; round <= 2; round++ {
		b.Start(n)
		first := readyAt(t, b, 1, since)
		for i := 2; i <= n; i++ {
			if at := ranAt(t, b, i, since); at.Before(first) {
				t.Errorf("cold start %d: %s ran at %s, before %s was ready (%s): it did not wait", round, config.WorkerUnit(i), at.Format(stamp), config.WorkerUnit(1), first.Format(stamp))
			}
		}
		since = stopAll()
	}

	// Hung: the others wait a second, then start without it, and
	// systemd's journal says why.
	b.WriteFile(slow, "[Service]\nExecStartPre=/bin/sleep 3\n")
	b.Must("systemctl", "daemon-reload")
	b.Start(n)
	first := readyAt(t, b, 1, since)
	for i := 2; i <= n; i++ {
		if at := readyAt(t, b, i, since); !at.Before(first.Add(-time.Second)) {
			t.Errorf("%s ready at %s, %s ready at %s: the others waited for the hung worker 1", config.WorkerUnit(i), at.Format(stamp), config.WorkerUnit(1), first.Format(stamp))
		}
	}
	if out := b.Must("journalctl", "--no-pager", "-o", "cat", "-u", config.FirstTarget, "--since", "@"+strconv.FormatInt(since.Unix()-1, 10)); !strings.Contains(out, "Timed out starting") {
		t.Errorf("the journal does not say why workers 2..%d started without worker 1:\n%s", n, out)
	}
	// An ordering cycle is not an error to systemd: it deletes a job to
	// break it and goes on, so only the journal tells.
	if out := b.Must("journalctl", "--no-pager", "-o", "cat"); strings.Contains(out, "ordering cycle") {
		t.Errorf("systemd found an ordering cycle:\n%s", out)
	}
	if t.Failed() {
		t.Log(b.Must("journalctl", "--no-pager", "-o", "short-precise", "-u", "clusterapp-worker@*", "-u", config.FirstTarget))
	}
}

// Stopping the pool drains every worker at once: nothing orders worker 1's
// stop after the others' (with Before= on worker 1, or workers 2..N
// ordered after worker 1 itself, systemd reverses the order on stop: worker
// 1 drained only once workers 2..N had finished, up to twice
// CLUSTERAPP_SHUTDOWN_TIMEOUT; the second failed this test).
// Worker 2 takes 2 s longer to stop (an ExecStopPost= of its own); worker
// 1 must be told to stop before worker 2 is done.
func TestPoolStopsWorkersTogether(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	one, two := config.WorkerUnit(1), config.WorkerUnit(2)
	b.WriteFile("/etc/systemd/system/"+two+".d/90-slow-stop.conf", "[Service]\nExecStopPost=/bin/sleep 2\n")
	b.Must("systemctl", "daemon-reload")
	b.Start(2)
	since := time.Now()
	b.Must("systemctl", "stop", config.TargetUnit)
	stopping := journalAt(t, b, 1, since, "Stopping "+one, false)
	stopped := journalAt(t, b, 2, since, "Stopped "+two, false)
	if !stopping.Before(stopped) {
		t.Errorf("%s began to stop at %s, after %s had stopped (%s): it drained after the others", one, stopping.Format(stamp), two, stopped.Format(stamp))
		t.Log(b.Must("journalctl", "--no-pager", "-o", "short-precise", "-u", "clusterapp-worker@*", "-u", config.FirstTarget))
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
