package systemd_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// promAPI is the Prometheus server the test starts in the box.
const promAPI = "http://127.0.0.1:9090/api/v1/"

// promConfig scrapes the shipped metrics socket every second and evaluates
// the shipped rules every second, so their for: clauses are the only wait.
const promConfig = `global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [/var/lib/clusterapp-test/clusterapp-alerts.yml]
scrape_configs:
  - job_name: clusterapp
    static_configs: [{targets: ["127.0.0.1:9180"]}]
`

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`  // instant vector
	Values [][2]any          `json:"values"` // range vector
}

// promQuery evaluates expr at time at (zero: now) in the box's Prometheus.
func promQuery(t *testing.T, b *sandbox.Box, expr string, at time.Time) []promSample {
	t.Helper()
	args := []string{"curl", "-sSf", "--max-time", "10", "--get", "--data-urlencode", "query=" + expr}
	if !at.IsZero() {
		args = append(args, "--data-urlencode", fmt.Sprintf("time=%.3f", float64(at.UnixMilli())/1000))
	}
	out := b.Must(append(args, promAPI+"query")...)
	var resp struct {
		Status string `json:"status"`
		Data   struct {
			Result []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Status != "success" {
		t.Fatalf("query %s: %v\n%s", expr, err, out)
	}
	return resp.Data.Result
}

func sampleValue(s promSample) float64 {
	v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
	return v
}

// firing reports whether alert fires now; it paces the callers' polling
// to Prometheus's evaluation interval.
func firing(t *testing.T, b *sandbox.Box, alert string) bool {
	if len(promQuery(t, b, `ALERTS{alertstate="firing",alertname="`+alert+`"}`, time.Time{})) > 0 {
		return true
	}
	time.Sleep(time.Second)
	return false
}

// A real Prometheus scrapes the metrics listener during a load with a
// worker restarted in the middle: what it counts agrees with what the load
// generator was answered, every worker is its own series, the shipped
// alerts stay quiet while the pool is healthy and fire for a stopped
// worker and for a watchdog kill.
func TestPrometheusScrapesThePool(t *testing.T) {
	sandbox.SkipUnlessBoxes(t)
	if _, err := exec.LookPath("prometheus"); err != nil {
		t.Fatal("needs Debian's prometheus package (apt-get install prometheus; make test installs it)")
	}
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_WATCHDOG_SEC=2s\nCLUSTERAPP_RATE_LIMIT=0\n"})
	b.Start(2)
	b.Must("mkdir", "-p", "/var/lib/clusterapp-test")
	b.Copy("../packaging/examples/clusterapp-alerts.yml", "/var/lib/clusterapp-test/clusterapp-alerts.yml")
	b.WriteFile("/var/lib/clusterapp-test/prometheus.yml", promConfig)
	b.Must("systemd-run", "--unit=prometheus-test", "--", "prometheus",
		"--config.file=/var/lib/clusterapp-test/prometheus.yml", "--storage.tsdb.path=/var/lib/clusterapp-test/data",
		"--web.listen-address=127.0.0.1:9090")
	b.Eventually(30*time.Second, "Prometheus scraping both workers", func() bool {
		out, err := b.Run("curl", "-sSf", "--max-time", "2", "--get", "--data-urlencode", `query=count(clusterapp_worker_ready{job="clusterapp"} == 1)`, promAPI+"query")
		return err == nil && strings.Contains(out, `"2"`)
	})

	start := time.Now()
	time.Sleep(2 * time.Second)
	wait := b.LoadAsync("/", "-c", "16", "-d", "30s")
	time.Sleep(15 * time.Second)
	b.Must("systemctl", "restart", config.WorkerUnit(2))
	res := wait()
	time.Sleep(3 * time.Second)
	end := time.Now()
	answered := res.StatusCodes[200]
	t.Logf("load: %d answered 200, codes %v, errors %d", answered, res.StatusCodes, res.Errors())
	if res.Errors() != 0 || answered == 0 {
		t.Fatalf("load through a restart: errors %v", res.ErrorSamples)
	}

	// increase() over a window whose ends are scrape times exactly does not
	// extrapolate: take the scrapes nearest inside [start, end].
	window := promQuery(t, b, fmt.Sprintf(`clusterapp_pool_workers{job="clusterapp"}[%dms]`, end.Sub(start).Milliseconds()), end)
	if len(window) != 1 || len(window[0].Values) < 20 {
		t.Fatalf("scrapes during the run: %+v", window)
	}
	ts := func(v [2]any) time.Time { f, _ := v[0].(float64); return time.UnixMilli(int64(math.Round(f * 1000))) }
	first, last := ts(window[0].Values[0]), ts(window[0].Values[len(window[0].Values)-1])
	expr := fmt.Sprintf(`sum(increase(clusterapp_http_requests_total{job="clusterapp",route="/",code="200"}[%dms]))`, last.Sub(first).Milliseconds())
	counted := promQuery(t, b, expr, last)
	if len(counted) != 1 {
		t.Fatalf("%s: %+v", expr, counted)
	}
	got := sampleValue(counted[0])

	t.Logf("Prometheus: %s = %.0f; the load generator: %d (%.2f%%)", expr, got, answered, 100*(got-float64(answered))/float64(answered))
	if math.Abs(got-float64(answered)) > 0.02*float64(answered) {
		t.Errorf("Prometheus counted %.0f requests, the load generator %d answered: more than 2%% apart", got, answered)
	}
	workers := promQuery(t, b, `clusterapp_http_requests_total{job="clusterapp",route="/",code="200"}`, last)
	seen := map[string]bool{}
	for _, s := range workers {
		seen[s.Metric["worker"]] = true
	}
	if len(seen) != 2 || !seen["1"] || !seen["2"] {
		t.Errorf("series by worker: %v, want workers 1 and 2 each as its own series", seen)
	}
	if quiet := promQuery(t, b, fmt.Sprintf(`ALERTS{alertstate="firing"}[%dms]`, end.Sub(start).Milliseconds()), end); len(quiet) != 0 {
		t.Errorf("alerts fired while the pool was healthy: %+v", quiet)
	}

	// A worker stopped for longer than the degraded alert's for: (1m).
	b.Must("systemctl", "stop", config.WorkerUnit(2))
	took := b.Eventually(100*time.Second, "ClusterappDegraded firing", func() bool { return firing(t, b, "ClusterappDegraded") })
	t.Logf("ClusterappDegraded fired %v after worker 2 stopped", took.Round(time.Second))
	b.Must("systemctl", "start", config.WorkerUnit(2))

	// A frozen worker: the watchdog kills it.
	b.Must("systemctl", "kill", "--signal=SIGSTOP", config.WorkerUnit(1))
	took = b.Eventually(60*time.Second, "ClusterappWatchdogKill firing", func() bool { return firing(t, b, "ClusterappWatchdogKill") })
	t.Logf("ClusterappWatchdogKill fired %v after worker 1 froze", took.Round(time.Second))
	if n, _ := strconv.Atoi(b.Show(config.WorkerUnit(1), "NRestarts")); n < 1 {
		t.Errorf("worker 1 was not restarted by systemd (NRestarts %d)", n)
	}
}
