package systemd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// A value over the kernel's limit on one environment string passes
// systemd's own checks, and every worker's execve then fails with E2BIG:
// `clusterapp config --check` refuses it, naming the variable and the
// limit (config.EnvStringProblem), and this is the failure it prevents.
func TestEnvValueOverMaxArgStrlenIsRefused(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\nAPP_BLOB=" + strings.Repeat("x", 200<<10) + "\n"})
	out, err := b.Run("clusterapp", "config", "--check", config.EnvFile)
	if err == nil || !strings.Contains(out, "APP_BLOB is 204800 bytes long") || !strings.Contains(out, "MAX_ARG_STRLEN") {
		t.Errorf("config --check: %v\n%.600s", err, out)
	}
	_, _ = b.Run("systemctl", "start", config.SocketUnit)
	_, _ = b.Run("curl", "-sS", "--max-time", "3", "-o", "/dev/null", "http://127.0.0.1:8080/") // activates worker 1, which cannot start
	journal := ""
	b.Eventually(10*time.Second, "the worker's exec failing with E2BIG in the journal", func() bool {
		journal, _ = b.Run("journalctl", "-b", "--no-pager", "-o", "cat", "-u", config.WorkerUnit(1))
		return strings.Contains(journal, "Argument list too long")
	})
	t.Logf("%s journal:\n%.1500s", config.WorkerUnit(1), journal)
	if state, _ := b.Run("systemctl", "is-active", config.WorkerUnit(1)); strings.TrimSpace(state) == "active" {
		t.Errorf("%s is active with a value the kernel cannot pass", config.WorkerUnit(1))
	}
}
