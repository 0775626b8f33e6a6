package systemd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// clusterapp.service is the one unit operators type: a pool started by a
// connection pulls it in, `systemctl reload clusterapp` is the rolling
// restart (no failed request, every worker replaced), and `systemctl stop
// clusterapp` stops everything, the sockets included, so the next
// connection is refused instead of starting the pool again.
func TestServiceUnitStartReloadStop(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	b.Start(2) // the socket alone, then a connection
	b.Eventually(10*time.Second, "clusterapp.service pulled in by the pool", func() bool {
		return b.Show("clusterapp.service", "ActiveState") == "active"
	})

	units := b.WorkerUnits(2)
	old := b.MainPIDs(units...)
	wait := b.LoadAsync("/fib?n=15", "-c", "32", "-rate", "5000", "-d", "5s")
	time.Sleep(1500 * time.Millisecond)
	b.Must("systemctl", "reload", "clusterapp")
	res := wait()
	for _, u := range units {
		if pid := b.MainPID(u); pid == old[u] || pid == 0 {
			t.Errorf("systemctl reload clusterapp: %s not restarted (pid %d -> %d)", u, old[u], pid)
		}
	}
	if res.Errors() != 0 || res.OK != res.Requests {
		t.Errorf("%d of %d requests failed during systemctl reload clusterapp (status %v): %v", res.Requests-res.OK, res.Requests, res.StatusCodes, res.ErrorSamples)
	}

	b.Must("systemctl", "stop", "clusterapp")
	for _, u := range append([]string{config.SocketUnit, config.MetricsSocketUnit, config.TargetUnit}, units...) {
		if s := b.Show(u, "ActiveState"); s != "inactive" {
			t.Errorf("after systemctl stop clusterapp, %s is %s", u, s)
		}
	}
	if out, err := b.Curl("/"); err == nil || strings.HasPrefix(out, "200") {
		t.Errorf("a connection after systemctl stop clusterapp: %q %v, want refused", out, err)
	}
	time.Sleep(500 * time.Millisecond)
	if active := b.ActiveWorkers(); len(active) != 0 {
		t.Errorf("the connection restarted workers %v", active)
	}

	b.Must("systemctl", "start", "clusterapp")
	b.Eventually(10*time.Second, "the pool back after systemctl start clusterapp", func() bool { return b.AllActive(units...) })
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 ") {
		t.Errorf("after systemctl start clusterapp: %q %v", out, err)
	}
}
