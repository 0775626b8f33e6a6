package systemd_test

import (
	"fmt"
	"github.com/clusterapp/clusterapp/systemd/sandbox"
	"strconv"
	"strings"
	"testing"
	"time"
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
	unit := "clusterapp-worker@1.service"
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
	unit := "clusterapp-worker@1.service"
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
	unit := "clusterapp-worker@1.service"
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

// assertWatchdogKill checks the journal: systemd's watchdog timeout for pid,
// SIGABRT, and Go's goroutine dump showing where it was stuck.
func assertWatchdogKill(t *testing.T, b *sandbox.Box, unit string, pid int) {
	t.Helper()
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit)
	for _, want := range []string{
		"Watchdog timeout",
		fmt.Sprintf("Killing process %d (clusterapp) with signal SIGABRT", pid),
		"goroutine ",
		"Failed with result 'watchdog'",
	} {
		if !strings.Contains(journal, want) {
			t.Fatalf("journal lacks %q:\n%s", want, journal)
		}
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
	b.WriteFile("/etc/systemd/system/clusterapp-worker@2.service.d/crash.conf", "[Service]\nEnvironment=CLUSTERAPP_FIB_MAX_N=bogus\n")
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "start", "clusterapp.socket")
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 1") {
		t.Fatalf("first request: %q %v", out, err)
	}
	b.Eventually(20*time.Second, "worker 2 restarted 5 times", func() bool {
		n, _ := strconv.Atoi(b.Show("clusterapp-worker@2.service", "NRestarts"))
		return n >= 5
	})
	res := b.Load("/", "-c", "8", "-d", "3s", "-keepalive=false")
	if res.Errors() != 0 || res.ByHeader["1"] != res.OK || res.OK == 0 {
		t.Fatalf("load with a crash-looping worker: %d ok, by worker %v, errors %v", res.OK, res.ByHeader, res.ErrorSamples)
	}
	if state := b.Show("clusterapp.socket", "ActiveState"); state != "active" {
		t.Fatalf("socket %s while a worker crash-loops", state)
	}
	if n, _ := strconv.Atoi(b.Show("clusterapp-worker@2.service", "NRestarts")); n < 5 {
		t.Fatalf("worker 2 NRestarts %d", n)
	}
	// Its restarts slow down (package crashloop), and systemctl status says
	// why while it waits (not in the 250 ms between an exit and a restart).
	b.Eventually(10*time.Second, "worker 2's status says why it waits", func() bool {
		return strings.Contains(b.Show("clusterapp-worker@2.service", "StatusText"), "bad configuration, failure")
	})
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", "clusterapp-worker@2.service")
	if !strings.Contains(journal, `CLUSTERAPP_FIB_MAX_N="bogus" is invalid: expected a whole number`) {
		t.Fatalf("journal of the crash-looping worker lacks the reason:\n%s", journal)
	}
}
