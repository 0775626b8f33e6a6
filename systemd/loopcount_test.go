package systemd_test

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// A worker that fails in a loop before it ever serves (here: a setting
// only it refuses, so it exits 78 after each back-off) is counted: its
// starts and exits stay in the scrape the other worker answers, so the
// shipped ClusterappWorkerRestarting alert can fire. It claimed no slot,
// so before, it was counted nowhere: its series left the scrape with its
// last good process.
func TestWorkerFailingBeforeServingIsCounted(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	b.Start(2)
	one := config.WorkerUnit(1)
	starts := func() (float64, float64) {
		s, _ := b.Run("curl", "-sS", "--max-time", "2", sandbox.MetricsURL)
		return metricValue(s, `clusterapp_worker_starts_total{worker="1"}`), metricValue(s, `clusterapp_worker_exits_total{result="exit-code",worker="1"}`)
	}
	before, _ := starts()
	if before != 1 {
		t.Fatalf("worker 1's starts before the test = %v, want 1", before)
	}
	b.WriteFile("/etc/systemd/system/"+one+".d/90-broken.conf", "[Service]\nEnvironment=CLUSTERAPP_LOG_LEVEL=bogus\n")
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "restart", "--no-block", one)
	var got, exits float64
	b.Eventually(20*time.Second, "worker 1's failed starts counted", func() bool {
		n, _ := strconv.Atoi(b.Show(one, "NRestarts"))
		got, exits = starts()
		// systemd's count of its restarts, and the manual restart before them.
		return n >= 3 && got >= float64(1+1+n) && exits >= float64(n)
	})
	t.Logf("worker 1 failing: starts_total %v, exits_total{exit-code} %v, NRestarts %s", got, exits, b.Show(one, "NRestarts"))
}

// metricValue is the value of one series in a scrape, -1 when absent.
func metricValue(scrape, series string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(scrape)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}
