package systemd_test

import (
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// Scenario 1: start the socket; the first request is served; one worker per
// CPU is active; all serve from the same socket; systemctl status shows their
// STATUS lines.
func TestPoolOneWorkerPerCPU(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{})
	n := runtime.NumCPU()
	b.Start(n)
	if got := b.ActiveWorkers(); len(got) != n {
		t.Fatalf("active workers %v, want %d (one per CPU)", got, n)
	}
	// New connection per request: which worker accepts is up to the kernel,
	// so over 3000 connections every worker takes some.
	res := b.Load("/", "-c", "8", "-n", "3000", "-d", "60s", "-keepalive=false")
	if res.Errors() != 0 || res.OK != 3000 {
		t.Fatalf("load: %d ok, errors %v", res.OK, res.ErrorSamples)
	}
	for i := 1; i <= n; i++ {
		if res.ByHeader[strconv.Itoa(i)] == 0 {
			t.Errorf("worker %d served nothing: %v", i, res.ByHeader)
		}
	}
	status := b.Must("systemctl", "status", "--no-pager", config.WorkerUnit(1))
	if !regexp.MustCompile(`Status: "serving: \d+ requests served`).MatchString(status) {
		t.Fatalf("systemctl status lacks the worker's STATUS line:\n%s", status)
	}
	// TriggeredBy: the service socket alone; the metrics socket is the
	// exporter's, which a scrape starts.
	if !strings.Contains(status, "TriggeredBy: ● clusterapp.socket\n") || strings.Contains(status, config.MetricsSocketUnit) {
		t.Errorf("worker not shown as triggered by the service socket alone:\n%s", status)
	}
	b.Must("curl", "-sSf", "--max-time", "5", sandbox.MetricsURL)
	if exp := b.Must("systemctl", "status", "--no-pager", config.MetricsServiceUnit); !strings.Contains(exp, "TriggeredBy: ● "+config.MetricsSocketUnit+"\n") || strings.Contains(exp, "● "+config.SocketUnit) {
		t.Errorf("the metrics exporter not shown as triggered by the metrics socket alone:\n%s", exp)
	}
}

// Scenario 1, configured: CLUSTERAPP_WORKERS=3 in the environment file.
// The worker the first connection starts comes up alone: the others start
// once it is ready (they start after clusterapp-first.target, which is
// ordered after it), as `systemctl show` and the units' timestamps tell an
// operator.
func TestPoolSizeFromEnvFile(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=3\n"})
	b.Start(3)
	// Workers 2 and 3 start after the first-up target (the generator's
	// drop-in), and no worker is ordered after worker 1 itself: its
	// failures hold up no one.
	for i, want := range []bool{false, true, true} {
		u := config.WorkerUnit(i + 1)
		if got := b.Show(u, "After"); strings.Contains(got, config.FirstTarget) != want {
			t.Fatalf("%s After=%s: want %s %v", u, got, config.FirstTarget, want)
		}
	}
	if got := b.Show(config.WorkerUnit(1), "Before"); strings.Contains(got, "clusterapp-worker@") {
		t.Fatalf("%s is ordered before other workers: Before=%s", config.WorkerUnit(1), got)
	}
	monotonic := func(unit, prop string) uint64 {
		v, err := strconv.ParseUint(b.Show(unit, prop), 10, 64)
		if err != nil || v == 0 {
			t.Fatalf("%s %s=%q: %v", unit, prop, b.Show(unit, prop), err)
		}
		return v
	}
	ready := monotonic(config.WorkerUnit(1), "ActiveEnterTimestampMonotonic")
	for _, u := range []string{config.WorkerUnit(2), config.WorkerUnit(3)} {
		if began := monotonic(u, "ExecMainStartTimestampMonotonic"); began < ready {
			t.Fatalf("%s started %v before %s was ready: the first connection's worker shared the CPUs with it",
				u, time.Duration(ready-began)*time.Microsecond, config.WorkerUnit(1))
		}
	}
	time.Sleep(300 * time.Millisecond) // a fourth worker would have started by now
	if got := b.ActiveWorkers(); len(got) != 3 {
		t.Fatalf("active workers %v, want 3", got)
	}
	// Keep-alive clients, which the balance gate spreads over every worker
	// (one-request connections go to the first CPU-count workers while
	// they keep up: TestSurplusWorkersStepBackForOneRequestConnections).
	res := b.Load("/", "-c", "8", "-n", "3000", "-d", "60s")
	if res.Errors() != 0 || len(res.ByHeader) != 3 {
		t.Fatalf("load: errors %v, by worker %v (want 3 workers serving)", res.ErrorSamples, res.ByHeader)
	}
}

// Scenario 7: every shipped unit passes systemd-analyze verify where it is
// installed, and the worker's exposure is at most 2.0.
func TestUnitsVerifyAndHardening(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{})
	out, err := b.Run("systemd-analyze", "verify", config.SocketUnit, config.TargetUnit, config.WorkerUnit(1), config.MetricsSocketUnit, config.MetricsServiceUnit)
	if err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, unit := range []string{config.WorkerUnit(1), config.MetricsServiceUnit} {
		out, err = b.Run("systemd-analyze", "security", "--threshold=20", "--no-pager", unit)
		m := regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d)`).FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("systemd-analyze security %s: %v\n%s", unit, err, out)
		}
		if score, _ := strconv.ParseFloat(m[1], 64); score > 2.0 {
			t.Fatalf("%s: exposure %.1f, want at most 2.0", unit, score)
		}
		t.Logf("%s exposure %s", unit, m[1])
	}
}

// Scenario 8: the file-descriptor limit the unit sets is in effect in
// /proc/PID/limits, or, where the sandbox caps it, the cap is.
func TestFileLimitInEffect(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\n"})
	b.Start(1)
	want := 65536
	// The box's PID 1 cannot raise a hard limit above its own (no
	// CAP_SYS_RESOURCE here); systemd then applies the largest it may.
	if hard := limit(t, b.Must("cat", "/proc/1/limits"), true); hard < want {
		t.Logf("the sandbox caps open files at %d (its PID 1's hard limit); LimitNOFILE=%d is clamped to it", hard, want)
		want = hard
	}
	pid := b.MainPID(config.WorkerUnit(1))
	if got := limit(t, b.Must("cat", fmt.Sprintf("/proc/%d/limits", pid)), false); got != want {
		t.Fatalf("worker's open-file soft limit %d, want %d", got, want)
	}
}

// docs/operations.md, "CPU scheduling: rate or latency": the workers run at
// the kernel's default policy, and an operator who prefers the rate of new
// connections to latency at saturation turns it to SCHED_BATCH with a
// drop-in and a rolling reload, as the page says: every thread of every new
// worker then runs under it (the unit's sandbox does not refuse it), and no
// request fails on the way.
func TestOperatorTurnsWorkersToBatchScheduling(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{})
	n := runtime.NumCPU()
	b.Start(n)
	const other, batch = 0, 3 // SCHED_OTHER, SCHED_BATCH (linux/sched.h)
	for _, u := range b.WorkerUnits(n) {
		if got := threadPolicies(t, b, b.MainPID(u)); len(got) != 1 || got[other] == 0 {
			t.Fatalf("%s threads by policy %v, want all SCHED_OTHER (%d)", u, got, other)
		}
	}
	b.WriteFile("/etc/systemd/system/"+config.WorkerTemplate+".d/80-scheduling.conf", "[Service]\nCPUSchedulingPolicy=batch\n")
	b.Must("systemctl", "daemon-reload")
	wait := b.LoadAsync("/", "-c", "8", "-rate", "2000", "-d", "6s")
	time.Sleep(time.Second)
	b.Must("clusterapp", "reload")
	if res := wait(); res.Errors() != 0 || res.OK == 0 {
		t.Fatalf("load across the reload: %d ok, errors %v", res.OK, res.ErrorSamples)
	}
	for _, u := range b.WorkerUnits(n) {
		if got := threadPolicies(t, b, b.MainPID(u)); len(got) != 1 || got[batch] == 0 {
			t.Fatalf("%s threads by policy %v after the drop-in and a reload, want all SCHED_BATCH (%d)", u, got, batch)
		}
	}
}

// threadPolicies counts the threads of process pid by scheduling policy,
// field 41 of /proc/PID/task/TID/stat.
func threadPolicies(t *testing.T, b *sandbox.Box, pid int) map[int]int {
	t.Helper()
	out := b.Must("sh", "-c", fmt.Sprintf("cat /proc/%d/task/*/stat", pid))
	got := map[int]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		// The command name, field 2, is in parentheses and may hold spaces:
		// count from the last ')', after which field 3 comes first.
		f := strings.Fields(line[strings.LastIndexByte(line, ')')+1:])
		if len(f) < 41-2 {
			t.Fatalf("short stat line for pid %d: %q", pid, line)
		}
		p, err := strconv.Atoi(f[41-3])
		if err != nil {
			t.Fatalf("stat line for pid %d: policy %q: %v", pid, f[41-3], err)
		}
		got[p]++
	}
	return got
}

// limit returns the soft or hard value of the "Max open files" line of a
// /proc/PID/limits file ("Max open files  SOFT  HARD  files").
func limit(t *testing.T, limits string, hard bool) int {
	t.Helper()
	col := 3
	if hard {
		col = 4
	}
	for _, line := range strings.Split(limits, "\n") {
		if strings.HasPrefix(line, "Max open files") {
			n, err := strconv.Atoi(strings.Fields(line)[col])
			if err == nil {
				return n
			}
		}
	}
	t.Fatalf("no open-files line in:\n%s", limits)
	return 0
}

// Scenario 9: stopping the target and the socket leaves no worker process
// and no listening socket.
func TestStopLeavesNothing(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{})
	b.Start(runtime.NumCPU())
	b.Must("curl", "-sSf", "--max-time", "5", "-o", "/dev/null", sandbox.MetricsURL) // the exporter runs too
	// The workers and the exporter are these processes while they run: their absence below means something.
	if ps := b.Must("ps", "-eo", "pid,args"); strings.Count(ps, config.WorkerBinary+" --instance") != runtime.NumCPU() || !strings.Contains(ps, config.WorkerBinary+" metrics") {
		t.Fatalf("want %d processes of %s and its exporter while the pool runs:\n%s", runtime.NumCPU(), config.WorkerBinary, ps)
	}
	b.Must("systemctl", "stop", config.TargetUnit, config.SocketUnit)
	b.Eventually(30*time.Second, "no worker active", func() bool { return len(b.ActiveWorkers()) == 0 })
	if ps := b.Must("ps", "-eo", "pid,args"); strings.Contains(ps, config.WorkerBinary) {
		t.Fatalf("worker processes left:\n%s", ps)
	}
	if ss := b.Must("ss", "-Hltn", "sport = :8080 or sport = :9180"); ss != "" {
		t.Fatalf("still listening after stop:\n%s", ss)
	}
	if out, err := b.Curl("/"); err == nil {
		t.Fatalf("a request succeeded after stop: %s", out)
	}
}

// `systemctl enable clusterapp.socket` hooks the socket into sockets.target,
// so it listens from boot on.
func TestEnableStartsAtBoot(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{})
	b.Must("systemctl", "enable", config.SocketUnit)
	if got := b.Must("systemctl", "is-enabled", config.SocketUnit); got != "enabled" {
		t.Fatalf("is-enabled = %q", got)
	}
	if deps := b.Must("systemctl", "list-dependencies", "--plain", "--no-pager", "sockets.target"); !strings.Contains(deps, config.SocketUnit) {
		t.Fatalf("sockets.target does not pull in clusterapp.socket:\n%s", deps)
	}
}
