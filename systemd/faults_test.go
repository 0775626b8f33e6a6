package systemd_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
	"github.com/clusterapp/clusterapp/service/worker/crashloop"
	"github.com/clusterapp/clusterapp/service/worker/logging"
)

// Scenario 2: kill -9 a worker under a bounded loopback load. A new one
// serves shortly after, NRestarts grows, no connection is refused, and only
// the requests in flight on that worker are lost.
func TestKill9UnderLoad(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	b.Start(2)
	const clients = 16
	wait := b.LoadAsync("/fib?n=20", "-c", strconv.Itoa(clients), "-d", "4s")
	time.Sleep(time.Second)
	unit := config.WorkerUnit(1)
	old := b.MainPID(unit)
	b.Must("kill", "-9", strconv.Itoa(old))
	took := b.Eventually(10*time.Second, "a new worker 1 active", func() bool {
		pid := b.MainPID(unit)
		return pid != 0 && pid != old && b.AllActive(unit)
	})
	t.Logf("new worker 1 ready %v after kill -9", took.Round(time.Millisecond))
	res := wait()
	t.Logf("load: %d requests, %d ok, connect errors %d, read errors %d, by worker %v", res.Requests, res.OK, res.ConnectErrors, res.ReadErrors, res.ByHeader)
	if n, _ := strconv.Atoi(b.Show(unit, "NRestarts")); n < 1 {
		t.Fatalf("NRestarts = %d after kill -9", n)
	}
	if res.ConnectErrors != 0 {
		t.Fatalf("%d connections refused while systemd held the socket", res.ConnectErrors)
	}
	// Each client has one request in flight at a time: at most the clients
	// connected to the killed worker can lose one.
	if lost := res.Errors(); lost > clients {
		t.Fatalf("%d requests lost, more than the %d that can be in flight: %v", lost, clients, res.ErrorSamples)
	}
}

// Scenario 3a: a frozen worker (SIGSTOP) stops pinging; the watchdog kills
// it with SIGABRT (goroutine dump in the journal) and it comes back.
func TestWatchdogRestartsFrozenWorker(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\nCLUSTERAPP_WATCHDOG_SEC=2s\n"})
	b.Start(1)
	unit := config.WorkerUnit(1)
	old := b.MainPID(unit)
	b.Must("kill", "-STOP", strconv.Itoa(old))
	b.Eventually(15*time.Second, "frozen worker replaced", func() bool {
		pid := b.MainPID(unit)
		return pid != 0 && pid != old && b.AllActive(unit)
	})
	assertWatchdogKill(t, b, unit, old)
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 ") {
		t.Fatalf("request after the restart: %q %v", out, err)
	}
}

// Scenario 3b: a worker wedged behind a lock (/debug/hang) still runs, but
// its health probe cannot pass: the watchdog catches it too.
func TestWatchdogRestartsWedgedWorker(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\nCLUSTERAPP_WATCHDOG_SEC=2s\nCLUSTERAPP_DEBUG_ENDPOINTS=true\n"})
	b.Start(1)
	unit := config.WorkerUnit(1)
	old := b.MainPID(unit)
	go b.Run("curl", "-s", "--max-time", "20", "http://127.0.0.1:8080/debug/hang")
	b.Eventually(15*time.Second, "wedged worker replaced", func() bool {
		pid := b.MainPID(unit)
		return pid != 0 && pid != old && b.AllActive(unit)
	})
	assertWatchdogKill(t, b, unit, old)
	journal := b.Must("journalctl", "-b", "--no-pager", "-u", unit)
	if !strings.Contains(journal, "withholding watchdog pings") {
		t.Fatalf("the worker did not log its failing health probe:\n%s", journal)
	}
}

// workerComm is the worker process's name as systemd logs it: the kernel
// keeps the first 15 bytes of the executable's name (TASK_COMM_LEN).
var workerComm = func() string { c := filepath.Base(config.WorkerBinary); return c[:min(len(c), 15)] }()

// assertWatchdogKill checks the journal: systemd's watchdog timeout for pid,
// SIGABRT, and Go's goroutine dump showing where it was stuck.
func assertWatchdogKill(t *testing.T, b *sandbox.Box, unit string, pid int) {
	t.Helper()
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit)
	for _, want := range []string{
		"Watchdog timeout",
		fmt.Sprintf("Killing process %d (%s) with signal SIGABRT", pid, workerComm),
		"goroutine ",
		"Failed with result 'watchdog'",
	} {
		if !strings.Contains(journal, want) {
			t.Fatalf("journal lacks %q:\n%s", want, journal)
		}
	}
	// The dump is stderr, tagged as the worker's native lines are (SyslogIdentifier=).
	if dump := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-t", "clusterapp", "_SYSTEMD_UNIT="+unit); !strings.Contains(dump, "goroutine ") {
		t.Fatalf("journalctl -t clusterapp lacks the goroutine dump:\n%s", dump)
	}
	if n, _ := strconv.Atoi(b.Show(unit, "NRestarts")); n < 1 {
		t.Fatalf("NRestarts = %d after a watchdog kill", n)
	}
}

// Scenario 4: a worker that crash-loops. The socket stays active and the
// other workers keep serving every request.
func TestCrashLoopingWorkerDoesNotHurtThePool(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	// Worker 2 alone gets an invalid setting: it exits 78 at every start.
	b.WriteFile("/etc/systemd/system/"+config.WorkerUnit(2)+".d/crash.conf", "[Service]\nEnvironment=CLUSTERAPP_FIB_MAX_N=bogus\n")
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "start", config.SocketUnit)
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 1") {
		t.Fatalf("first request: %q %v", out, err)
	}
	b.Eventually(20*time.Second, "worker 2 restarted 5 times", func() bool {
		n, _ := strconv.Atoi(b.Show(config.WorkerUnit(2), "NRestarts"))
		return n >= 5
	})
	res := b.Load("/", "-c", "8", "-d", "3s", "-keepalive=false")
	if res.Errors() != 0 || res.ByHeader["1"] != res.OK || res.OK == 0 {
		t.Fatalf("load with a crash-looping worker: %d ok, by worker %v, errors %v", res.OK, res.ByHeader, res.ErrorSamples)
	}
	if state := b.Show(config.SocketUnit, "ActiveState"); state != "active" {
		t.Fatalf("socket %s while a worker crash-loops", state)
	}
	if n, _ := strconv.Atoi(b.Show(config.WorkerUnit(2), "NRestarts")); n < 5 {
		t.Fatalf("worker 2 NRestarts %d", n)
	}
	// Its restarts slow down (package crashloop), and systemctl status says
	// why while it waits (not in the moment between an exit and a restart).
	b.Eventually(10*time.Second, "worker 2's status says why it waits", func() bool {
		return strings.Contains(b.Show(config.WorkerUnit(2), "StatusText"), "bad configuration, failure")
	})
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", config.WorkerUnit(2))
	if !strings.Contains(journal, `CLUSTERAPP_FIB_MAX_N="bogus" is invalid: expected a whole number`) {
		t.Fatalf("journal of the crash-looping worker lacks the reason:\n%s", journal)
	}
}

// A worker killed once after serving a while is replaced at once
// (RestartSec=0); one that keeps dying soon after each start waits longer
// before serving at each start in a row (package crashloop), says why in
// STATUS= and the journal (MESSAGE_ID=), and a clean restart starts afresh.
func TestRestartsArePacedOnlyInALoop(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\n"})
	b.Start(1)
	unit := config.WorkerUnit(1)
	backOffs := func() []journalEntry {
		return journalEntries(b, "-u", unit, "MESSAGE_ID="+logging.MsgRestartBackOff)
	}
	kill := func() {
		old := b.MainPID(unit)
		b.Must("kill", "-9", strconv.Itoa(old))
		b.Eventually(30*time.Second, "a new worker 1 active", func() bool {
			pid := b.MainPID(unit)
			return pid != 0 && pid != old && b.AllActive(unit)
		})
	}

	// Serving longer than crashloop.StableAfter: the first crash is not a loop.
	time.Sleep(crashloop.StableAfter + time.Second)
	since := b.Must("date", "+%s.%N")
	kill()
	if n := len(backOffs()); n != 0 {
		t.Fatalf("a single crash after a stable run backed off: %d back-off lines", n)
	}
	// kill -9 to READY=1, from systemd's own timestamps.
	timeline := b.Must("journalctl", "-q", "--since", "@"+since[:len(since)-3], "-o", "short-unix", "--no-pager", "-u", unit)
	var killed, ready float64
	for _, l := range strings.Split(timeline, "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			ts, _ := strconv.ParseFloat(f[0], 64)
			switch {
			case strings.Contains(l, "Main process exited"):
				killed = ts
			case strings.Contains(l, "Started clusterapp-worker"):
				ready = ts
			}
		}
	}
	t.Logf("kill -9 to the new worker's READY=1: %.0f ms (journal timestamps)", (ready-killed)*1000)

	// Three more deaths, each soon after the start before it: starts 2, 3, 4
	// in a row, each waiting (250 ms, 500 ms, 1 s) and saying so.
	kill()
	kill()
	old := b.MainPID(unit)
	b.Must("kill", "-9", strconv.Itoa(old))
	b.Eventually(5*time.Second, "STATUS= says why the worker waits", func() bool {
		return strings.Contains(b.Show(unit, "StatusText"), "times in a row without running")
	})
	b.Eventually(10*time.Second, "worker 1 serving again", func() bool {
		pid := b.MainPID(unit)
		return pid != 0 && pid != old && b.AllActive(unit)
	})
	lines := backOffs()
	var starts []string
	for _, e := range lines {
		starts = append(starts, e["STARTS"])
		e.want(t, "PRIORITY", "4")
		e.want(t, "WORKER", "1")
	}
	if strings.Join(starts, ",") != "2,3,4" {
		t.Errorf("back-off lines for starts %v, want 2,3,4", starts)
	}

	// A restart by the operator during a wait ends it, and the start after
	// it is a first one: no wait.
	b.Must("kill", "-9", strconv.Itoa(b.MainPID(unit)))
	b.Eventually(5*time.Second, "worker 1 waiting at its 5th start", func() bool {
		return strings.Contains(b.Show(unit, "StatusText"), "started 5 times in a row")
	})
	b.Must("systemctl", "restart", unit)
	if n := len(backOffs()); n != len(lines)+1 {
		t.Errorf("the start after an operator's restart backed off: %d back-off lines, want %d", n, len(lines)+1)
	}

	// A clean restart (the worker drains) is not a crash: no wait after it.
	b.Must("systemctl", "restart", unit)
	if n := len(backOffs()); n != len(lines)+1 {
		t.Errorf("a clean restart backed off: %d back-off lines, want %d", n, len(lines)+1)
	}
}

// A worker whose process dies before the worker's code runs, at every
// start: here a drop-in's SystemCallFilter= under which the Go runtime
// cannot create a thread ("failed to create new OS thread", status 2 and a
// stack dump). The worker's own pacing never runs, and systemd restarts at
// once forever: measured before, 117 restarts and 14,000 journal lines in
// 10 s for that one worker (6 and 240 now). The unit's ExecStopPost=+ (outside the sandbox)
// paces it (crashloop.Unreached); the other worker serves; a stop ends
// within the 5 s cap; once the drop-in is gone the worker starts, and a
// kill -9 of it is a plain crash again, replaced without a wait.
func TestStartsThatNeverReachTheWorkerArePaced(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	unit := config.WorkerUnit(2)
	dropIn := "/etc/systemd/system/" + unit + ".d/tight.conf"
	b.WriteFile(dropIn, "[Service]\nSystemCallFilter=~clone clone3\n")
	b.Must("systemctl", "daemon-reload")
	b.Start(1)
	b.Must("systemctl", "start", "--no-block", unit)
	const window = 10 * time.Second
	time.Sleep(window)
	restarts, _ := strconv.Atoi(b.Show(unit, "NRestarts"))
	lines := len(strings.Split(b.Must("journalctl", "-b", "-q", "--no-pager", "-o", "cat", "-u", unit), "\n"))
	t.Logf("in %v: %d restarts, %d journal lines of %s", window, restarts, lines, unit)
	// Paced: 0, 0, 250 ms, 500 ms, 1 s, 2 s, 4 s... about 8 in 10 s.
	// Unpaced: about 100.
	if restarts < 3 || restarts > 25 {
		t.Errorf("%d restarts in %v, want 3 to 25 (a loop paced 250 ms doubling to 5 s)", restarts, window)
	}
	backOffs := journalEntries(b, "-u", unit, "MESSAGE_ID="+logging.MsgUnreachedBackOff)
	if len(backOffs) == 0 {
		t.Fatalf("no back-off line (MESSAGE_ID=%s) for %s", logging.MsgUnreachedBackOff, unit)
	}
	for i, e := range backOffs {
		e.want(t, "WORKER", "2")
		e.want(t, "PRIORITY", "4")
		e.want(t, "STARTS", strconv.Itoa(i+1))
		e.want(t, "EXIT", "code=exited, status=2")
	}
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 1") {
		t.Fatalf("worker 1 while worker 2 loops: %q %v", out, err)
	}
	stop := time.Now()
	b.Must("systemctl", "stop", unit)
	t.Logf("systemctl stop during the loop took %v", time.Since(stop).Round(time.Millisecond))
	if state := b.Show(unit, "ActiveState"); state != "inactive" && state != "failed" {
		t.Fatalf("%s is %s after systemctl stop", unit, state)
	}

	// Fixed: the worker starts, removes the mark, and a crash after that is
	// a first one: no wait before the restart.
	b.Must("rm", dropIn)
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "start", unit)
	if out := b.Must("sh", "-c", "ls /run/clusterapp/"); strings.Contains(out, "unreached-starts.2") {
		t.Fatalf("the mark is still there once worker 2 runs: %s", out)
	}
	old := b.MainPID(unit)
	b.Must("kill", "-9", strconv.Itoa(old))
	b.Eventually(10*time.Second, "worker 2 replaced", func() bool {
		pid := b.MainPID(unit)
		return pid != 0 && pid != old && b.AllActive(unit)
	})
	if n := len(journalEntries(b, "-u", unit, "MESSAGE_ID="+logging.MsgUnreachedBackOff)); n != len(backOffs) {
		t.Fatalf("a kill -9 of a running worker was paced as a start that never reached it: %d back-off lines, want %d", n, len(backOffs))
	}
}
