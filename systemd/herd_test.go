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

// A new connection on the shared socket wakes one idle worker, not the pool
// (package exclusive). Each worker's poller holds the service socket with
// EPOLLEXCLUSIVE, as /proc/PID/fdinfo shows an operator; and one-request
// connections sent one at a time cost a pool of 8 idle workers about the
// thread wake-ups they cost a pool of 1. The herd woke a thread in every
// worker for each connection: 8.1 more wake-ups per connection at 8 workers
// (14.7 against 6.6 in one run), against 1.3-2.1 more with the exclusive
// entry. The bound is two thirds of a wake-up per added worker. Both counts
// leave out what each pool's idle rate accounts for: with the runtime's
// monitor thread kept awake (config.MonitorTrace), 8 idle workers wake 8
// threads every 10 ms, connections or not, which on a slow machine came to
// 1-2 wake-ups per connection of this sequential load.
func TestNewConnectionWakesOneWorker(t *testing.T) {
	const workers, conns = 8, 400
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\n"})
	b.Start(1)
	one, oneIdle := connWakeups(t, b, 1, conns, 1)

	b.Must("clusterapp", "scale", strconv.Itoa(workers))
	b.Eventually(30*time.Second, "8 workers active", func() bool { return b.AllActive(b.WorkerUnits(workers)...) })
	// The service socket's inode (the listener on 127.0.0.1:8080 in
	// /proc/net/tcp; systemd passes the sockets in no fixed order), then
	// each worker's epoll entry for it.
	ino := strings.TrimSpace(b.Must("awk", `$2 == "0100007F:1F90" && $4 == "0A" { print $10 }`, "/proc/net/tcp"))
	for i := 1; i <= workers; i++ {
		pid := b.MainPID(config.WorkerUnit(i))
		out := b.Must("sh", "-c", fmt.Sprintf("grep -h '^tfd:' /proc/%d/fdinfo/*", pid))
		if !exclusiveEntry(t, out, ino) {
			t.Fatalf("worker %d's poller has no EPOLLEXCLUSIVE entry for the service socket (inode %s):\n%s", i, ino, out)
		}
	}
	eight, eightIdle := connWakeups(t, b, workers, conns, 1)
	t.Logf("thread wake-ups per one-request connection: %.2f in a pool of 1, %.2f in a pool of %d (of which the idle rate: %.2f, %.2f)", one, eight, workers, oneIdle, eightIdle)
	if extra := (eight - eightIdle) - (one - oneIdle); extra >= float64(workers-1)*2/3 {
		t.Fatalf("a pool of %d took %.2f more thread wake-ups per connection than a pool of 1: idle workers are woken for connections they do not take", workers, extra)
	}
}

// connWakeups sends conns one-request connections, concurrency at a time,
// and returns the pool's thread wake-ups per connection, and the part of
// them its idle rate accounts for: threads that wake on a timer whether
// connections come or not (each runtime's monitor thread every 10 ms, the
// metrics sampler, the balance heartbeat), counted over a quiet second
// just before the load.
func connWakeups(t *testing.T, b *sandbox.Box, workers, conns, concurrency int) (total, idle float64) {
	t.Helper()
	args := []string{"-c", strconv.Itoa(concurrency), "-n", strconv.Itoa(conns), "-d", "0", "-keepalive=false"}
	b.Load("/", args...) // settle: fresh workers' start-up work
	quiet, start := poolWakeups(t, b, workers), time.Now()
	time.Sleep(time.Second)
	before, loaded := poolWakeups(t, b, workers), time.Now()
	rate := float64(before-quiet) / loaded.Sub(start).Seconds()
	res := b.Load("/", args...)
	window := time.Since(loaded)
	after := poolWakeups(t, b, workers)
	if res.Errors() != 0 || res.OK != conns {
		t.Fatalf("%d workers: ok %d of %d, errors %v", workers, res.OK, conns, res.ErrorSamples)
	}
	t.Logf("%d workers served %v in %v; %.0f wake-ups a second while idle", workers, res.ByHeader, window.Round(time.Millisecond), rate)
	return float64(after-before) / float64(conns), rate * window.Seconds() / float64(conns)
}

// exclusiveEntry reports whether fdinfo lines hold an entry for the socket
// with inode ino (decimal) with EPOLLEXCLUSIVE (1<<28) in its events.
func exclusiveEntry(t *testing.T, fdinfo, ino string) bool {
	t.Helper()
	n, err := strconv.ParseUint(ino, 10, 64)
	if err != nil {
		t.Fatalf("inode %q: %v", ino, err)
	}
	want := "ino:" + strconv.FormatUint(n, 16)
	for _, line := range strings.Split(fdinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || f[2] != "events:" || !strings.Contains(line, " "+want+" ") {
			continue
		}
		ev, err := strconv.ParseUint(f[3], 16, 32)
		if err == nil && ev&(1<<28) != 0 {
			return true
		}
	}
	return false
}

// poolWakeups sums the times every thread of every worker was put on a CPU
// (the third field of /proc/PID/task/TID/schedstat).
func poolWakeups(t *testing.T, b *sandbox.Box, workers int) uint64 {
	t.Helper()
	var pids []string
	for i := 1; i <= workers; i++ {
		pids = append(pids, strconv.Itoa(b.MainPID(config.WorkerUnit(i))))
	}
	out := b.Must("sh", "-c", "for p in "+strings.Join(pids, " ")+"; do cat /proc/$p/task/*/schedstat; done")
	var sum uint64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("schedstat line %q", line)
		}
		n, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			t.Fatalf("schedstat line %q: %v", line, err)
		}
		sum += n
	}
	return sum
}
