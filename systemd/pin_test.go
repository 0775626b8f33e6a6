package systemd_test

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// An operator pins the workers one by one, as nginx's worker_cpu_affinity
// does (CPUAffinity= in each instance's drop-in). Each worker then counts
// one CPU of its own, but the balance's primaries are the pool's CPUs
// (every live worker's set together), so under one-request connections
// every worker serves its share; counted by each worker's own CPUs, worker
// 1 alone was a primary and served 44665 of 44674 connections in 3 s.
func TestWorkersPinnedOneByOneShareNewConnections(t *testing.T) {
	n := runtime.NumCPU()
	if n < 2 {
		t.Skip("one CPU: no worker can be pinned apart from another")
	}
	b := sandbox.New(t, sandbox.Options{Env: fmt.Sprintf("CLUSTERAPP_WORKERS=%d\n", n)})
	units := b.WorkerUnits(n)
	for k, u := range units {
		b.WriteFile("/etc/systemd/system/"+u+".d/80-test-pin.conf", fmt.Sprintf("[Service]\nCPUAffinity=%d\n", k))
	}
	b.Must("systemctl", "daemon-reload")
	b.Start(n)
	names := make([]string, n)
	for k, u := range units {
		names[k] = strconv.Itoa(k + 1)
		if got := threadCPUs(t, b, b.MainPID(u)); len(got) != 1 || got[strconv.Itoa(k)] == 0 {
			t.Fatalf("%s threads by Cpus_allowed_list %v, want all on CPU %d (its drop-in)", u, got, k)
		}
	}
	res := b.Load("/", "-c", "64", "-d", "3s", "-keepalive=false")
	if res.Errors() != 0 || res.OK == 0 {
		t.Fatalf("load: %d ok, errors %v", res.OK, res.ErrorSamples)
	}
	_, least := res.Share(names...)
	t.Logf("one-request connections by worker: %v of %d", res.ByHeader, res.OK)
	if least < 0.1 {
		t.Fatalf("one-request connections by worker %v of %d: the least served %.4f of them, want at least 0.1 (every pinned worker a primary)", res.ByHeader, res.OK, least)
	}
}

// threadCPUs counts the threads of process pid by the CPUs they may run on
// (Cpus_allowed_list of /proc/PID/task/TID/status).
func threadCPUs(t *testing.T, b *sandbox.Box, pid int) map[string]int {
	t.Helper()
	out := b.Must("sh", "-c", fmt.Sprintf("grep -h '^Cpus_allowed_list:' /proc/%d/task/*/status", pid))
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		got[strings.TrimSpace(strings.TrimPrefix(line, "Cpus_allowed_list:"))]++
	}
	return got
}
