package systemd_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
)

// untilJob is a shell loop, for sh -c, that waits until unit has a job of
// type job (systemctl list-jobs) or 10 s have passed.
func untilJob(unit, job string) string {
	return fmt.Sprintf("for i in $(seq 200); do systemctl list-jobs --no-legend %s | grep -q ' %s ' && break; sleep 0.05; done; ", unit, job)
}

// An operator's `systemctl stop clusterapp-worker@2.service` (its stop
// takes 6 s) running when a reload reaches worker 2: the reload's restart
// job, in "replace" mode, canceled the operator's stop ("Job for ...
// canceled.", exit status 1). Now the reload says it waits for that job,
// waits, reads the worker's state, and then restarts it, which starts it
// again (the target wants it): the stop succeeds, the reload too, and
// every worker serves after it.
func TestOpsReloadWaitsForForeignStop(t *testing.T) {
	b := slowBox(t, 3)
	unit := config.WorkerUnit(2)
	b.WriteFile("/etc/systemd/system/clusterapp-worker@2.service.d/91-slow-stop.conf", "[Service]\nExecStop=/bin/sleep 6\n")
	b.Must("systemctl", "daemon-reload")
	out, err := b.Run("sh", "-c", "systemctl stop "+unit+" & stop=$!; "+untilJob(unit, "stop")+
		"clusterapp reload; echo reload exit status $?; wait $stop; echo stop exit status $?")
	t.Logf("systemctl stop %s during clusterapp reload (%v):\n%s", unit, err, out)
	for _, want := range []string{
		"a systemctl job (stop " + unit + ") is running: waiting for it",
		unit + " is inactive/dead after that job: restarting it now",
		"reload exit status 0",
		"stop exit status 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output does not say %q:\n%s", want, out)
		}
	}
	if !allActive(b, 3) {
		t.Errorf("after the reload: active %v, want every worker", b.ActiveWorkers())
	}
}

// `systemctl stop clusterapp-worker@2.service` while the reload's own
// restart of worker 2 waits for its READY=1: the stop canceled the
// reload's job, and the reload stopped there ("job canceled"), exit 1,
// with worker 2 down and worker 3 not restarted. Now it names the job
// that canceled it, waits for it, and restarts worker 2 once more: the
// reload succeeds and every worker serves.
func TestOpsReloadRetriesACanceledRestart(t *testing.T) {
	b := slowBox(t, 3)
	unit := config.WorkerUnit(2)
	pid2 := b.MainPID(unit)
	out, err := b.Run("sh", "-c", "clusterapp reload & pid=$!; "+
		fmt.Sprintf("for i in $(seq 400); do [ \"$(systemctl show -p MainPID --value %s)\" != %d ] && break; sleep 0.05; done; ", unit, pid2)+
		untilState(unit, "activating")+"systemctl stop "+unit+"; echo stop exit status $?; wait $pid; echo reload exit status $?")
	t.Logf("systemctl stop %s during the reload's restart of it (%v):\n%s", unit, err, out)
	for _, want := range []string{
		"our restart of " + unit + " was canceled",
		"trying once more",
		"reload exit status 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output does not say %q:\n%s", want, out)
		}
	}
	if !allActive(b, 3) {
		t.Errorf("after the reload: active %v, want every worker", b.ActiveWorkers())
	}
}

// A worker systemd is starting already when `clusterapp scale 3` runs (an
// operator's restart, its start taking 8 s): scale left it to systemd and
// said "scaled to 3 workers" while it was still starting. Now scale waits
// until it serves.
func TestOpsScaleWaitsForAStartingWorker(t *testing.T) {
	b := slowBox(t, 2)
	unit := config.WorkerUnit(2)
	b.WriteFile("/etc/systemd/system/clusterapp-worker@2.service.d/91-slower-start.conf", "[Service]\nExecStartPre=/bin/sleep 6\n")
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "restart", "--no-block", unit)
	b.Eventually(10*time.Second, "worker 2 starting", func() bool { return b.Show(unit, "ActiveState") == "activating" })
	out, err := b.Run("clusterapp", "scale", "3")
	state := b.Show(unit, "ActiveState")
	t.Logf("scale 3 with worker 2 starting (%v):\n%s", err, out)
	if err != nil || !strings.Contains(out, "scaled to 3 workers") {
		t.Fatalf("scale 3 failed (%v):\n%s", err, out)
	}
	if state != "active" {
		t.Errorf("scale said %q with %s %s", "scaled to 3 workers", unit, state)
	}
	if !strings.Contains(out, "waiting up to 2m0s for "+unit+" to serve") {
		t.Errorf("scale does not say it waits for %s:\n%s", unit, out)
	}
	if !allActive(b, 3) {
		t.Errorf("after scale 3: active %v", b.ActiveWorkers())
	}
}

// crashLoopScaleFails checks what `clusterapp scale 4` says with worker 3
// in a crash loop: it names worker 3 and leaves it to systemd, waits for
// it, then fails explaining it (unit state, the journal's line about the
// bad setting), and never says "scaled to 4 workers".
func crashLoopScaleFails(t *testing.T, out string, err error) {
	t.Helper()
	if err == nil || strings.Contains(out, "scaled to 4 workers") {
		t.Errorf("scale 4 with worker 3 in a crash loop succeeded (%v):\n%s", err, out)
	}
	for _, want := range []string{
		"clusterapp-worker@3.service is being started by systemd already",
		"stopped at clusterapp-worker@3.service",
		"CLUSTERAPP_SHUTDOWN_TIMEOUT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scale 4 with worker 3 in a crash loop does not say %q:\n%s", want, out)
		}
	}
}

// `clusterapp scale 2` of 3 workers while an operator's `systemctl restart
// clusterapp-worker@3.service` waits for worker 3's READY=1 (its start
// takes 8 s): scale's stop job canceled the operator's restart ("Job for
// ... canceled.", exit status 1). Now scale waits for it, saying so, then
// drains worker 3.
func TestOpsScaleDownWaitsForForeignRestart(t *testing.T) {
	b := slowBox(t, 3)
	unit := config.WorkerUnit(3)
	b.WriteFile("/etc/systemd/system/clusterapp-worker@3.service.d/91-slower-start.conf", "[Service]\nExecStartPre=/bin/sleep 6\n")
	b.Must("systemctl", "daemon-reload")
	out, err := b.Run("sh", "-c", "systemctl restart "+unit+" & restart=$!; "+untilState(unit, "activating")+
		"clusterapp scale 2; echo scale exit status $?; wait $restart; echo restart exit status $?")
	t.Logf("systemctl restart %s during clusterapp scale 2 (%v):\n%s", unit, err, out)
	for _, want := range []string{
		"a systemctl job (start " + unit + ") is running: waiting for it",
		unit + " is active/running after that job: stopping it now",
		"scaled to 2 workers",
		"scale exit status 0",
		"restart exit status 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output does not say %q:\n%s", want, out)
		}
	}
	if !allActive(b, 2) {
		t.Errorf("after scale 2: active %v, want workers 1 and 2", b.ActiveWorkers())
	}
}
