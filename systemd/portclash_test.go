package systemd_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// When clusterapp.socket cannot listen (another program holds its port),
// the metrics socket must not listen either. When it activated worker 1,
// which requires clusterapp.socket, every scrape made systemd start worker
// 1, fail it on the dependency and start it again at once, about 100,000
// journal lines in 3 s while the scrape hung, and the pool came back
// without its other workers once the port was free. It activates the
// metrics exporter now, but stays bound to clusterapp.socket: a scrape of a
// service that cannot listen is refused at once, and both come back
// together.
func TestMetricsSocketFollowsAFailedServiceSocket(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	squatPort(b)
	if out, err := b.Run("systemctl", "start", config.SocketUnit, config.MetricsSocketUnit); err == nil {
		t.Fatalf("clusterapp.socket started on a port another program holds:\n%s", out)
	}
	before := journalLines(t, b)
	out, err := b.Run("curl", "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", sandbox.MetricsURL)
	time.Sleep(2 * time.Second) // the window in which a trigger loop writes tens of thousands of lines
	if grown := journalLines(t, b) - before; grown > 200 {
		t.Errorf("one scrape wrote %d journal lines while clusterapp.socket was failed", grown)
	}
	if err == nil {
		t.Errorf("a scrape while clusterapp.socket is failed answered %q: the metrics socket listens", out)
	}
	if got, _ := b.Run("systemctl", "is-active", config.MetricsSocketUnit); strings.TrimSpace(got) == "active" {
		t.Errorf("%s is active while %s is failed", config.MetricsSocketUnit, config.SocketUnit)
	}

	// The port is free again: starting the sockets brings the whole pool.
	b.Must("systemctl", "stop", "squatter")
	b.Must("systemctl", "reset-failed")
	b.Must("systemctl", "start", config.SocketUnit, config.MetricsSocketUnit)
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 ") {
		t.Fatalf("first request after the port came free: %q %v", out, err)
	}
	units := b.WorkerUnits(2)
	b.Eventually(sandbox.StartTimeout, "both workers active", func() bool { return b.AllActive(units...) })
	if s, err := b.Run("curl", "-sSf", "--max-time", "5", sandbox.MetricsURL); err != nil || !strings.Contains(s, "clusterapp_pool_workers 2\n") {
		t.Errorf("scrape after recovery: %v\n%.300s", err, s)
	}
}

// journalLines counts the box's journal since boot.
func journalLines(t *testing.T, b *sandbox.Box) int {
	t.Helper()
	out := b.Must("sh", "-c", "journalctl -b --no-pager -o cat | wc -l")
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("journal line count %q: %v", out, err)
	}
	return n
}

// squatPort has another program (python3's http.server, as the transient
// unit squatter.service) listen on the service port, 127.0.0.1:8080, before
// clusterapp.socket starts.
func squatPort(b *sandbox.Box) {
	b.Must("systemd-run", "--unit=squatter", "python3", "-m", "http.server", "--bind", "127.0.0.1", "8080")
	b.Eventually(10*time.Second, "another program listening on 8080", func() bool {
		out, _ := b.Run("ss", "-Hltn", "sport = :8080")
		return strings.TrimSpace(out) != ""
	})
}
