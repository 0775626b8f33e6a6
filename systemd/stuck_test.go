package systemd_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// stuckEnv: one worker of two admission slots, computations cut at 3 s
// (CLUSTERAPP_REQUEST_TIMEOUT), answers written within 6 s of the request
// (CLUSTERAPP_WRITE_TIMEOUT, which counts the 2 s admission wait too), a 2 s
// watchdog. A slot held over 8 s (6 s and the 2 s grace) is stuck.
const stuckEnv = "CLUSTERAPP_WORKERS=1\nCLUSTERAPP_WATCHDOG_SEC=2s\nCLUSTERAPP_DEBUG_ENDPOINTS=true\n" +
	"CLUSTERAPP_MAX_IN_FLIGHT=2\nCLUSTERAPP_ADMISSION_WAIT=2s\nCLUSTERAPP_WRITE_TIMEOUT=6s\nCLUSTERAPP_REQUEST_TIMEOUT=3s\n"

// A worker whose every admission slot is held by a request that never
// returns (/debug/hang?slot=1: a handler deadlocked on its own, while the
// stack and /healthz still answer) refuses every client with 503 for good.
// Its watchdog must stop being fed and systemd must replace it; a worker
// that is only busy, its slots taken back to back by computations that run
// to their deadline for longer than the watchdog timeout, must not be.
func TestWatchdogRestartsWorkerWithEverySlotStuck(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: stuckEnv})
	b.Start(1)
	unit := config.WorkerUnit(1)
	old := b.MainPID(unit)

	// (a) Busy: four clients keep both slots taken, back to back, each
	// computation running to its 3 s deadline, for 12 s (6 watchdog timeouts).
	busy := b.Load("/fib?n=45", "-c", "4", "-d", "12s", "-timeout", "10s")
	if busy.Responses == 0 || busy.ConnectErrors+busy.ReadErrors+busy.Timeouts+busy.OtherErrors > 0 {
		t.Fatalf("busy load: %d responses %v, errors %v", busy.Responses, busy.StatusCodes, busy.ErrorSamples)
	}
	if pid, n := b.MainPID(unit), b.Show(unit, "NRestarts"); pid != old || n != "0" {
		t.Fatalf("a busy worker was restarted: MainPID %d -> %d, NRestarts %s\n%s", old, pid, n,
			b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit))
	}
	if j := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit); strings.Contains(j, "withholding watchdog pings") {
		t.Fatalf("a busy worker failed its health probe:\n%s", j)
	}

	// (b) Stuck: two requests take both slots and never return.
	for range 2 {
		go b.Run("curl", "-s", "--max-time", "40", "http://127.0.0.1:8080/debug/hang?slot=1")
	}
	b.Eventually(10*time.Second, "every client shed", func() bool {
		out, _ := b.Curl("/")
		return strings.HasPrefix(out, "503 ")
	})
	took := b.Eventually(30*time.Second, "stuck worker replaced", func() bool {
		pid := b.MainPID(unit)
		return pid != 0 && pid != old && b.AllActive(unit)
	})
	t.Logf("stuck worker replaced %v after every client was shed", took)
	assertWatchdogKill(t, b, unit, old)
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit)
	if !strings.Contains(journal, "stuck: all 2 admission slots") {
		t.Fatalf("the worker did not say why its health probe failed:\n%s", journal)
	}
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 ") {
		t.Fatalf("request after the restart: %q %v", out, err)
	}
	if n, _ := strconv.Atoi(b.Show(unit, "NRestarts")); n != 1 {
		t.Fatalf("NRestarts = %d, want the one watchdog kill", n)
	}
}
