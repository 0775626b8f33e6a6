package systemd_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/systemd/sandbox"
)

// With balancing on, every worker takes a share of keep-alive clients: none
// sits idle while the others are saturated (without it, one of four workers
// got no connection at all in 3 of 10 measured runs). The accept gate decides
// the first split; a worker starved of CPU for longer than the heartbeat's
// staleness bound (500ms) during the opening burst counts as frozen and the
// others take its share (seen once, with other sandboxes loading the same 2
// CPUs), and the bounded keep-alive then hands it clients. The bound is 100
// requests here, so a 3s run recycles every connection several times.
func TestBalanceLeavesNoWorkerIdle(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=4\nCLUSTERAPP_KEEPALIVE_REQUESTS=100\n"})
	b.Start(4)
	res := b.Load("/fib?n=20", "-c", "64", "-d", "3s")
	if res.Errors() != 0 {
		t.Fatalf("errors: %v", res.ErrorSamples)
	}
	t.Logf("by worker %v, max/min %.2f", res.ByHeader, res.MaxMinRatio("1", "2", "3", "4"))
	for i := 1; i <= 4; i++ {
		if res.ByHeader[strconv.Itoa(i)] == 0 {
			t.Fatalf("worker %d served nothing: %v", i, res.ByHeader)
		}
	}
}

// A frozen worker costs capacity, never connections: its heartbeat goes
// stale, the others stop leaving connections to it, and a fresh-connection
// load sees no error even before the watchdog replaces it.
func TestBalanceFrozenWorkerBlackHolesNothing(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_WATCHDOG_SEC=30s\n"})
	b.Start(2)
	pid := b.MainPID("clusterapp-worker@2.service")
	b.Must("kill", "-STOP", strconv.Itoa(pid))
	defer b.Run("kill", "-CONT", strconv.Itoa(pid))
	time.Sleep(time.Second) // worker 2's heartbeat goes stale
	res := b.Load("/", "-c", "8", "-d", "3s", "-keepalive=false", "-timeout", "5s")
	t.Logf("%d requests, by worker %v, errors %d", res.Requests, res.ByHeader, res.Errors())
	if res.Errors() != 0 || res.ByHeader["1"] != res.OK || res.OK == 0 {
		t.Fatalf("with worker 2 frozen: ok %d by %v, errors %v", res.OK, res.ByHeader, res.ErrorSamples)
	}
}
