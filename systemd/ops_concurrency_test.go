package systemd_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// slowStartDropIn makes every worker's start take 2 s more, so a restart is
// in progress long enough for another command to run into it.
const slowStartDropIn = "[Service]\nExecStartPre=/bin/sleep 2\n"

// slowBox boots a box of n workers whose starts take 2 s more.
func slowBox(t *testing.T, n int) *sandbox.Box {
	b := sandbox.New(t, sandbox.Options{Env: fmt.Sprintf("CLUSTERAPP_WORKERS=%d\n", n)})
	b.WriteFile("/etc/systemd/system/clusterapp-worker@.service.d/90-slow-start.conf", slowStartDropIn)
	b.Must("systemctl", "daemon-reload")
	b.Start(n)
	b.Eventually(20*time.Second, "every worker active", func() bool { return allActive(b, n) })
	return b
}

// allActive reports whether exactly workers 1 to n are active. Not
// b.AllActive: `systemctl is-active` of several units succeeds when any
// one of them is active.
func allActive(b *sandbox.Box, n int) bool {
	active, err := b.Driver.ActiveWorkers(context.Background())
	return err == nil && strings.Join(active, " ") == strings.Join(b.WorkerUnits(n), " ")
}

// untilState is a shell loop, for sh -c, that waits until unit is in
// state (ActiveState) or 10 s have passed.
func untilState(unit, state string) string {
	return fmt.Sprintf("for i in $(seq 200); do [ \"$(systemctl show -p ActiveState --value %s)\" = %s ] && break; sleep 0.05; done; ", unit, state)
}

// runAsync runs a command inside the box in the background; the returned
// func waits for its output and error.
func runAsync(b *sandbox.Box, args ...string) func() (string, error) {
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() { out, err := b.Run(args...); done <- result{out, err} }()
	return func() (string, error) { r := <-done; return r.out, r.err }
}

// sampleActive counts the active workers until the returned func is
// called, which returns the fewest seen and those workers.
func sampleActive(b *sandbox.Box) func() (int, []string) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu       sync.Mutex
		fewest   = -1
		at       []string
		finished = make(chan struct{})
	)
	go func() {
		defer close(finished)
		for ctx.Err() == nil {
			active, err := b.Driver.ActiveWorkers(ctx)
			if err != nil {
				continue // the box was asked while the sampler stopped
			}
			mu.Lock()
			if fewest < 0 || len(active) < fewest {
				fewest, at = len(active), active
			}
			mu.Unlock()
		}
	}()
	return func() (int, []string) {
		cancel()
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return fewest, at
	}
}

// Two rolling reloads at once (two operators, or an operator and a package
// upgrade): the second one started while the first restarted worker 2 used
// to restart worker 2 again, then worker 1 while the first restarted worker
// 3, so two of three workers were down at once. Now the second waits for
// the first, says so, then restarts every worker in turn.
func TestOpsConcurrentReloadsSerialize(t *testing.T) {
	b := slowBox(t, 3)
	units := b.WorkerUnits(3)
	old := b.MainPIDs(units...)
	sampled := sampleActive(b)
	first := runAsync(b, "clusterapp", "reload")
	// Into the first reload's restart of worker 2.
	b.Eventually(30*time.Second, "the first reload restarting worker 2", func() bool {
		return b.MainPID(units[0]) != old[units[0]] && b.Show(units[1], "ActiveState") != "active"
	})
	second := runAsync(b, "clusterapp", "reload")
	out1, err1 := first()
	out2, err2 := second()
	fewest, at := sampled()
	t.Logf("first reload (%v):\n%s\nsecond reload (%v):\n%s", err1, out1, err2, out2)
	if err1 != nil || err2 != nil {
		t.Errorf("a reload failed: first %v, second %v", err1, err2)
	}
	if fewest < 2 {
		t.Errorf("during the two reloads only %d of 3 workers were active at one moment (%v); at most one may restart at a time", fewest, at)
	}
	if !strings.Contains(out2, "waiting for it") || !strings.Contains(out2, "clusterapp reload") {
		t.Errorf("the second reload does not say it waited for the first:\n%s", out2)
	}
	for _, u := range units {
		if strings.Count(out2, u+": pid") != 1 {
			t.Errorf("the second reload did not restart %s once:\n%s", u, out2)
		}
	}
	if got := b.ActiveWorkers(); len(got) != 3 {
		t.Errorf("after the reloads: active %v", got)
	}
}

// `clusterapp scale 1` while a reload restarts worker 1 of 3: scale drained
// workers 2 and 3, and the reload then restarted them, which started them
// again (or one command's job canceled the other's and it failed). Now the
// scale waits for the reload, says so, then drains them for good.
func TestOpsScaleDownDuringReload(t *testing.T) {
	b := slowBox(t, 3)
	units := b.WorkerUnits(3)
	pid1 := b.MainPID(units[0])
	reload := runAsync(b, "clusterapp", "reload")
	b.Eventually(30*time.Second, "the reload restarting worker 1", func() bool {
		return b.MainPID(units[0]) != pid1
	})
	scaleOut, scaleErr := b.Run("clusterapp", "scale", "1")
	reloadOut, reloadErr := reload()
	t.Logf("reload (%v):\n%s\nscale 1 (%v):\n%s", reloadErr, reloadOut, scaleErr, scaleOut)
	if reloadErr != nil || scaleErr != nil {
		t.Errorf("reload: %v, scale 1: %v; want both to succeed, one after the other", reloadErr, scaleErr)
	}
	if !strings.Contains(scaleOut, "waiting for it") {
		t.Errorf("scale does not say it waited for the reload:\n%s", scaleOut)
	}
	// Give a worker the reload brought back the time to come up.
	time.Sleep(3 * time.Second)
	if got := b.ActiveWorkers(); len(got) != 1 || got[0] != config.WorkerUnit(1) {
		t.Errorf("after scale 1 during a reload: active %v, want only worker 1", got)
	}
}

// SIGTERM to a rolling reload (a reload's timeout in clusterapp.service,
// `systemctl stop clusterapp` meanwhile, or an operator's kill) while it
// restarts worker 1 of 3: it used to die at once, saying nothing. Now it
// waits for the restart in progress, says where it stopped and which
// workers are still on their old process, and every worker serves.
func TestOpsReloadInterrupted(t *testing.T) {
	b := slowBox(t, 3)
	units := b.WorkerUnits(3)
	old := b.MainPIDs(units...)
	// The shell starts the reload, sends it SIGTERM once worker 1 is
	// restarting (its start takes 2 s more), and reports its exit status.
	out, err := b.Run("sh", "-c", "clusterapp reload & pid=$!; "+untilState(units[0], "activating")+"kill -TERM $pid; wait $pid; echo exit status $?")
	t.Logf("interrupted reload (%v):\n%s", err, out)
	if strings.Contains(out, "exit status 0") {
		t.Errorf("an interrupted reload exited 0:\n%s", out)
	}
	for _, want := range []string{"interrupted", units[0] + ": pid", "still on the old process: " + units[1] + ", " + units[2]} {
		if !strings.Contains(out, want) {
			t.Errorf("the interrupted reload does not say %q:\n%s", want, out)
		}
	}
	if !allActive(b, 3) {
		t.Errorf("after the interrupted reload: active %v, want every worker", b.ActiveWorkers())
	}
	if pid := b.MainPID(units[0]); pid == old[units[0]] {
		t.Errorf("worker 1 kept its process %d", pid)
	}
	for _, u := range units[1:] {
		if pid := b.MainPID(u); pid != old[u] {
			t.Errorf("%s was restarted after the reload was interrupted: pid %d -> %d", u, old[u], pid)
		}
	}
}

// SIGTERM to `clusterapp scale 5` of 3 workers while worker 4 starts: it
// waits for worker 4, starts no worker 5, and says that the count is
// written and what finishes the change; `clusterapp reload` then does.
func TestOpsScaleInterrupted(t *testing.T) {
	b := slowBox(t, 3)
	out, err := b.Run("sh", "-c", "clusterapp scale 5 & pid=$!; "+untilState(config.WorkerUnit(4), "activating")+"kill -TERM $pid; wait $pid; echo exit status $?")
	t.Logf("interrupted scale (%v):\n%s", err, out)
	for _, want := range []string{"interrupted by SIGTERM", "started clusterapp-worker@4.service", "clusterapp-worker@5.service not started", "clusterapp reload finishes the change", "exit status 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the interrupted scale does not say %q:\n%s", want, out)
		}
	}
	if !allActive(b, 4) {
		t.Errorf("after the interrupted scale: active %v, want workers 1 to 4", b.ActiveWorkers())
	}
	b.Must("clusterapp", "reload")
	if !allActive(b, 5) {
		t.Errorf("after the reload that finishes the scale: active %v, want workers 1 to 5", b.ActiveWorkers())
	}
}

// A worker in a crash loop (its own drop-in sets an invalid value, so it
// exits 78 and systemd restarts it for good): a scale up starts the other
// workers without waiting for it; a reload stops at it and
// says why, as at a worker of the rolling restart, where it used to say
// only "job failed"; and `clusterapp scale` below it stops it, where it
// used to stop only the active workers above the count and leave this one
// restarting, to serve once it could.
func TestOpsCrashLoopingWorker(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=3\n"})
	b.WriteFile("/etc/systemd/system/clusterapp-worker@3.service.d/90-bad.conf", "[Service]\nEnvironment=CLUSTERAPP_SHUTDOWN_TIMEOUT=abc\n")
	b.Must("systemctl", "daemon-reload")
	// --no-block: worker 3's start job never completes.
	b.Must("systemctl", "start", "--no-block", config.SocketUnit, config.MetricsSocketUnit, config.TargetUnit)
	b.Eventually(20*time.Second, "workers 1 and 2 active", func() bool { return allActive(b, 2) })

	// Worker 3 is being started already, by systemd, for good: scale
	// starts worker 4 without waiting for it, then waits for worker 3 and
	// fails, explaining it: it said "scaled to 4 workers" with worker 3
	// down. clusterapp.target, ordered after worker 3, is not active yet:
	// scale said "the pool is not running" and changed nothing live.
	out, err := b.Run("clusterapp", "scale", "4", "--timeout", "20s")
	t.Logf("scale 4 (%v):\n%s", err, out)
	crashLoopScaleFails(t, out, err)
	// Started by scale, or by systemd itself: the target's start job,
	// still waiting for worker 3, takes in the worker the daemon-reload
	// added (then scale names it and leaves it to systemd).
	b.Eventually(20*time.Second, "worker 4 active", func() bool { return b.Show(config.WorkerUnit(4), "ActiveState") == "active" })

	out, err = b.Run("clusterapp", "reload", "--timeout", "30s")
	t.Logf("reload (%v):\n%s", err, out)
	for _, want := range []string{"stopped at clusterapp-worker@3.service", "still on the old process: clusterapp-worker@1.service, clusterapp-worker@2.service, clusterapp-worker@4.service", "CLUSTERAPP_SHUTDOWN_TIMEOUT"} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("the reload does not fail saying %q:\n%s", want, out)
		}
	}

	out, err = b.Run("clusterapp", "scale", "2")
	t.Logf("scale 2 (%v):\n%s", err, out)
	if err != nil || !strings.Contains(out, "drained and stopped clusterapp-worker@3.service") || !strings.Contains(out, "drained and stopped clusterapp-worker@4.service") {
		t.Errorf("scale 2 does not stop the crash-looping worker 3 (%v):\n%s", err, out)
	}
	time.Sleep(2 * time.Second) // its next restart, had it one
	if state := b.Show(config.WorkerUnit(3), "ActiveState"); state != "inactive" && state != "failed" {
		t.Errorf("worker 3 after scale 2: %s, want stopped", state)
	}
}

// A worker that falls into a crash loop while the pool runs: `clusterapp
// scale 4` failed at once with "start clusterapp-worker@3.service: job
// failed" and never started worker 4. Now worker 3 is named and left to
// systemd, and worker 4 starts; scale then waits for worker 3, and fails
// explaining it, where it said "scaled to 4 workers" with worker 3 down.
func TestOpsScaleUpPastACrashLoopingWorker(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=3\n"})
	b.Start(3)
	b.Eventually(20*time.Second, "every worker active", func() bool { return allActive(b, 3) })
	b.WriteFile("/etc/systemd/system/clusterapp-worker@3.service.d/90-bad.conf", "[Service]\nEnvironment=CLUSTERAPP_SHUTDOWN_TIMEOUT=abc\n")
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "restart", "--no-block", config.WorkerUnit(3))
	b.Eventually(10*time.Second, "worker 3 in its crash loop", func() bool { return b.Show(config.WorkerUnit(3), "ActiveState") == "activating" })

	out, err := b.Run("clusterapp", "scale", "4", "--timeout", "20s")
	t.Logf("scale 4 (%v):\n%s", err, out)
	crashLoopScaleFails(t, out, err)
	if !strings.Contains(out, "started clusterapp-worker@4.service") {
		t.Errorf("scale 4 did not start worker 4 past worker 3 in a crash loop:\n%s", out)
	}
	if state := b.Show(config.WorkerUnit(4), "ActiveState"); state != "active" {
		t.Errorf("worker 4 after scale 4: %s", state)
	}
}
