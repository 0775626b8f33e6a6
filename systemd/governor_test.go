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

// Under the shipped unit, short requests never bring a worker its spare P,
// and computing requests arriving amid them do: the admission governor,
// which looks every 50 ms while only short requests run and is woken by the
// end of a long one, still sees the serving path wait behind computations.
func TestSpareProcessorOnlyWhileRequestsCompute(t *testing.T) {
	const workers = 2 // one admission slot each on 2 CPUs: one P, two while computing
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	b.Start(workers)
	short := b.LoadAsync("/", "-rate", "400", "-c", "4", "-d", "8s")
	time.Sleep(3 * time.Second)
	computing := b.Must("date", "+%s.%N")
	fib := b.Load("/fib?n=30", "-c", "2", "-d", "3s")
	res := short()
	t.Logf("/: %v in 8 s (p99 %v); /fib?n=30 amid them from %s: %v", res.StatusCodes, res.Latency.P99, strings.TrimSpace(computing), fib.StatusCodes)
	if res.Errors() != 0 || fib.Errors() != 0 || res.StatusCodes[200] == 0 || fib.StatusCodes[200] == 0 {
		t.Fatalf("want both loads served without errors: / %v %v, /fib %v %v", res.StatusCodes, res.ErrorSamples, fib.StatusCodes, fib.ErrorSamples)
	}
	from, err := strconv.ParseFloat(strings.TrimSpace(computing), 64)
	if err != nil {
		t.Fatalf("box clock %q: %v", computing, err)
	}
	args := []string{"journalctl", "-b", "--no-pager", "-o", "short-unix"}
	for _, u := range b.WorkerUnits(workers) {
		args = append(args, "-u", u)
	}
	var before, after []string
	for _, line := range strings.Split(b.Must(args...), "\n") {
		if !strings.Contains(line, "GOMAXPROCS: requests held their slots") {
			continue
		}
		at, _ := strconv.ParseFloat(strings.Fields(line)[0], 64)
		if at < from {
			before = append(before, line)
		} else {
			after = append(after, line)
		}
	}
	if len(before) > 0 {
		t.Fatalf("a worker took its spare P while only / ran (short requests):\n%s", strings.Join(before, "\n"))
	}
	if len(after) == 0 {
		t.Fatalf("no worker took its spare P while /fib?n=30 computed amid / (journal of %s):\n%s",
			config.WorkerUnit(1), b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", config.WorkerUnit(1)))
	}
	t.Logf("spare P taken:\n%s", strings.Join(after, "\n"))
}

// A GOMAXPROCS in the environment file that the Go runtime ignores ("3n")
// used to count as the operator's: the worker kept Go's number of Ps and
// turned its governor off, and with one CPU and one slot it stopped
// shedding a spike. Under the shipped unit, the worker now names the value
// in its journal, plans its Ps from its slot (one at rest) and still takes
// the spare P while requests compute.
func TestIgnoredGOMAXPROCSKeepsTheGovernor(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\nCLUSTERAPP_MAX_IN_FLIGHT=1\nGOMAXPROCS=3n\n"})
	b.Start(1)
	unit := config.WorkerUnit(1)
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit, "MESSAGE_ID=25e63ffff04b49a3b43e3cb0d6889422")
	if !strings.Contains(journal, `GOMAXPROCS=\"3n\": expected a whole number from 1`) && !strings.Contains(journal, `GOMAXPROCS="3n": expected a whole number from 1`) {
		t.Fatalf("no invalid-configuration line names GOMAXPROCS=3n in %s's journal:\n%s", unit, b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit))
	}
	procs := func() string {
		for _, line := range strings.Split(b.Must("curl", "-sSf", sandbox.MetricsURL), "\n") {
			if strings.HasPrefix(line, "go_sched_gomaxprocs_threads") {
				return line
			}
		}
		return ""
	}
	if line := procs(); !strings.HasSuffix(line, " 1") {
		t.Fatalf("at rest with one slot: %q, want 1 P (Go's own choice here is %s)", line, strings.TrimSpace(b.Must("nproc")))
	}
	fib := b.Load("/fib?n=30", "-c", "4", "-d", "3s")
	if fib.Errors() != 0 || fib.StatusCodes[200] == 0 {
		t.Fatalf("/fib?n=30: %v %v", fib.StatusCodes, fib.ErrorSamples)
	}
	raised := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit, "--grep", "GOMAXPROCS: requests held their slots")
	if strings.TrimSpace(raised) == "" || strings.Contains(raised, "-- No entries --") {
		t.Fatalf("the worker never took its spare P while /fib?n=30 computed (%v); its journal:\n%s", fib.StatusCodes, b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit))
	}
	t.Logf("/fib?n=30: %v; %s", fib.StatusCodes, strings.TrimSpace(raised))
}

// Under the shipped unit (its seccomp filter allows sched_setattr), a
// request that computes while the spare P runs does so on a thread set to
// SCHED_BATCH, so the threads that wake up to serve /healthz and
// rejections get the CPU first; once the load is over, no thread keeps
// the policy. `ps -L -o cls` shows it as B, against TS for the others.
func TestComputingRequestsRunOnBatchThreads(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\nCLUSTERAPP_MAX_IN_FLIGHT=1\n"})
	b.Start(1)
	unit := config.WorkerUnit(1)
	pid := strconv.Itoa(b.MainPID(unit))
	classes := func() map[string]int { return threadClasses(b, pid) }
	if c := classes(); c["B"] != 0 {
		t.Fatalf("at rest the worker has SCHED_BATCH threads: %v", c)
	}
	fib := b.LoadAsync("/fib?n=30", "-c", "4", "-d", "4s")
	var samples []map[string]int
	batch := 0
	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		c := classes()
		samples = append(samples, c)
		if c["B"] > 0 {
			batch++
		}
	}
	res := fib()
	if res.Errors() != 0 || res.StatusCodes[200] == 0 {
		t.Fatalf("/fib?n=30: %v %v", res.StatusCodes, res.ErrorSamples)
	}
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit)
	if batch == 0 {
		t.Fatalf("no thread of the worker was SCHED_BATCH in %d samples while /fib?n=30 computed (%v): %v; its journal:\n%s", len(samples), res.StatusCodes, samples, journal)
	}
	if strings.Contains(journal, "ordinary threads") {
		t.Fatalf("the worker could not switch a thread's policy under the shipped unit:\n%s", journal)
	}
	if c := classes(); c["B"] != 0 || c["TS"] == 0 {
		t.Fatalf("after the load the worker's threads are %v, want every one back to TS (SCHED_OTHER)", c)
	}
	t.Logf("/fib?n=30: %v; SCHED_BATCH thread seen in %d of %d samples", res.StatusCodes, batch, len(samples))
}

// The switch keeps what the operator chose for the workers. Under a
// drop-in with Nice=5, the thread computing while the spare P runs is
// SCHED_BATCH at nice 5 and every thread is back to SCHED_OTHER at nice 5
// after; under CPUSchedulingPolicy=batch the worker says it keeps that
// policy and no thread ever leaves it.
func TestComputingThreadsKeepTheOperatorsScheduling(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\nCLUSTERAPP_MAX_IN_FLIGHT=1\n"})
	unit := config.WorkerUnit(1)
	for i, tc := range []struct {
		dropIn         string
		during, always string // "CLS NI" a thread shows during the load; every thread shows at rest and after
	}{
		{dropIn: "Nice=5", during: "B 5", always: "TS 5"},
		{dropIn: "CPUSchedulingPolicy=batch", always: "B 0"},
	} {
		b.WriteFile("/etc/systemd/system/clusterapp-worker@.service.d/90-sched.conf", "[Service]\n"+tc.dropIn+"\n")
		b.Must("systemctl", "daemon-reload")
		if i == 0 {
			b.Start(1)
		} else {
			b.Must("systemctl", "restart", unit)
		}
		since := b.Must("date", "+@%s.%N")
		pid := strconv.Itoa(b.MainPID(unit))
		threads := func() map[string]int {
			out := map[string]int{}
			for _, line := range strings.Split(strings.TrimSpace(b.Must("ps", "-L", "-o", "cls=,ni=", "-p", pid)), "\n") {
				out[strings.Join(strings.Fields(line), " ")]++
			}
			return out
		}
		only := func(when string, got map[string]int) {
			t.Helper()
			if len(got) != 1 || got[tc.always] == 0 {
				t.Fatalf("%s, %s: the worker's threads are %v, want every one %q", tc.dropIn, when, got, tc.always)
			}
		}
		only("at rest", threads())
		fib := b.LoadAsync("/fib?n=30", "-c", "4", "-d", "3s")
		seen := map[string]int{}
		for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			for k, n := range threads() {
				seen[k] += n
			}
		}
		if res := fib(); res.Errors() != 0 || res.StatusCodes[200] == 0 {
			t.Fatalf("%s: /fib?n=30: %v %v", tc.dropIn, res.StatusCodes, res.ErrorSamples)
		}
		for k := range seen {
			if k != tc.always && k != tc.during {
				t.Fatalf("%s: during the load a thread showed %q (all seen: %v), want only %q and %q", tc.dropIn, k, seen, tc.always, tc.during)
			}
		}
		if tc.during != "" && seen[tc.during] == 0 {
			t.Fatalf("%s: no thread showed %q during the load: %v", tc.dropIn, tc.during, seen)
		}
		only("after the load", threads())
		journal := b.Must("journalctl", "--no-pager", "-o", "cat", "-u", unit, "--since", strings.TrimSpace(since))
		if strings.Contains(journal, "ordinary threads") {
			t.Fatalf("%s: the worker could not switch a thread:\n%s", tc.dropIn, journal)
		}
		if kept := strings.Contains(b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit), "keep the threads' scheduling policy"); kept != (tc.during == "") {
			t.Fatalf("%s: the worker's start-up line about keeping the threads' policy: present %v, want %v", tc.dropIn, kept, tc.during == "")
		}
		t.Logf("%s: threads seen during the load: %v", tc.dropIn, seen)
	}
}

// Workers pinned one per CPU (a CPUAffinity= drop-in per instance, as
// docs/operations.md describes) each see one CPU, yet the pool has no more
// workers than CPUs: the balance table counts the pool's CPUs, and
// computing requests run on SCHED_BATCH threads as in an unpinned pool.
// Counted by each worker's own CPUs, a pool of 2 so pinned never switched.
func TestPinnedWorkersComputeOnBatchThreads(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	if strings.TrimSpace(b.Must("nproc")) == "1" {
		t.Skip("one CPU: no two workers to pin one per CPU")
	}
	for i := 1; i <= 2; i++ {
		b.WriteFile("/etc/systemd/system/"+config.WorkerUnit(i)+".d/90-cpu.conf", "[Service]\nCPUAffinity="+strconv.Itoa(i-1)+"\n")
	}
	b.Must("systemctl", "daemon-reload")
	b.Start(2)
	var pids []string
	for _, u := range b.WorkerUnits(2) {
		pid := strconv.Itoa(b.MainPID(u))
		if got := strings.TrimSpace(b.Must("taskset", "-cp", pid)); !strings.HasSuffix(got, ": "+strconv.Itoa(len(pids))) {
			t.Fatalf("%s is not pinned to CPU %d: %q", u, len(pids), got)
		}
		pids = append(pids, pid)
	}
	classes := func() map[string]int { return threadClasses(b, pids...) }
	fib := b.LoadAsync("/fib?n=30", "-c", "4", "-d", "4s")
	batch, samples := 0, 0
	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		samples++
		if classes()["B"] > 0 {
			batch++
		}
	}
	res := fib()
	if res.Errors() != 0 || res.StatusCodes[200] == 0 {
		t.Fatalf("/fib?n=30: %v %v", res.StatusCodes, res.ErrorSamples)
	}
	if batch == 0 {
		args := []string{"journalctl", "-b", "--no-pager", "-o", "cat"}
		for _, u := range b.WorkerUnits(2) {
			args = append(args, "-u", u)
		}
		t.Fatalf("no thread of the pinned workers was SCHED_BATCH in %d samples while /fib?n=30 computed (%v); their journal:\n%s", samples, res.StatusCodes, b.Must(args...))
	}
	if c := classes(); c["B"] != 0 {
		t.Fatalf("after the load the workers' threads are %v, want every one back to TS", c)
	}
	t.Logf("/fib?n=30: %v; SCHED_BATCH thread seen in %d of %d samples", res.StatusCodes, batch, samples)
}

// threadClasses counts the scheduling classes of the threads of the
// processes pids, as `ps -L -o cls` names them (TS: SCHED_OTHER, B:
// SCHED_BATCH).
func threadClasses(b *sandbox.Box, pids ...string) map[string]int {
	out := map[string]int{}
	for _, c := range strings.Fields(b.Must("ps", "-L", "-o", "cls=", "-p", strings.Join(pids, ","))) {
		out[c]++
	}
	return out
}

// Under a drop-in that takes sched_setattr out of the unit's seccomp
// filter, no computing thread can be switched to SCHED_BATCH. Each worker
// says so once, and warns only where the switch would have applied: a pool
// of more workers than CPUs never switches, so its workers say it at start
// as information and never warn, /fib?n=30 or not (each of them warned at
// start before); workers pinned one per CPU fit, and a worker warns when
// it first takes the spare P.
func TestRefusedSwitchWarnsOnlyWhereItWouldApply(t *testing.T) {
	const refused, warning = "may not be set, which matters only", "computing requests run on ordinary threads while the spare P runs"
	noSched := "[Service]\nSystemCallFilter=~sched_setattr\n"
	journal := func(b *sandbox.Box, unit string) string {
		return b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit)
	}
	t.Run("more workers than CPUs", func(t *testing.T) {
		b := sandbox.New(t, sandbox.Options{})
		cpus, err := strconv.Atoi(strings.TrimSpace(b.Must("nproc")))
		if err != nil {
			t.Fatal(err)
		}
		n := cpus + 1
		b.WriteEnv(fmt.Sprintf("CLUSTERAPP_WORKERS=%d\n", n))
		b.WriteFile("/etc/systemd/system/clusterapp-worker@.service.d/90-nosched.conf", noSched)
		b.Must("systemctl", "daemon-reload")
		b.Start(n)
		if res := b.Load("/fib?n=30", "-c", "4", "-d", "3s"); res.Errors() != 0 || res.StatusCodes[200] == 0 {
			t.Fatalf("/fib?n=30: %v %v", res.StatusCodes, res.ErrorSamples)
		}
		for _, u := range b.WorkerUnits(n) {
			j := journal(b, u)
			if strings.Count(j, refused) != 1 || strings.Contains(j, warning) {
				t.Fatalf("%s of %d workers on %d CPUs: want one line saying the policy may not be set and no warning; its journal:\n%s", u, n, cpus, j)
			}
		}
	})
	t.Run("pinned one per CPU", func(t *testing.T) {
		b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
		if strings.TrimSpace(b.Must("nproc")) == "1" {
			t.Skip("one CPU: no two workers to pin one per CPU")
		}
		b.WriteFile("/etc/systemd/system/clusterapp-worker@.service.d/90-nosched.conf", noSched)
		for i := 1; i <= 2; i++ {
			b.WriteFile("/etc/systemd/system/"+config.WorkerUnit(i)+".d/90-cpu.conf", "[Service]\nCPUAffinity="+strconv.Itoa(i-1)+"\n")
		}
		b.Must("systemctl", "daemon-reload")
		b.Start(2)
		for _, u := range b.WorkerUnits(2) {
			if j := journal(b, u); strings.Count(j, refused) != 1 || strings.Contains(j, warning) {
				t.Fatalf("%s at start: want one line saying the policy may not be set and no warning yet; its journal:\n%s", u, j)
			}
		}
		if res := b.Load("/fib?n=30", "-c", "4", "-d", "4s"); res.Errors() != 0 || res.StatusCodes[200] == 0 {
			t.Fatalf("/fib?n=30: %v %v", res.StatusCodes, res.ErrorSamples)
		}
		warned := 0
		for _, u := range b.WorkerUnits(2) {
			j := journal(b, u)
			if c := strings.Count(j, warning); c > 1 {
				t.Fatalf("%s warned %d times, want once at most; its journal:\n%s", u, c, j)
			}
			if strings.Contains(j, warning) {
				warned++
			}
		}
		if warned == 0 {
			t.Fatalf("no worker warned after /fib?n=30 (no spare P taken?); worker 1's journal:\n%s", journal(b, config.WorkerUnit(1)))
		}
	})
}

// Past one worker per CPU no worker takes the spare P, even while every
// worker computes: each CPU already has more than one worker to run, and a
// spare P's thread only competes with them (package worker, noSpare). The
// journal names the pool and the CPUs.
func TestNoSpareProcessorPastOneWorkerPerCPU(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{})
	cpus, err := strconv.Atoi(strings.TrimSpace(b.Must("nproc")))
	if err != nil {
		t.Fatal(err)
	}
	n := 2 * cpus
	b.WriteEnv(fmt.Sprintf("CLUSTERAPP_WORKERS=%d\nCLUSTERAPP_CACHE_ENTRIES=0\n", n))
	b.Must("systemctl", "daemon-reload")
	b.Start(n)
	if res := b.Load("/fib?n=30", "-c", strconv.Itoa(2*n), "-d", "3s"); res.Errors() != 0 || res.StatusCodes[200] == 0 {
		t.Fatalf("/fib?n=30: %v %v", res.StatusCodes, res.ErrorSamples)
	}
	args := []string{"journalctl", "-b", "--no-pager", "-o", "cat"}
	for _, u := range b.WorkerUnits(n) {
		args = append(args, "-u", u)
	}
	j := b.Must(args...)
	if strings.Contains(j, "GOMAXPROCS: requests held their slots") {
		t.Fatalf("a worker of %d on %d CPUs took the spare P; the workers' journal:\n%s", n, cpus, j)
	}
	refused := fmt.Sprintf("GOMAXPROCS stays at the admission slots: %d workers on %d CPUs", n, cpus)
	if !strings.Contains(j, refused) {
		t.Fatalf("no worker said %q while /fib?n=30 computed (no raise was due?); the workers' journal:\n%s", refused, j)
	}
}

// Under the shipped unit, a worker that took its spare P for computing
// requests gives it back within seconds once its slots are filled by
// short ones: /slow (about 1 ms, allocating) looked long now and then with
// the spare P on, and used to keep it for good, served a quarter slower.
func TestSpareProcessorGoesWhenRequestsAreShort(t *testing.T) {
	const workers = 2
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_CACHE_ENTRIES=0\n"})
	b.Start(workers)
	if res := b.Load("/fib?n=30", "-c", "8", "-d", "2s"); res.Errors() != 0 || res.StatusCodes[200] == 0 {
		t.Fatalf("/fib?n=30: %v %v", res.StatusCodes, res.ErrorSamples)
	}
	mark := strings.TrimSpace(b.Must("date", "+%s.%N"))
	if res := b.Load("/slow", "-c", "16", "-d", "6s"); res.Errors() != 0 || res.StatusCodes[200] == 0 {
		t.Fatalf("/slow: %v %v", res.StatusCodes, res.ErrorSamples)
	}
	from, err := strconv.ParseFloat(mark, 64)
	if err != nil {
		t.Fatalf("box clock %q: %v", mark, err)
	}
	raised, lowered := map[string]bool{}, map[string]string{}
	for _, u := range b.WorkerUnits(workers) {
		for _, line := range strings.Split(b.Must("journalctl", "-b", "--no-pager", "-o", "short-unix", "-u", u), "\n") {
			at, _ := strconv.ParseFloat(strings.Fields(line + " 0")[0], 64)
			switch {
			case at < from && strings.Contains(line, "GOMAXPROCS: requests held their slots"):
				raised[u] = true
			case at >= from && strings.Contains(line, "GOMAXPROCS: requests holding their slots") && strings.Contains(line, "filled them"):
				lowered[u] = line
			}
		}
	}
	if len(raised) == 0 {
		t.Fatalf("no worker took its spare P under /fib?n=30 (journal of %s):\n%s", config.WorkerUnit(1),
			b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", config.WorkerUnit(1)))
	}
	for u := range raised {
		if lowered[u] == "" {
			t.Fatalf("%s took its spare P under /fib?n=30 and kept it through 6 s of /slow; its journal:\n%s", u,
				b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", u))
		}
		t.Logf("%s: %s", u, lowered[u])
	}
}
