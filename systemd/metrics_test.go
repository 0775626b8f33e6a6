package systemd_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// series returns the value of every sample of name in a scrape by its
// worker label.
func byWorker(scrape, name, labels string) map[string]float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{` + labels + `worker="([^"]+)"\} (\S+)$`)
	out := map[string]float64{}
	for _, m := range re.FindAllStringSubmatch(scrape, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		out[m[1]] = v
	}
	return out
}

// The metrics listener is a socket of its own, owned by systemd: one
// scrape shows every live worker; the service port has no /metrics; a
// worker's restart continues its counters; systemd's verdict on a
// watchdog kill is counted; CLUSTERAPP_METRICS_LISTEN moves the listener;
// the exporter answers for a stopped pool without starting it.
func TestMetricsListenerShowsThePool(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_WATCHDOG_SEC=2s\nCLUSTERAPP_DEBUG_ENDPOINTS=true\nCLUSTERAPP_RATE_LIMIT=0\n"})
	b.Start(2)
	res := b.Load("/", "-c", "8", "-n", "2000")
	if res.OK != 2000 {
		t.Fatalf("load: %d ok of 2000, errors %v", res.OK, res.ErrorSamples)
	}

	if out, _ := b.Run("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:8080/metrics"); out != "404" {
		t.Errorf("/metrics on the service port: %s, want 404", out)
	}
	scrape := b.Must("curl", "-sSf", sandbox.MetricsURL)
	served := byWorker(scrape, "clusterapp_http_requests_total", `code="200",route="/",`)
	if len(served) != 2 || served["1"]+served["2"] < 2000 {
		t.Fatalf("one scrape: requests by worker %v, want workers 1 and 2 and at least 2000 in all:\n%s", served, scrape)
	}
	for _, want := range []string{"clusterapp_pool_workers 2\n", "clusterapp_pool_workers_desired 2\n", "clusterapp_build_info{goversion="} {
		if !strings.Contains(scrape, want) {
			t.Errorf("the scrape lacks %q", strings.TrimSpace(want))
		}
	}
	if strings.Contains(scrape, "instance=") {
		t.Error("a series carries an instance label of ours")
	}

	// A restart continues worker 2's counters.
	before := served["2"]
	b.Must("systemctl", "restart", config.WorkerUnit(2))
	b.Eventually(10*time.Second, "worker 2 back in the scrape", func() bool {
		s, _ := b.Run("curl", "-sSf", sandbox.MetricsURL)
		return byWorker(s, "clusterapp_worker_ready", "")["2"] == 1
	})
	scrape = b.Must("curl", "-sSf", sandbox.MetricsURL)
	if after := byWorker(scrape, "clusterapp_http_requests_total", `code="200",route="/",`)["2"]; after < before {
		t.Errorf("worker 2's requests went from %v to %v over a restart: counters must continue", before, after)
	}
	if starts := byWorker(scrape, "clusterapp_worker_starts_total", "")["2"]; starts != 2 {
		t.Errorf("worker 2's starts = %v, want 2", starts)
	}
	if exits := byWorker(scrape, "clusterapp_worker_exits_total", `result="success",`)["2"]; exits != 1 {
		t.Errorf("worker 2's clean exits = %v, want 1 (the restart)", exits)
	}

	// A frozen worker: the watchdog kills it, and ExecStopPost= counts why.
	b.Must("systemctl", "kill", "--signal=SIGSTOP", config.WorkerUnit(1))
	b.Eventually(30*time.Second, "worker 1's watchdog kill counted", func() bool {
		s, _ := b.Run("curl", "-sSf", "--max-time", "2", sandbox.MetricsURL)
		return byWorker(s, "clusterapp_worker_exits_total", `result="watchdog",`)["1"] == 1
	})

	// The listener moves with CLUSTERAPP_METRICS_LISTEN, and answers only there. The
	// documented step: restart the metrics socket; the exporter, which holds its
	// descriptor, restarts with it, and the workers are not touched.
	pids := b.MainPIDs(config.WorkerUnit(1), config.WorkerUnit(2))
	b.WriteEnv("CLUSTERAPP_WORKERS=2\nCLUSTERAPP_METRICS_LISTEN=127.0.0.3:9300\n")
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "restart", config.MetricsSocketUnit)
	b.Eventually(10*time.Second, "scrape on the new address", func() bool {
		s, err := b.Run("curl", "-sSf", "--max-time", "2", "http://127.0.0.3:9300/metrics")
		return err == nil && strings.Contains(s, "clusterapp_pool_workers 2\n")
	})
	if out, err := b.Run("curl", "-sS", "--max-time", "2", sandbox.MetricsURL); err == nil {
		t.Errorf("the old metrics address still answers: %.200s", out)
	}
	if now := b.MainPIDs(config.WorkerUnit(1), config.WorkerUnit(2)); now[config.WorkerUnit(1)] != pids[config.WorkerUnit(1)] || now[config.WorkerUnit(2)] != pids[config.WorkerUnit(2)] {
		t.Errorf("moving the metrics listener restarted workers: pids %v, then %v", pids, now)
	}

	// The exporter answers while the pool is down, and a scrape does not start
	// it; a connection to the service port still does (the exporter holds no
	// service socket: a socket starts nothing while a unit it is passed to runs).
	b.Must("systemctl", "stop", config.TargetUnit)
	s := b.Must("curl", "-sSf", "--max-time", "2", "http://127.0.0.3:9300/metrics")
	if !strings.Contains(s, "clusterapp_pool_workers 0\n") || !strings.Contains(s, "clusterapp_pool_workers_desired 2\n") {
		t.Errorf("a scrape of the stopped pool: want 0 workers of 2 desired:\n%s", s)
	}
	time.Sleep(time.Second)
	if b.AllActive(config.WorkerUnit(1)) {
		t.Error("a scrape started the stopped pool")
	}
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 ") {
		t.Fatalf("a request to the stopped pool with the exporter up: %q %v, want 200", out, err)
	}
	b.Eventually(10*time.Second, "the pool back in the scrape", func() bool {
		s, err := b.Run("curl", "-sSf", "--max-time", "2", "http://127.0.0.3:9300/metrics")
		return err == nil && strings.Contains(s, "clusterapp_pool_workers 2\n")
	})
}
