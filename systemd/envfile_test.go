package systemd_test

import (
	"fmt"
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

// A GOMEMLIMIT the Go runtime cannot parse (512M is systemd's spelling of a
// size, not Go's) used to kill every worker before its first instruction:
// 136 restarts in 5 s and about 1000 journal lines a second, nothing
// served. The generator now keeps the value, exactly as systemd reads it
// from the file (quotes, %, spaces), out of the workers' environment: they
// start, serve and stay up; a valid value still reaches them.
func TestInvalidGOMEMLIMITDoesNotCrashLoop(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\n"})
	b.Start(1)
	unit := config.WorkerUnit(1)
	for _, value := range []string{`512M`, `"5%MiB"`, `"1 GiB"`, `'a"b'`} {
		b.WriteEnv("CLUSTERAPP_WORKERS=1\nGOMEMLIMIT=" + value + "\n")
		b.Must("systemctl", "daemon-reload")
		b.Must("systemctl", "restart", "--no-block", unit)
		b.Eventually(15*time.Second, "worker active with GOMEMLIMIT="+value, func() bool { return b.AllActive(unit) })
		time.Sleep(time.Second)
		if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 ") {
			t.Fatalf("GOMEMLIMIT=%s: GET / gave %q, %v", value, out, err)
		}
		if env := workerEnv(b, unit); strings.Contains(env, "\nGOMEMLIMIT=") {
			t.Fatalf("GOMEMLIMIT=%s reached the worker:\n%s", value, env)
		}
		if n := b.Show(unit, "NRestarts"); n != "0" {
			t.Fatalf("GOMEMLIMIT=%s: the worker restarted %s times; its journal:\n%s", value, n,
				b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-n", "20", "-u", unit))
		}
	}
	// A valid value reaches the worker as it is.
	b.WriteEnv("CLUSTERAPP_WORKERS=1\nGOMEMLIMIT=300MiB\n")
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "restart", unit)
	b.Eventually(15*time.Second, "worker active with GOMEMLIMIT=300MiB", func() bool { return b.AllActive(unit) })
	if env := workerEnv(b, unit); !strings.Contains(env, "\nGOMEMLIMIT=300MiB\n") {
		t.Fatalf("GOMEMLIMIT=300MiB did not reach the worker:\n%s", env)
	}
}

// workerEnv is the environment of unit's main process, one variable a line.
func workerEnv(b *sandbox.Box, unit string) string {
	return "\n" + strings.TrimSpace(b.Must("sh", "-c", fmt.Sprintf("tr '\\0' '\\n' </proc/%d/environ", b.MainPID(unit)))) + "\n"
}

// config.SystemdSets against systemd itself: every variable listed is one
// systemd sets in a worker's environment, and a value for it in the
// environment file replaces systemd's (the reason the generator refuses
// them): with NOTIFY_SOCKET in the file, the worker's READY=1 goes nowhere.
func TestSystemdSetsEveryVariableListed(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\n"})
	b.Start(1)
	unit := config.WorkerUnit(1)
	env := workerEnv(b, unit)
	for _, k := range config.SystemdSets {
		if !strings.Contains(env, "\n"+k+"=") {
			t.Errorf("systemd does not set %s for %s:%s", k, unit, env)
		}
	}
	b.WriteEnv("CLUSTERAPP_WORKERS=1\nNOTIFY_SOCKET=/run/nowhere\n")
	b.Must("systemctl", "daemon-reload")
	if j := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "--grep", "NOTIFY_SOCKET is set by systemd"); !strings.Contains(j, "remove the line") {
		t.Errorf("the generator did not name NOTIFY_SOCKET at daemon-reload: %q", j)
	}
	b.Must("systemctl", "restart", "--no-block", unit)
	b.Eventually(15*time.Second, "the worker started with the file's NOTIFY_SOCKET", func() bool {
		pid := b.MainPID(unit)
		return pid > 0 && strings.Contains(workerEnv(b, unit), "\nNOTIFY_SOCKET=/run/nowhere\n")
	})
}
