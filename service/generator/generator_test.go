package generator

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "clusterapp.env")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func generate(t *testing.T, env string, cpus int) (map[string]string, string) {
	t.Helper()
	dir := t.TempDir()
	var stderr bytes.Buffer
	if err := Run(env, dir, cpus, &stderr); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
		}
		return nil
	})
	return out, stderr.String()
}

func TestOneWorkerPerCPUByDefault(t *testing.T) {
	files, stderr := generate(t, filepath.Join(t.TempDir(), "missing.env"), 4)
	if stderr != "" {
		t.Fatalf("a missing file is not a problem: %q", stderr)
	}
	got := files["clusterapp.target.d/50-workers.conf"]
	if strings.Count(got, "Wants=clusterapp-worker@") != 4 || !strings.Contains(got, "Wants=clusterapp-worker@4.service\n") {
		t.Fatalf("target drop-in:\n%s", got)
	}
	if _, ok := files["clusterapp.socket.d/50-env.conf"]; ok {
		t.Fatal("socket drop-in written although the file sets nothing for it")
	}
	svc := files["clusterapp-worker@.service.d/50-env.conf"]
	for _, want := range []string{"WatchdogSec=10000ms", "TimeoutStopSec=30000ms", "LimitNOFILE=65536", "MemoryMax=infinity", "Environment=CLUSTERAPP_MAX_IN_FLIGHT=1"} {
		if !strings.Contains(svc, want+"\n") {
			t.Errorf("worker drop-in lacks %s:\n%s", want, svc)
		}
	}
}

func TestEnvFileDrivesUnits(t *testing.T) {
	env := write(t, "CLUSTERAPP_WORKERS=3\nCLUSTERAPP_LISTEN=127.0.0.1:9090\nCLUSTERAPP_BACKLOG=1024\nCLUSTERAPP_WATCHDOG_SEC=2s\nCLUSTERAPP_SHUTDOWN_TIMEOUT=5s\nCLUSTERAPP_MEMORY_MAX=512M\n")
	files, stderr := generate(t, env, 2)
	if stderr != "" {
		t.Fatal(stderr)
	}
	if got := files["clusterapp.target.d/50-workers.conf"]; strings.Count(got, "Wants=") != 3 {
		t.Fatalf("target drop-in:\n%s", got)
	}
	if got := files["clusterapp.socket.d/50-env.conf"]; !strings.Contains(got, "ListenStream=\nListenStream=127.0.0.1:9090\nBacklog=1024\n") {
		t.Fatalf("socket drop-in:\n%s", got)
	}
	svc := files["clusterapp-worker@.service.d/50-env.conf"]
	for _, want := range []string{"WatchdogSec=2000ms", "TimeoutStopSec=15000ms", "MemoryMax=512M", "Environment=CLUSTERAPP_MAX_IN_FLIGHT=1"} {
		if !strings.Contains(svc, want+"\n") {
			t.Errorf("worker drop-in lacks %s:\n%s", want, svc)
		}
	}
}

func TestInvalidFileFallsBackToDefaults(t *testing.T) {
	env := write(t, "CLUSTERAPP_WORKERS=many\n")
	files, stderr := generate(t, env, 2)
	if !strings.Contains(stderr, `CLUSTERAPP_WORKERS="many"`) || !strings.Contains(stderr, "defaults") {
		t.Fatalf("stderr %q", stderr)
	}
	if got := files["clusterapp.target.d/50-workers.conf"]; strings.Count(got, "Wants=") != 2 {
		t.Fatalf("target drop-in:\n%s", got)
	}
}

func TestAdmissionShareOfCPUs(t *testing.T) {
	env := write(t, "CLUSTERAPP_WORKERS=4\n")
	files, _ := generate(t, env, 16)
	if svc := files["clusterapp-worker@.service.d/50-env.conf"]; !strings.Contains(svc, "Environment=CLUSTERAPP_MAX_IN_FLIGHT=4\n") {
		t.Fatalf("16 CPUs over 4 workers must admit 4 each:\n%s", svc)
	}
}
