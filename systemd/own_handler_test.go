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

// helloDropIn points the shipped worker units at cmd/clusterapp-hello, as
// docs/own-handler.md tells an operator to: both commands reset, then set;
// helloExporterDropIn the metrics exporter, which reads the table of the
// routes it is built with.
const (
	helloDropIn = `[Service]
ExecStart=
ExecStart=/usr/bin/clusterapp-hello serve --instance %i
ExecStopPost=
ExecStopPost=-+/usr/bin/clusterapp-hello exited --instance %i
`
	helloExporterDropIn = `[Service]
ExecStart=
ExecStart=/usr/bin/clusterapp-hello metrics
`
)

// Another program on package worker (cmd/clusterapp-hello) runs on the
// shipped units with one drop-in, and gets what the seed service gets: both
// workers READY through the socket, a restart under load that fails no
// request, and the health-gated watchdog killing a wedged worker, which its
// own `exited` counts by systemd's verdict.
func TestOwnHandler(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_WATCHDOG_SEC=2s\nCLUSTERAPP_DEBUG_ENDPOINTS=1\n"})
	b.Copy(sandbox.Bin("clusterapp-hello"), "/usr/bin/clusterapp-hello") // built by sandbox.Main
	b.WriteFile("/etc/systemd/system/clusterapp-worker@.service.d/50-hello.conf", helloDropIn)
	b.WriteFile("/etc/systemd/system/clusterapp-metrics.service.d/50-hello.conf", helloExporterDropIn)
	b.Must("systemctl", "daemon-reload")
	units := b.WorkerUnits(2)

	// (a) The first connection starts the pool; both workers are READY (a
	// Type=notify unit is active only after READY=1) and run the new binary.
	// sandbox's Start asks the seed's "/", which this service has not.
	b.Must("systemctl", "start", config.SocketUnit, config.MetricsSocketUnit)
	if out, err := b.Curl("/hello?name=box"); err != nil || !strings.HasPrefix(out, "200 ") {
		t.Fatalf("first request to the cold socket: %q %v", out, err)
	}
	b.Eventually(sandbox.StartTimeout, "both workers active", func() bool { return b.AllActive(units...) })
	for i, u := range units {
		cmdline := strings.ReplaceAll(b.Must("cat", fmt.Sprintf("/proc/%d/cmdline", b.MainPID(u))), "\x00", " ")
		if want := fmt.Sprintf("/usr/bin/clusterapp-hello serve --instance %d", i+1); strings.TrimSpace(cmdline) != want {
			t.Fatalf("%s runs %q, want %q", u, cmdline, want)
		}
	}
	resp := b.Must("curl", "-sS", "-i", "--max-time", "10", sandbox.URL+"/hello?name=box")
	if !strings.HasPrefix(resp, "HTTP/1.1 200") || !strings.Contains(resp, `"greeting":"hello, box"`) || !strings.Contains(strings.ToLower(resp), "x-worker: ") {
		t.Fatalf("GET /hello through the socket:\n%s", resp)
	}
	if res := b.Load("/hello?name=load", "-c", "8", "-n", "2000", "-keepalive=false"); res.OK != 2000 || res.ByHeader["1"] == 0 || res.ByHeader["2"] == 0 {
		t.Fatalf("load on /hello: %d ok of 2000, by worker %v (want both), errors %v", res.OK, res.ByHeader, res.ErrorSamples)
	}

	// (b) A restart under load: the old worker 1 drains, the socket holds
	// new connections, no request fails. A fixed rate one worker carries
	// (restart_test.go says why).
	old := b.MainPID(units[0])
	wait := b.LoadAsync("/hello?name=drain", "-c", "32", "-rate", "5000", "-d", "5s")
	time.Sleep(time.Second)
	b.Must("systemctl", "restart", units[0])
	if pid := b.MainPID(units[0]); pid == old || pid == 0 || !b.AllActive(units[0]) {
		t.Fatalf("%s not restarted: pid %d -> %d", units[0], old, pid)
	}
	res := wait()
	t.Logf("restart of worker 1 under load: %d requests, %d failed, by worker %v, p99 %v", res.Requests, res.Errors(), res.ByHeader, res.Latency.P99)
	if res.Errors() != 0 || res.OK != res.Requests || res.OK == 0 {
		t.Fatalf("%d of %d requests failed across the restart (status %v): %v", res.Requests-res.OK, res.Requests, res.StatusCodes, res.ErrorSamples)
	}
	if journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", units[0]); !strings.Contains(journal, "drained; exiting") {
		t.Fatalf("the old worker 1 did not drain:\n%s", journal)
	}
	// clusterapp-hello's `exited` (ExecStopPost=) counted the clean exit in
	// the table its workers share: the layout of its own routes.
	scrape := b.Must("curl", "-sSf", "--max-time", "10", sandbox.MetricsURL)
	if n := byWorker(scrape, "clusterapp_worker_exits_total", `result="success",`)["1"]; n != 1 {
		t.Errorf("worker 1's clean exits = %v after its restart, want 1", n)
	}
	if served := byWorker(scrape, "clusterapp_http_requests_total", `code="200",route="/hello",`); served["1"]+served["2"] < 2000 {
		t.Errorf("/hello requests by worker %v: the pool's table lacks the service's route", served)
	}
	if cmdline := strings.ReplaceAll(b.Must("cat", fmt.Sprintf("/proc/%d/cmdline", b.MainPID(config.MetricsServiceUnit))), "\x00", " "); strings.TrimSpace(cmdline) != "/usr/bin/clusterapp-hello metrics" {
		t.Errorf("%s runs %q, want the service's own program", config.MetricsServiceUnit, cmdline)
	}

	// (c) A worker wedged behind a lock still runs but fails its health
	// probe: it stops pinging, and systemd kills it (WatchdogSec=2s) and
	// starts another. The request that wedged it ends with it.
	pids := b.MainPIDs(units...)
	hung := make(chan error, 1)
	go func() {
		_, err := b.Run("curl", "-s", "--max-time", "20", sandbox.URL+"/debug/hang")
		hung <- err
	}()
	var wedged string
	b.Eventually(30*time.Second, "a watchdog kill counted", func() bool {
		s, _ := b.Run("curl", "-sSf", "--max-time", "2", sandbox.MetricsURL)
		for n, v := range byWorker(s, "clusterapp_worker_exits_total", `result="watchdog",`) {
			if i, err := strconv.Atoi(n); err == nil && v >= 1 {
				wedged = config.WorkerUnit(i)
				return true
			}
		}
		return false
	})
	b.Eventually(10*time.Second, wedged+" serving again", func() bool {
		pid := b.MainPID(wedged)
		return pid != 0 && pid != pids[wedged] && b.AllActive(wedged)
	})
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", wedged)
	for _, want := range []string{
		"withholding watchdog pings", // the worker's own line: its probe failed
		"Watchdog timeout",
		fmt.Sprintf("Killing process %d (", pids[wedged]),
		"with signal SIGABRT",
		"goroutine ", // Go's stacks on SIGABRT
		"Failed with result 'watchdog'",
	} {
		if !strings.Contains(journal, want) {
			t.Fatalf("the journal of %s lacks %q:\n%s", wedged, want, journal)
		}
	}
	if n, _ := strconv.Atoi(b.Show(wedged, "NRestarts")); n < 1 {
		t.Errorf("%s NRestarts = %d after a watchdog kill", wedged, n)
	}
	for _, u := range units {
		if u != wedged && b.MainPID(u) != pids[u] {
			t.Errorf("%s was restarted too (pid %d -> %d); only %s was wedged", u, pids[u], b.MainPID(u), wedged)
		}
	}
	if out, err := b.Curl("/hello"); err != nil || !strings.HasPrefix(out, "200 ") {
		t.Errorf("/hello after the watchdog restart: %q %v", out, err)
	}
	select {
	case <-hung:
	case <-time.After(30 * time.Second):
		t.Error("the /debug/hang request outlived its 20s bound")
	}
}
