package systemd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// Scenario 6: a bad value in the environment file. The workers refuse to
// start with the clear message in the journal; the socket stays open (a
// client waits in the backlog, it is not refused); fixing the file and
// restarting recovers, and the waiting client is served.
func TestBadEnvFileThenFix(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	b.Start(2)
	b.WriteEnv("CLUSTERAPP_WORKERS=2\nCLUSTERAPP_SHUTDOWN_TIMEOUT=abc\n")
	b.Must("systemctl", "daemon-reload")
	// --no-block: the restart job would wait for workers that can never start.
	b.Must("systemctl", "restart", "--no-block", config.TargetUnit)
	b.Eventually(10*time.Second, "refusal in the journal", func() bool {
		j := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", config.WorkerUnit(1))
		return strings.Contains(j, `invalid configuration: CLUSTERAPP_SHUTDOWN_TIMEOUT="abc" is invalid: expected a duration such as 500ms, 30s or 1m30s`)
	})
	if b.AllActive(config.WorkerUnit(1)) {
		t.Fatal("a worker is active with an invalid environment file")
	}
	if state := b.Show(config.SocketUnit, "ActiveState"); state != "active" {
		t.Fatalf("socket %s with a bad environment file", state)
	}
	// A client connects now: the kernel queues it, nobody refuses it.
	waiting := make(chan string, 1)
	go func() {
		out, err := b.Curl("/")
		if err != nil {
			out += " " + err.Error()
		}
		waiting <- out
	}()
	time.Sleep(time.Second)
	b.WriteEnv("CLUSTERAPP_WORKERS=2\nCLUSTERAPP_SHUTDOWN_TIMEOUT=5s\n")
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "restart", config.TargetUnit)
	select {
	case out := <-waiting:
		if !strings.HasPrefix(out, "200 ") {
			t.Fatalf("the client that waited during the outage got %q", out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting client was never served")
	}
	b.Eventually(10*time.Second, "pool back", func() bool { return b.AllActive(b.WorkerUnits(2)...) })
}
